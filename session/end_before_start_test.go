package session_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// E1, E5: an end before the session's start (Go's zero time, year 1,
// included) is the start: the session ends at once. Regression for a
// session whose end at 0001-01-01T00:00:00Z read as "no end".
func TestEndBeforeStartIsTheStart_E1(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(until())
	for _, until := range []string{"0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z"} {
		acct := uuid.NewString()
		f.put("account", acct, `{"account_id": "`+acct+`", "until": "`+until+`"}`)
		f.dispatch()
		s := f.session(id, acct)
		require.Equal(t, s.StartedAt, *s.EndsAt, "until %s", until)
		require.Equal(t, s.EndsAt, f.timerDue(s), "the end is due at once (until %s)", until)
	}
}

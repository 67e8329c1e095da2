package session_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/session"
)

// S3: a session's origin is the earliest-committed start event delivered
// to it and startedAt is that event's commit time, even when the start is
// delivered after the session exists.
//
// The dispatcher handles events in commit order (positions follow commit
// order, L1), so through events alone a session is always created by its
// earliest start and the late case cannot be produced from the outside. It
// arises when a session comes into being outside the event path while the
// dispatcher lags behind an earlier-committed start: a session created by a
// call rather than an event (as tool sessions are, X1), a repair or import
// that writes the row. The test stands for that writer: it commits the
// start event E1, writes the session row itself with a later started_at and
// no origin, and only then lets the dispatcher reach E1. The dispatcher's
// rule must hold whoever created the row.
func TestS3LateEarlierStartMovesStartedAt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	acct, other := uuid.NewString(), uuid.NewString()

	e1 := f.put("account", "a", account(acct))
	e1Other := f.put("account", "b", account(other))
	f.clock.Advance(time.Hour)

	// Both sessions appear outside the event path while the dispatcher has
	// not reached E1: acct's after E1 committed, other's before.
	late := e1.CommitTime.Add(30 * time.Minute)
	early := e1Other.CommitTime.Add(-time.Hour)
	for _, s := range []struct {
		id      string
		started time.Time
	}{{acct, late}, {other, early}} {
		_, err := f.app.Pool.Exec(f.ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, created_at, updated_at)
			VALUES ($1, $2, 1, $3, 'OPEN', $4, $5, $5)`, monitorID, s.id, account(s.id), s.started, f.clock.Now())
		require.NoError(t, err)
	}

	e2 := f.put("account", "c", account(acct)) // a start committed after E1
	f.dispatch()

	s := f.session(monitorID, acct)
	require.Equal(t, e1.CommitTime, s.StartedAt, "startedAt moves back to E1's commit time")
	require.Equal(t, &e1.ID, s.OriginEventID, "E1 becomes the origin")
	require.Equal(t, session.Open, s.Status)
	require.Equal(t, []delivered{{e1.ID, []string{"opened"}}, {e2.ID, []string{"opened"}}}, f.delivered(s),
		"both starts are delivered; the later one does not move startedAt again")

	o := f.session(monitorID, other)
	require.Equal(t, early, o.StartedAt, "a start committed after the session started does not move it")
	require.Equal(t, []delivered{{e1Other.ID, []string{"opened"}}}, f.delivered(o))
	require.Empty(t, f.intake(monitorID))
}

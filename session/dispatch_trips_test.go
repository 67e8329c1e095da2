package session_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Issue 14: the dispatcher is the pipeline's one serial step, so its round
// trips are counted. A batch that delivers events to their sessions spends
// three: one begins the transaction, locks the cursor and reads the events
// after it; one delivers; one records the batch, moves the cursor and
// commits. A poll that finds nothing spends two (the read, the commit).
func TestDispatchRoundTrips(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	acct := uuid.NewString()
	f.put("account", acct, account(acct))

	pool, trips := pgtest.CountedPool(t, f.app.Pool)
	d := session.NewDispatcher(pool, action.NewStore(pool, f.clock, f.app.Kinds), f.clock, f.log)
	d.Notifier = ledger.NewNotifier(f.app.Pool) // its notifications are not the batch's

	// The first batch connects, builds the trigger index and creates the
	// session: not counted.
	require.Equal(t, 1, dispatchAll(t, f.ctx, d))
	s := f.session(monitorID, acct)

	for i := range 3 {
		f.put("entry", fmt.Sprint(i), entry(acct, i))
	}
	trips.Reset()
	n, err := d.DispatchOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.EqualValues(t, 3, trips.Total(), "a delivering batch")
	require.Len(t, f.inputs(s), 3)

	trips.Reset()
	n, err = d.DispatchOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.EqualValues(t, 2, trips.Total(), "a poll that finds nothing")
}

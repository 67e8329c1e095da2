package session

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Issue 14: the events a dispatch batch reads in the round trip that
// locks the cursor are read after the position the lock read, and none
// are read by a dispatcher that did not get the lock (another one holds
// it), however many wait.
func TestEventsAreReadOnlyUnderTheCursorLock(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	for range 3 {
		_, err := ledger.NewStore(pool, clock.Real{}).AppendEvent(ctx, "test.event", jsonvalue.MustEncode(map[string]any{"n": 1}), "")
		require.NoError(t, err)
	}
	read := func() (locked bool, events []ledger.Event, err error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return false, nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var cursor, epoch int64
		b := &pgx.Batch{}
		queueLockCursor(b, &cursor, &epoch, &locked)
		ledger.QueueReadAfter(b, lockedCursor, 10, &events)
		return locked, events, tx.SendBatch(ctx, b).Close()
	}
	locked, events, err := read()
	require.NoError(t, err)
	require.True(t, locked)
	require.Len(t, events, 3, "the lock's own transaction reads after the cursor")

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM dispatch_state FOR UPDATE`)
	require.NoError(t, err)
	type result struct {
		locked bool
		n      int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		locked, events, err := read()
		done <- result{locked, len(events), err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.False(t, r.locked)
		require.Zero(t, r.n, "a dispatcher without the lock reads nothing")
	case <-time.After(30 * time.Second):
		t.Fatal("the read waited for the cursor instead of skipping it")
	}
}

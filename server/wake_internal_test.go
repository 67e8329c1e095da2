package server

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// Issue 14: the listener skips the copies of this process's own wake-ups
// (payload: its origin), which woke the loop at once when queued; any
// other wake-up wakes it.
func TestWakeHandlerSkipsItsOwnCopies(t *testing.T) {
	t.Parallel()
	ch := make(chan struct{}, 1)
	woke := func(origin, payload string) bool {
		require.NoError(t, wakeHandler(ch, origin)(context.Background(), &pgconn.Notification{Payload: payload}, nil))
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	require.False(t, woke("process a", "process a"), "its own copy")
	require.True(t, woke("process a", "process b"), "another process's")
	require.True(t, woke("process a", ""), "one sent within a transaction")
	require.True(t, woke("", ""), "no origin: every notification wakes")
}

package due_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/due"
)

// A full batch goes round again at once; after a short one the loop waits
// for the wake (the poll is an hour), and stops with its context.
func TestLoopRounds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	results := []int{10, 10, 3, 0}
	calls := make(chan int, len(results))
	wake := make(chan struct{})
	n := 0
	l := due.Loop{
		Name:  "test",
		Batch: 10,
		Once: func(context.Context) (int, error) {
			i := n
			n++
			calls <- i
			if i == len(results)-1 {
				cancel()
			}
			return results[i], nil
		},
		Next:  func(context.Context) (time.Time, error) { return time.Time{}, nil },
		Clock: clock.NewManual(time.Unix(0, 0)),
		Log:   slog.New(slog.DiscardHandler),
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, wake, time.Hour) }()
	for i := range 3 {
		require.Equal(t, i, <-calls)
	}
	wake <- struct{}{} // round 3 came after the short batch only when woken
	require.Equal(t, 3, <-calls)
	require.NoError(t, <-done)
}

// Package due runs a loop over rows that come due at stored times: the
// session timers and the clocks of schedule triggers. Each round handles
// what is due; between rounds the loop sleeps until the earliest row is
// due, at most a poll period, or until woken.
package due

import (
	"context"
	"log/slog"
	"time"

	"github.com/actionsledger/actionsledger/internal/clock"
)

// Held is how soon the loop looks again when rows were due but none could
// be handled (another transaction holds them).
const Held = 20 * time.Millisecond

// Loop is one such loop.
type Loop struct {
	// Name names the loop in its log lines.
	Name string
	// Once handles up to Batch due rows and returns how many it handled.
	Once  func(ctx context.Context) (int, error)
	Batch int
	// Next returns when the earliest row is due; zero when none is.
	Next  func(ctx context.Context) (time.Time, error)
	Clock clock.Clock
	Log   *slog.Logger
}

// Run runs rounds until ctx ends: a full batch goes round again at once;
// otherwise the loop sleeps until the next due time, at most poll (which
// also bounds how late a row set by another process without a
// notification is seen), or until wake. It returns nil when ctx ends.
func (l Loop) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) error {
	sleep := time.NewTimer(0)
	defer sleep.Stop()
	for {
		n, err := l.Once(ctx)
		if err != nil && ctx.Err() == nil {
			l.Log.Error(l.Name+" failed", "err", err)
		}
		wait := poll
		switch {
		case err == nil && n >= l.Batch:
			wait = 0 // a full batch: there may be more
		case err == nil:
			next, err := l.Next(ctx)
			if err != nil && ctx.Err() == nil {
				l.Log.Error(l.Name+": next due", "err", err)
			}
			if !next.IsZero() {
				wait = min(wait, max(next.Sub(l.Clock.Now()), 0))
			}
			if wait == 0 && n == 0 {
				wait = Held
			}
		}
		sleep.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-sleep.C:
		}
	}
}

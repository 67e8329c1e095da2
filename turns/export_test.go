package turns

import (
	"context"
	"time"
)

// SetRetrySleep replaces the wait between retries of e, so tests of T7 see
// the backoff it asks for without waiting for it. Compiled only into this
// package's tests.
func SetRetrySleep(e *Executor, sleep func(ctx context.Context, d time.Duration) error) {
	e.sleep = sleep
}

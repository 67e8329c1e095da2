// Package clock lets code read the time through an interface so tests can
// inject a manual clock. Times are UTC, truncated to microseconds (the
// precision PostgreSQL stores).
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	// Now returns the current time, UTC, truncated to microseconds.
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now in UTC truncated to microseconds.
func (Real) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Manual is a clock that moves only when told. Safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock set to t.
func NewManual(t time.Time) *Manual { return &Manual{now: t.UTC().Truncate(time.Microsecond)} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d).Truncate(time.Microsecond)
	m.mu.Unlock()
}

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.now = t.UTC().Truncate(time.Microsecond)
	m.mu.Unlock()
}

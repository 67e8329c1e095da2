package turns

import (
	"context"
	"sync"
	"time"
)

// ambientEvery is how often a running turn's reported status is written
// at most (G8): the newest line wins; the commit writes the last one.
const ambientEvery = time.Second

// liveStatus writes the ambient status a running turn reports (G8,
// Request.Status) off the handler's goroutine: at most one write per
// ambientEvery, the newest line winning; stop drops what is pending and
// waits for a write in flight, so no write lands after the turn's commit.
type liveStatus struct {
	write func(ctx context.Context, line string)
	ctx   context.Context

	mu      sync.Mutex
	pending *string
	last    time.Time
	busy    bool // a write goroutine runs, or timer will start one
	timer   *time.Timer
	stopped bool
	wg      sync.WaitGroup
}

func newLiveStatus(ctx context.Context, write func(ctx context.Context, line string)) *liveStatus {
	return &liveStatus{write: write, ctx: ctx}
}

// report asks for line to be written. Safe for concurrent use; a nil
// liveStatus ignores it.
func (s *liveStatus) report(line string) {
	if s == nil {
		return
	}
	line = ambient(line)
	if line == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.pending = &line
	if s.busy {
		return // the running writer or timer takes it
	}
	s.busy = true
	s.wg.Add(1)
	if wait := ambientEvery - time.Since(s.last); wait > 0 {
		s.timer = time.AfterFunc(wait, s.run)
		return
	}
	go s.run()
}

// run writes pending lines until none is left, keeping the pace.
func (s *liveStatus) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if s.stopped || s.pending == nil {
			s.busy = false
			s.mu.Unlock()
			return
		}
		line := *s.pending
		s.pending = nil
		s.last = time.Now()
		s.mu.Unlock()
		s.write(s.ctx, line)
		s.mu.Lock()
		wait := ambientEvery - time.Since(s.last)
		more := s.pending != nil && !s.stopped
		s.mu.Unlock()
		if more && wait > 0 {
			s.mu.Lock()
			if !s.stopped {
				s.wg.Add(1)
				s.timer = time.AfterFunc(wait, s.run)
				s.mu.Unlock()
				return // busy stays set for the timer's run
			}
			s.mu.Unlock()
		}
	}
}

// stop drops pending lines and waits for a write in flight. A timer not
// yet fired finds the status stopped and returns.
func (s *liveStatus) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.stopped = true
	s.pending = nil
	if s.timer != nil && s.timer.Stop() {
		s.wg.Done() // its run will not happen
	}
	s.mu.Unlock()
	s.wg.Wait()
}

package graph

import (
	"context"
	"sync"
	"sync/atomic"
)

// box is one subscriber's queue of what the shared reader of its
// subscription read for it (issue 12: sessionUpdates and inboxUpdates read
// once per change for all their subscribers). The reader puts without
// ever waiting, so a subscriber whose client reads slowly holds back no
// one else; the subscriber's goroutine takes in order. A box holds up to
// limit items; an item that can be folded into the last one (merge) takes
// no room, so a slow subscriber of state updates is caught up in memory.
// What does not fit ends the box: the reader closes it with the reason,
// which the subscriber gets once it has taken what the box held.
type box[T any] struct {
	limit  int
	merge  func(last, v T) (T, bool) // nil: nothing merges
	merged *atomic.Int64             // counts merges, when set

	mu    sync.Mutex
	items []T
	wake  chan struct{} // has a value when items or the end wait
	ended bool
	end   error
}

func newBox[T any](limit int, merge func(last, v T) (T, bool), merged *atomic.Int64) *box[T] {
	return &box[T]{limit: max(limit, 1), merge: merge, merged: merged, wake: make(chan struct{}, 1)}
}

// put queues v, folded into the last item when merge allows. It reports
// false, queueing nothing, when the box is full or has ended. over lets v
// go past the limit by one: a state update that arrives when the box is
// full of items it cannot fold into (the next state update folds into it).
func (b *box[T]) put(v T, over bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return false
	}
	if n := len(b.items); n > 0 && b.merge != nil {
		if m, ok := b.merge(b.items[n-1], v); ok {
			b.items[n-1] = m
			if b.merged != nil {
				b.merged.Add(1)
			}
			return true
		}
	}
	if len(b.items) >= b.limit && !(over && len(b.items) == b.limit) {
		return false
	}
	b.items = append(b.items, v)
	b.signal()
	return true
}

// close ends the box with err (nil: the subscription is complete) once
// its items are taken. The first end stays.
func (b *box[T]) close(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended, b.end = true, err
	b.signal()
}

func (b *box[T]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take waits for items and returns all the box holds; once the box has
// ended and is empty, done is true with the reason (nil: complete). When
// ctx ends it returns done with ctx's error.
func (b *box[T]) take(ctx context.Context) (items []T, done bool, err error) {
	for {
		b.mu.Lock()
		if len(b.items) > 0 {
			items, b.items = b.items, nil
			b.mu.Unlock()
			return items, false, nil
		}
		if b.ended {
			b.mu.Unlock()
			return nil, true, b.end
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
}

// liveHubs are the shared readers of a Resolver's subscriptions: one per
// watched session, one for the inbox.
type liveHubs struct {
	mu       sync.Mutex
	sessions map[int64]*sessionHub
	inbox    *inboxRun

	merged atomic.Int64 // updates folded into one a subscriber had not taken
	lagged atomic.Int64 // subscribers ended because their box was full
	reads  atomic.Int64 // reads of the shared readers
}

// LiveStats counts what the subscriptions' shared readers did since the
// resolver was made (tests and benchmarks watch it).
type LiveStats struct {
	// Reads: database reads of the sessionUpdates and inboxUpdates
	// readers, each for all the subscribers of what changed.
	Reads int64
	// Merged: state updates folded into one a slow subscriber had not
	// taken yet (it is caught up in memory).
	Merged int64
	// Lagged: subscribers ended with SUBSCRIPTION_LAGGED because their
	// queue was full of what cannot be folded (transcript entries, inbox
	// changes).
	Lagged int64
	// SessionReaders: sessions being read for their watchers now.
	SessionReaders int
}

// LiveStats returns the shared readers' counters.
func (r *Resolver) LiveStats() LiveStats {
	r.live.mu.Lock()
	n := len(r.live.sessions)
	r.live.mu.Unlock()
	return LiveStats{Reads: r.live.reads.Load(), Merged: r.live.merged.Load(), Lagged: r.live.lagged.Load(), SessionReaders: n}
}

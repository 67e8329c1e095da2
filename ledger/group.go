package ledger

import (
	"context"
	"sync"
	"time"
)

// Group commit of single writes (issue 14).
//
// Concurrent PutValue and AppendEvent calls queue their writes; a runner
// takes everything queued (up to MaxGroup writes, MaxGroupBytes of data)
// and commits it as one transaction with one ledger-head update, while the
// next calls queue behind it. No call waits for company: a write that
// arrives at an idle store is committed at once, alone. Runners exist only
// while there is work, so an idle store costs nothing.
//
// Each write keeps its own outcome: a repeated idempotency key returns the
// first result, a conflicting one fails that write alone. When the group's
// transaction fails (a statement refused by PostgreSQL), every write of it
// is tried again in a group of its own, so the one that caused it fails
// alone and the others commit. When the outcome of a commit is unknown (the
// connection lost), every write of the group gets that error, as a single
// write would.

// Defaults of the group committer.
const (
	// DefaultMaxGroup is the most writes one group commits.
	DefaultMaxGroup = 256
	// DefaultMaxGroupBytes bounds the data of one group (a write larger
	// than that still goes, alone).
	DefaultMaxGroupBytes = 8 << 20
	// DefaultGroupRunners is how many groups may be in flight at once.
	// One holds the head while the next writes its records and keys.
	DefaultGroupRunners = 2
	// groupTimeout bounds one group's transaction.
	groupTimeout = 30 * time.Second
)

// queued is one write waiting in the group committer.
type queued struct {
	ctx  context.Context
	w    write
	done chan outcome // buffered: the runner never waits on the caller
}

// committer queues writes and runs their groups.
type committer struct {
	s       *Store
	mu      sync.Mutex
	queue   []*queued
	runners int
}

// submit queues w and waits for its outcome, or for ctx to end (the write
// may then still commit, as any write whose caller gave up).
func (c *committer) submit(ctx context.Context, w write) outcome {
	q := &queued{ctx: ctx, w: w, done: make(chan outcome, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, q)
	start := c.runners < c.s.groupRunners()
	if start {
		c.runners++
	}
	c.mu.Unlock()
	if start {
		go c.run()
	}
	select {
	case o := <-q.done:
		return o
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	}
}

// run commits groups until the queue is empty.
func (c *committer) run() {
	for {
		group := c.take()
		if group == nil {
			return
		}
		c.commit(group)
	}
}

// take removes the next group from the queue, or ends the runner (nil)
// when there is none. Writes whose callers gave up are dropped. A write
// with the idempotency key of one already in the group waits for the next
// group, where it finds the first one's result.
func (c *committer) take() []*queued {
	c.mu.Lock()
	defer c.mu.Unlock()
	var group, rest []*queued
	var keys map[string]bool
	size := 0
	for i, q := range c.queue {
		if len(group) >= c.s.maxGroup() || (len(group) > 0 && size+len(q.w.data) > c.s.maxGroupBytes()) {
			rest = append(rest, c.queue[i:]...)
			break
		}
		if q.ctx.Err() != nil {
			q.done <- outcome{err: q.ctx.Err()}
			continue
		}
		if q.w.idem != "" {
			if keys[q.w.idem] {
				rest = append(rest, q)
				continue
			}
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[q.w.idem] = true
		}
		group = append(group, q)
		size += len(q.w.data)
	}
	c.queue = rest
	if len(group) == 0 {
		c.runners--
		return nil
	}
	return group
}

// commit runs one group and hands out its outcomes.
func (c *committer) commit(group []*queued) {
	ws := make([]write, len(group))
	for i, q := range group {
		ws[i] = q.w
	}
	out, err := c.s.runGroup(ws)
	if err != nil && len(group) > 1 && statementFailed(err) {
		// The transaction rolled back: try each write alone, so the one
		// PostgreSQL refused fails by itself.
		for _, q := range group {
			o, err := c.s.runGroup([]write{q.w})
			if err != nil {
				q.done <- outcome{err: err}
			} else {
				q.done <- o[0]
			}
		}
		return
	}
	for i, q := range group {
		if err != nil {
			q.done <- outcome{err: err}
		} else {
			q.done <- out[i]
		}
	}
}

// runGroup commits ws in one transaction on a pooled connection.
func (s *Store) runGroup(ws []write) ([]outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return runImplicit(ctx, conn.Conn(), ws, s.clock.Now())
}

func (s *Store) maxGroup() int {
	if s.MaxGroup > 0 {
		return s.MaxGroup
	}
	return DefaultMaxGroup
}

func (s *Store) maxGroupBytes() int {
	if s.MaxGroupBytes > 0 {
		return s.MaxGroupBytes
	}
	return DefaultMaxGroupBytes
}

func (s *Store) groupRunners() int {
	if s.GroupRunners > 0 {
		return s.GroupRunners
	}
	return DefaultGroupRunners
}

package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
//
// Each write keeps its caller's deadline too (issue 10 item 1: no request's
// work survives its deadline). A group's transaction is explicit, and BEGIN,
// its statement and COMMIT go to PostgreSQL together, in one round trip,
// once every member's context is checked, under the committer's lock, to be
// still live. The deadline is kept by PostgreSQL itself: the batch sets the
// transaction's statement_timeout to the earliest member's deadline less
// commitMargin, so a statement still running (waiting on a lock, say) then
// is stopped there and PostgreSQL skips the COMMIT; a cancel request sent
// when the deadline passes would race the lock's release. A write whose
// deadline is nearer than commitMargin when its group is formed is not
// sent: its call waits for the deadline and returns the context's error.
// So a call whose context ends before its group's batch is sent returns the
// context's error and its write is certainly not committed. A call whose
// context is cancelled (not timed out) after it still cancels the statement
// in PostgreSQL at once, and gets the batch's true outcome: nothing
// committed and the context's error when the cancel stopped the statement
// (the other members then go again), the committed write when the
// statement had already finished.

// Defaults of the group committer.
const (
	// DefaultMaxGroup is the most writes one group commits.
	DefaultMaxGroup = 256
	// DefaultMaxGroupBytes bounds the data of one group (a write larger
	// than that still goes, alone).
	DefaultMaxGroupBytes = 8 << 20
	// DefaultGroupRunners is how many groups may be in flight at once.
	// One: the writes that arrive while a group commits make the next
	// group, so groups grow with the load, and a statement's fixed cost
	// (its plan's start-up, the commit) is shared by more writes. Measured
	// on two cores with 8 clients and the pipeline running (make bench):
	// 1,330 putValue/s with one runner against 1,077 with two, whose groups
	// were half the size and waited on each other's head lock (issue 14).
	DefaultGroupRunners = 1
	// groupTimeout bounds one group's transaction.
	groupTimeout = 30 * time.Second
	// cancelTimeout bounds the cancel request sent to PostgreSQL when a
	// member's context ends while its group's statement runs.
	cancelTimeout = 5 * time.Second
	// commitMargin is the time before a member's deadline by which its
	// group's statement must be done, leaving its COMMIT that long.
	commitMargin = 100 * time.Millisecond
)

// errTooLate is the outcome of a write whose deadline came too near for
// it to be sent (commitMargin): its call waits for the deadline.
var errTooLate = errors.New("ledger: the write's deadline is too near to send it")

// stage is where a queued write is, guarded by committer.mu.
type stage int

const (
	waiting    stage = iota // in the queue
	running                 // taken into a group, before its COMMIT
	committing              // its group's batch, COMMIT included, is sent: wait for it
)

// queued is one write waiting in the group committer.
type queued struct {
	ctx   context.Context
	w     write
	done  chan outcome // buffered: the runner never waits on the caller
	stage stage
}

// committer queues writes and runs their groups.
type committer struct {
	s       *Store
	mu      sync.Mutex
	queue   []*queued
	runners int
}

// submit queues w and waits for its outcome. When ctx ends first, it
// returns ctx's error and the write is not committed, unless its group's
// COMMIT was already sent: then it waits for that outcome (see above).
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
		if errors.Is(o.err, errTooLate) {
			<-ctx.Done()
			return outcome{err: ctx.Err()}
		}
		return o
	case <-ctx.Done():
	}
	c.mu.Lock()
	st := q.stage
	if st == waiting {
		c.remove(q)
	}
	c.mu.Unlock()
	if st == committing {
		return <-q.done
	}
	// Waiting: out of the queue. Running: its group checks every member's
	// context before it sends its batch, sees this one ended, and goes
	// again without it.
	return outcome{err: ctx.Err()}
}

// remove takes q out of the queue (c.mu held).
func (c *committer) remove(q *queued) {
	for i, x := range c.queue {
		if x == q {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
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
		if d, ok := q.ctx.Deadline(); ok && time.Until(d) <= commitMargin {
			q.done <- outcome{err: errTooLate}
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
		q.stage = running
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

// requeue puts the live members of an abandoned group back at the head of
// the queue, in their order, and answers the others with their context's
// error.
func (c *committer) requeue(group []*queued) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var again []*queued
	for _, q := range group {
		if err := q.ctx.Err(); err != nil {
			q.done <- outcome{err: err}
			continue
		}
		q.stage = waiting
		again = append(again, q)
	}
	c.queue = append(again, c.queue...)
}

// commit runs one group and hands out its outcomes.
func (c *committer) commit(group []*queued) {
	out, err := c.runGroup(group)
	if err == errAbandoned {
		c.requeue(group)
		return
	}
	if err != nil && len(group) > 1 && statementFailed(err) {
		// The transaction rolled back: try each write alone, so the one
		// PostgreSQL refused fails by itself.
		for _, q := range group {
			o, err := c.runGroup([]*queued{q})
			switch {
			case err == errAbandoned:
				c.requeue([]*queued{q}) // ended: its error; else it goes again, or is too late (take)
			case err != nil:
				q.done <- outcome{err: err}
			default:
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

// errAbandoned is runGroup's answer when a member's context ended before
// the group's COMMIT: the transaction rolled back, nothing committed.
var errAbandoned = fmt.Errorf("ledger: group abandoned: a member's context ended")

// runGroup commits the writes of group in one transaction on a pooled
// connection and returns their outcomes, or errAbandoned (nothing
// committed) when a member's context ended before the COMMIT was sent.
func (c *committer) runGroup(group []*queued) ([]outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	// stmt ends when any member's context does: waiting for a connection
	// or on a lock stops at once.
	stmt, stop := context.WithCancel(ctx)
	defer stop()
	var held struct {
		sync.Mutex
		pg *pgconn.PgConn
	}
	unwatch := make([]func() bool, len(group))
	for i, q := range group {
		unwatch[i] = context.AfterFunc(q.ctx, func() {
			held.Lock()
			pg := held.pg
			held.Unlock()
			if pg != nil {
				// Stop the statement in PostgreSQL too: closing the
				// connection alone leaves it waiting on its locks. The
				// connection is closed after, so a late cancel cannot
				// reach another statement.
				cctx, ccancel := context.WithTimeout(context.Background(), cancelTimeout)
				_ = pg.CancelRequest(cctx)
				ccancel()
			}
			stop()
		})
	}
	// tainted reports whether a member's watcher ran (a cancel request may
	// have been sent on the connection); after it, none runs.
	tainted := func() bool {
		ran := false
		for _, u := range unwatch {
			ran = !u() || ran
		}
		return ran
	}

	conn, err := c.s.pool.Acquire(stmt)
	if err != nil {
		tainted()
		if c.anyEnded(group) {
			return nil, errAbandoned
		}
		return nil, err
	}
	defer conn.Release()
	held.Lock()
	held.pg = conn.Conn().PgConn()
	held.Unlock()
	ws := make([]write, len(group))
	for i, q := range group {
		ws[i] = q.w
	}
	if !c.commitAll(group) {
		tainted()
		return nil, errAbandoned
	}
	// From here the members' outcome is this batch's (see above). It is
	// read with ctx, not stmt: a read cut short would leave the COMMIT's
	// outcome unknown.
	out, err := writeInTx(ctx, conn.Conn(), ws, c.s.clock.Now(), txEnd{commit: true, bound: statementBound(group)})
	if tainted() {
		// A cancel request may still reach this connection: close it.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, errAbandoned
		}
	}
	if err != nil {
		endTx(ctx, conn.Conn())
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == queryCanceled {
			// Stopped by the bound (statementBound), a member's deadline
			// being near: nothing committed; take answers the members too
			// late to go again, the others go again.
			return nil, errAbandoned
		}
		return nil, err
	}
	c.s.notifier.Head(newest(out))
	return out, nil
}

// queryCanceled is PostgreSQL's SQLSTATE for a statement stopped by a
// cancel request or its statement_timeout.
const queryCanceled = "57014"

// statementBound is how long a group's statement may run: until the
// earliest member's deadline less commitMargin, at least a millisecond; 0
// when no member has a deadline.
func statementBound(group []*queued) time.Duration {
	var bound time.Duration
	for _, q := range group {
		if d, ok := q.ctx.Deadline(); ok {
			if left := time.Until(d) - commitMargin; bound == 0 || left < bound {
				bound = max(left, time.Millisecond)
			}
		}
	}
	return bound
}

// commitAll marks every member of group committing when all their
// contexts are live, and reports whether it did.
func (c *committer) commitAll(group []*queued) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range group {
		if q.ctx.Err() != nil {
			return false
		}
	}
	for _, q := range group {
		q.stage = committing
	}
	return true
}

// anyEnded reports whether a member's context has ended.
func (c *committer) anyEnded(group []*queued) bool {
	for _, q := range group {
		if q.ctx.Err() != nil {
			return true
		}
	}
	return false
}

// txEnd says how writeInTx ends its transaction.
type txEnd struct {
	// commit sends COMMIT in the same batch, after the write (skipped by
	// PostgreSQL when the write fails); else the transaction is left open
	// for the caller to commit or roll back.
	commit bool
	// bound, with commit, is the statements' statement_timeout (0: none).
	bound time.Duration
}

// writeInTx begins a transaction on conn and writes ws in it, ending it as
// end says; it returns their outcomes.
func writeInTx(ctx context.Context, conn *pgx.Conn, ws []write, now time.Time, end txEnd) ([]outcome, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	bounded := end.commit && end.bound > 0
	if bounded {
		b.Queue("SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(max(end.bound.Milliseconds(), 1), 10))
	}
	queueWrite(b, ws, now)
	if end.commit {
		b.Queue("COMMIT")
	}
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil && bounded {
		_, err = br.Exec()
	}
	var out []outcome
	var missing []string
	if err == nil {
		out, missing, err = readWrite(br, ws)
	}
	if err == nil && end.commit {
		if _, err = br.Exec(); err != nil {
			err = fmt.Errorf("ledger: commit: %w", err)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := readKeys(ctx, conn, ws, out, missing); err != nil {
		if !end.commit {
			return nil, err
		}
		// Committed: only the writes whose keys were to be read fail.
		for i, w := range ws {
			if w.idem != "" && slices.Contains(missing, w.idem) {
				out[i] = outcome{err: err}
			}
		}
	}
	return out, nil
}

// endTx rolls back whatever transaction conn has open, so it goes back to
// the pool clean (a failed ROLLBACK closes it).
func endTx(ctx context.Context, conn *pgx.Conn) {
	if conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}
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

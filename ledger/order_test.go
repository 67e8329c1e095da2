package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// reader pages the ledger by position, as a feed consumer would, until it
// has seen want events or ctx ends. It fails (through errc) the moment a
// page does not continue exactly where the last one stopped: a skipped
// position is a missed event (L1, HARD-PARTS 1).
type reader struct {
	done chan struct{}
	seen []ledger.Event
	err  error
}

func startReader(ctx context.Context, pool *pgxpool.Pool, want int) *reader {
	r := &reader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		after := int64(0)
		for len(r.seen) < want {
			if err := ctx.Err(); err != nil {
				r.err = fmt.Errorf("reader saw %d of %d events: %w", len(r.seen), want, err)
				return
			}
			page, err := ledger.ReadAfter(ctx, pool, after, 3, "")
			if err != nil {
				r.err = err
				return
			}
			for _, e := range page {
				if e.Position != after+1 {
					r.err = fmt.Errorf("reader at %d got position %d: skipped", after, e.Position)
					return
				}
				r.seen = append(r.seen, e)
				after = e.Position
			}
		}
	}()
	return r
}

// wait returns what the reader saw, once it has seen everything.
func (r *reader) wait(t *testing.T) []ledger.Event {
	t.Helper()
	<-r.done
	require.NoError(t, r.err)
	return r.seen
}

// requireCommitOrdered checks the final table: positions 1..n without gaps,
// commit times non-decreasing with position.
func requireCommitOrdered(t *testing.T, evs []ledger.Event) {
	t.Helper()
	for i, e := range evs {
		require.EqualValues(t, i+1, e.Position, "gapless")
		if i > 0 {
			require.False(t, e.CommitTime.Before(evs[i-1].CommitTime),
				"commit time of %d (%s) before that of %d (%s)", e.Position, e.CommitTime, evs[i-1].Position, evs[i-1].CommitTime)
		}
	}
}

// waitBlockedBy polls (bounded) until backend pid waits on a lock held by
// backend holder. It is how the test knows B is inside its append, stuck on
// the ledger head, without sleeping for it.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid, holder int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var blocked bool
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT $2::int = ANY(pg_blocking_pids($1)) AND wait_event_type = 'Lock'
			  FROM pg_stat_activity WHERE pid = $1`, pid, holder).Scan(&blocked))
		if blocked {
			return
		}
		require.True(t, time.Now().Before(deadline), "backend %d never waited on %d", pid, holder)
		time.Sleep(2 * time.Millisecond)
	}
}

func backendPID(t *testing.T, tx pgx.Tx) int {
	t.Helper()
	var pid int
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid))
	return pid
}

func ev(typ string) ledger.NewEvent {
	return ledger.NewEvent{Type: typ, Data: jsonvalue.Value(`{"by": "` + typ + `"}`)}
}

// L1: positions follow commit order, not begin order; while one
// transaction holds the head another's append waits for its commit; a
// rolled-back append gives its position back; a reader paging by position
// all along misses nothing.
func TestL1CommitOrderWithoutSkips(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.pool.Exec(ctx, `CREATE TABLE business (n int)`)
	require.NoError(t, err)

	const want = 5 // B1, A1, A2, B2, D (C rolls back)
	r := startReader(ctx, b.pool, want)
	t0 := b.clock.Now()

	// 1. A begins first and does its business write; B begins later,
	// appends and commits; then A appends and commits.
	txA, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(ctx) }()
	_, err = txA.Exec(ctx, `INSERT INTO business VALUES (1)`)
	require.NoError(t, err)

	txB, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = txB.Exec(ctx, `INSERT INTO business VALUES (2)`)
	require.NoError(t, err)
	b1, err := ledger.Append(ctx, txB, t0.Add(10*time.Second), ev("b.one"))
	require.NoError(t, err)
	require.NoError(t, txB.Commit(ctx))

	// A read its clock before B committed: the head still keeps commit
	// times non-decreasing with position.
	a1, err := ledger.Append(ctx, txA, t0, ev("a.one"))
	require.NoError(t, err)
	require.NoError(t, txA.Commit(ctx))

	require.EqualValues(t, 1, b1[0].Position, "B committed first")
	require.EqualValues(t, 2, a1[0].Position, "A committed second, though it began first")
	require.Equal(t, t0.Add(10*time.Second), b1[0].CommitTime)
	require.True(t, a1[0].CommitTime.After(b1[0].CommitTime))

	// 2. A holds the head (appended, not committed): B's append waits until
	// A commits, then takes the next position.
	txA2, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA2.Rollback(ctx) }()
	a2, err := ledger.Append(ctx, txA2, b.clock.Now(), ev("a.two"))
	require.NoError(t, err)

	txB2, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	pidA, pidB := backendPID(t, txA2), backendPID(t, txB2)
	type result struct {
		evs []ledger.Event
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		evs, err := ledger.Append(ctx, txB2, b.clock.Now(), ev("b.two"))
		if err == nil {
			err = txB2.Commit(ctx)
		} else {
			_ = txB2.Rollback(ctx)
		}
		bDone <- result{evs, err}
	}()
	waitBlockedBy(t, b.pool, pidB, pidA)
	select {
	case res := <-bDone:
		t.Fatalf("B appended while A held the head: %+v", res)
	default:
	}
	head, err := ledger.Head(ctx, b.pool)
	require.NoError(t, err)
	require.EqualValues(t, 2, head, "A's position is not visible before A commits")

	require.NoError(t, txA2.Commit(ctx))
	var b2 result
	select {
	case b2 = <-bDone:
	case <-ctx.Done():
		t.Fatal("B's append never finished")
	}
	require.NoError(t, b2.err)
	require.EqualValues(t, 3, a2[0].Position)
	require.EqualValues(t, 4, b2.evs[0].Position)

	// 3. A rolled-back append gives its position back.
	txC, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	c, err := ledger.Append(ctx, txC, b.clock.Now(), ev("c.rolled_back"))
	require.NoError(t, err)
	require.EqualValues(t, 5, c[0].Position)
	require.NoError(t, txC.Rollback(ctx))

	txD, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	d, err := ledger.Append(ctx, txD, b.clock.Now(), ev("d.after_rollback"))
	require.NoError(t, err)
	require.NoError(t, txD.Commit(ctx))
	require.EqualValues(t, 5, d[0].Position, "the rolled-back position is reused")

	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	types := make([]string, len(final))
	for i, e := range final {
		types[i] = e.Type
	}
	require.Equal(t, []string{"b.one", "a.one", "a.two", "b.two", "d.after_rollback"}, types)
	require.Equal(t, final, r.wait(t), "the reader saw exactly the final table")
}

// L1 under load: many writers whose transactions begin, write, append and
// commit (or roll back) concurrently, with a reader paging all along. The
// reader never sees a gap and ends with exactly the final table.
func TestL1ConcurrentWritersReaderMissesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := b.pool.Exec(ctx, `CREATE TABLE business (writer int, n int)`)
	require.NoError(t, err)

	// Transaction i of each writer appends 1+i%3 events; every fifth rolls back.
	const writers, each = 6, 30
	perWriter := 0
	for i := range each {
		if i%5 != 4 {
			perWriter += 1 + i%3
		}
	}
	r := startReader(ctx, b.pool, writers*perWriter)

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := func() error {
					tx, err := b.pool.Begin(ctx)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback(ctx) }()
					if _, err := tx.Exec(ctx, `INSERT INTO business VALUES ($1, $2)`, w, i); err != nil {
						return err
					}
					n := 1 + i%3 // some transactions append several events
					evs := make([]ledger.NewEvent, n)
					for j := range evs {
						evs[j] = ev(fmt.Sprintf("w%d.e%d_%d", w, i, j))
					}
					if _, err := ledger.Append(ctx, tx, b.clock.Now(), evs...); err != nil {
						return err
					}
					if i%5 == 4 {
						return tx.Rollback(ctx)
					}
					return tx.Commit(ctx)
				}()
				if err != nil {
					errs <- fmt.Errorf("writer %d tx %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Len(t, final, writers*perWriter, "every committed event is there, no rolled-back one")
	require.Equal(t, final, r.wait(t), "the reader saw exactly the final table")
}

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

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// single is one PutValue or AppendEvent call for the group tests.
type single struct {
	ns, key, typ string // ns set: PutValue; else AppendEvent of typ
	value        string
	idem         string
}

type singleResult struct {
	kv  ledger.KVValue
	ev  ledger.Event
	err error
}

func (c single) call(ctx context.Context, s *ledger.Store) singleResult {
	if c.ns != "" {
		kv, err := s.PutValue(ctx, c.ns, c.key, jsonvalue.Value(c.value), c.idem)
		return singleResult{kv: kv, err: err}
	}
	ev, err := s.AppendEvent(ctx, c.typ, jsonvalue.Value(c.value), c.idem)
	return singleResult{ev: ev, err: err}
}

// inOneGroup makes calls commit as one group (the store has one runner):
// a first write is sent while a transaction holds the ledger head, so its
// group waits on the head; the calls queue behind it meanwhile, in the
// order given; once all are queued the head is released and they go as the
// next group. It returns each call's result.
func inOneGroup(t *testing.T, b testBundle, calls []single) []singleResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Equal(t, 1, b.store.GroupRunners, "the store must have one runner")

	holder := holdHead(ctx, t, b)
	holderPID := backendPID(t, holder)

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := b.store.AppendEvent(ctx, "group.first", jsonvalue.Value(`{}`), "")
		require.NoError(t, err)
	})
	waitWaitingOn(t, b.pool, holderPID)

	// One at a time, so the queue holds them in the order given.
	out := make([]singleResult, len(calls))
	for i, c := range calls {
		wg.Go(func() { out[i] = c.call(ctx, b.store) })
		deadline := time.Now().Add(15 * time.Second)
		for b.store.Queued() < i+1 {
			require.True(t, time.Now().Before(deadline), "only %d of %d calls queued", b.store.Queued(), i+1)
			time.Sleep(time.Millisecond)
		}
	}
	require.NoError(t, holder.Commit(ctx))
	wg.Wait()
	return out
}

// waitWaitingOn polls (bounded) until some backend waits on a lock held by
// holder: the group's statement stuck on the ledger head.
func waitWaitingOn(t *testing.T, pool *pgxpool.Pool, holder int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			 WHERE $1::int = ANY(pg_blocking_pids(pid)) AND wait_event_type = 'Lock'`, holder).Scan(&n))
		if n > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no backend waited on %d", holder)
		time.Sleep(2 * time.Millisecond)
	}
}

func oneRunner(t *testing.T) testBundle {
	b := setup(t)
	b.store.GroupRunners = 1
	return b
}

// L1, issue 14: writes committed as one group take consecutive positions
// in the order they were queued and share one commit time; a turn-like
// transaction that began before them and commits after them takes the
// position after theirs (commit order, not begin order); a reader paging
// all along misses nothing.
func TestL1GroupCommitFollowsCommitOrder(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// holder.took_head, group.first, 6 calls, late.turn
	r := startReader(ctx, b.pool, 9)

	// A turn's transaction begins first and writes a record (no head yet).
	w := ledger.NewWriter(b.pool, b.clock.Now)
	defer w.Rollback(ctx)
	_, err := w.Put(ctx, "turn", "t1", jsonvalue.Value(`{"by": "turn"}`))
	require.NoError(t, err)

	calls := make([]single, 6)
	for i := range calls {
		if i%2 == 0 {
			calls[i] = single{ns: "acct", key: fmt.Sprintf("k%d", i), value: fmt.Sprintf(`{"i": %d}`, i)}
		} else {
			calls[i] = single{typ: "note.made", value: fmt.Sprintf(`{"i": %d}`, i)}
		}
	}
	res := inOneGroup(t, b, calls)
	var group []ledger.Event
	for i, x := range res {
		require.NoError(t, x.err, "call %d", i)
		if calls[i].ns != "" {
			require.EqualValues(t, 1, x.kv.Version)
			group = append(group, ledger.Event{ID: x.kv.EventID, CommitTime: x.kv.UpdatedAt})
		} else {
			group = append(group, x.ev)
		}
	}
	all := allEvents(t, b.pool)
	require.Len(t, all, 8)
	byID := map[string]ledger.Event{}
	for _, e := range all {
		byID[e.ID.String()] = e
	}
	first := byID[group[0].ID.String()]
	for i, g := range group {
		e := byID[g.ID.String()]
		require.Equal(t, first.Position+int64(i), e.Position, "call %d: consecutive, in queue order", i)
		require.Equal(t, first.CommitTime, e.CommitTime, "one transaction, one commit time")
		require.Equal(t, e.CommitTime, g.CommitTime)
	}
	require.Equal(t, "acct.inserted", byID[group[0].ID.String()].Type)

	// The turn began before the group and commits after it: its event is last.
	require.NoError(t, w.Commit(ctx))
	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Len(t, final, 9)
	require.Equal(t, "turn.inserted", final[8].Type)
	require.Equal(t, final, r.wait(t), "the reader saw exactly the final table")
}

// Issue 14: one member of a group that PostgreSQL refuses fails alone; the
// others commit, gapless. (A trigger stands for a refusal that validation
// cannot foresee.)
func TestGroupCommitOneFailingMember(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.data ? 'boom' THEN RAISE EXCEPTION 'refused'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_boom BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_boom();`)
	require.NoError(t, err)

	calls := []single{
		{ns: "acct", key: "a", value: `{"n": 1}`, idem: "i-a"},
		{typ: "note.made", value: `{"boom": true}`, idem: "i-boom"},
		{ns: "acct", key: "b", value: `{"n": 2}`},
		{ns: "acct", key: "boom", value: `{"boom": 1}`},
		{typ: "note.made", value: `{"n": 3}`},
	}
	res := inOneGroup(t, b, calls)
	require.NoError(t, res[0].err)
	require.Error(t, res[1].err)
	require.NoError(t, res[2].err)
	require.Error(t, res[3].err)
	require.NoError(t, res[4].err)

	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Len(t, final, 5, "holder, group.first and the three that did not fail")
	require.Equal(t, 2, b.count(t, "kv_values"), "the refused record write left no record")
	var keys []string
	rows, err := b.pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"i-a"}, keys, "the refused write's key is free to be used again")

	// Its key is free: once the trigger is gone the same call succeeds.
	_, err = b.pool.Exec(ctx, `DROP TRIGGER refuse_boom ON events`)
	require.NoError(t, err)
	e, err := b.store.AppendEvent(ctx, "note.made", jsonvalue.Value(`{"boom": true}`), "i-boom")
	require.NoError(t, err)
	require.EqualValues(t, 6, e.Position)
}

// L3 under group commit: in one group, a key used before returns the
// first result, a key used before for another request fails that call
// alone, and a key sent twice at once writes once (the second waits for
// the next group and gets the first's result). A record written twice in
// one group takes consecutive versions.
func TestL3IdempotencyInOneGroup(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx := context.Background()

	before, err := b.store.PutValue(ctx, "acct", "old", jsonvalue.Value(`{"n": 0}`), "used")
	require.NoError(t, err)

	calls := []single{
		{ns: "acct", key: "old", value: `{"n": 0}`, idem: "used"},        // replay
		{ns: "acct", key: "old", value: `{"n": 9}`, idem: "used"},        // conflict
		{typ: "note.made", value: `{"n": 1}`, idem: "twice"},             // first of a pair
		{typ: "note.made", value: `{"n": 1}`, idem: "twice"},             // the same, at once
		{typ: "note.made", value: `{"n": 2}`, idem: "twice"},             // the same key, another request
		{ns: "acct", key: "dup", value: `{"v": 1}`},                      // one key ...
		{ns: "acct", key: "dup", value: `{"v": 2}`, idem: "dup-2"},       // ... written twice
		{ns: "acct", key: "old", value: `{"n": 1}`, idem: "new-for-old"}, // a new write of the old key
	}
	res := inOneGroup(t, b, calls)

	require.NoError(t, res[0].err)
	requireSameKV(t, before, res[0].kv)
	requireFault(t, res[1].err, fault.IdempotencyConflict, "idempotencyKey")
	require.NoError(t, res[2].err)
	require.NoError(t, res[3].err)
	require.Equal(t, res[2].ev, res[3].ev, "a key sent twice at once is written once")
	requireFault(t, res[4].err, fault.IdempotencyConflict, "idempotencyKey")

	require.NoError(t, res[5].err)
	require.NoError(t, res[6].err)
	require.EqualValues(t, 1, res[5].kv.Version)
	require.EqualValues(t, 2, res[6].kv.Version)
	require.Equal(t, res[5].kv.UpdatedAt, res[6].kv.UpdatedAt, "one group, one commit time")
	require.NoError(t, res[7].err)
	require.EqualValues(t, 2, res[7].kv.Version)
	require.Equal(t, before.CreatedAt, res[7].kv.CreatedAt)

	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	var types []string
	for _, e := range final {
		types = append(types, e.Type)
	}
	// before, holder, group.first, then the group: twice, dup (inserted,
	// updated), old (updated).
	require.Equal(t, []string{"acct.inserted", "holder.took_head", "group.first", "note.made", "acct.inserted", "acct.updated", "acct.updated"}, types)
	cur, err := b.store.Value(ctx, "acct", "dup")
	require.NoError(t, err)
	require.JSONEq(t, `{"v": 2}`, string(cur.Value))
	require.EqualValues(t, 2, cur.Version)
	require.Equal(t, res[6].kv.EventID, cur.EventID)

	// Replays after the group return the same results.
	again, err := b.store.PutValue(ctx, "acct", "dup", jsonvalue.Value(`{"v": 2}`), "dup-2")
	require.NoError(t, err)
	requireSameKV(t, res[6].kv, again)
	e, err := b.store.AppendEvent(ctx, "note.made", jsonvalue.Value(`{"n": 1}`), "twice")
	require.NoError(t, err)
	require.Equal(t, res[2].ev, e)
	require.Len(t, allEvents(t, b.pool), 7)
}

// L1 under load with group commit: single writes from many goroutines,
// turn-like transactions appending at their commit, and a reader paging
// all along. The reader never sees a gap, every acknowledged write is
// there once, and versions of a key count its writes.
func TestL1GroupCommitUnderLoadMissesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const callers, each, turns = 8, 25, 10
	r := startReader(ctx, b.pool, callers*each+turns)
	var wg sync.WaitGroup
	errs := make(chan error, callers+1)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				var err error
				if i%2 == 0 {
					_, err = b.store.PutValue(ctx, "acct", fmt.Sprintf("k%d", i%5), jsonvalue.Value(fmt.Sprintf(`{"c": %d, "i": %d}`, c, i)), fmt.Sprintf("c%d-%d", c, i))
				} else {
					_, err = b.store.AppendEvent(ctx, "note.made", jsonvalue.Value(fmt.Sprintf(`{"c": %d, "i": %d}`, c, i)), "")
				}
				if err != nil {
					errs <- fmt.Errorf("caller %d write %d: %w", c, i, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range turns {
			w := ledger.NewWriter(b.pool, b.clock.Now)
			if _, err := w.Put(ctx, "acct", fmt.Sprintf("k%d", i%5), jsonvalue.Value(fmt.Sprintf(`{"turn": %d}`, i))); err != nil {
				errs <- err
				return
			}
			if err := w.Commit(ctx); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Len(t, final, callers*each+turns)
	require.Equal(t, final, r.wait(t), "the reader saw exactly the final table")

	// Per key, the events' versions are 1..n in position order.
	seen := map[string]int64{}
	for _, e := range final {
		if e.Record == nil {
			continue
		}
		seen[e.Record.Key]++
		require.Equal(t, seen[e.Record.Key], e.Record.Version, "event %d", e.Position)
		want := "acct.updated"
		if e.Record.Version == 1 {
			want = "acct.inserted"
		}
		require.Equal(t, want, e.Type)
	}
}

// nobodyWaitsOn polls (bounded) until no backend waits on a lock held by
// holder.
func nobodyWaitsOn(t *testing.T, pool *pgxpool.Pool, holder int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, holder).Scan(&n))
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "a backend still waits on %d", holder)
		time.Sleep(2 * time.Millisecond)
	}
}

// Issue 10 item 1 under group commit: a member whose context ends while
// its group's statement waits on a lock gets its context's error at once,
// its write never commits, the statement is cancelled in PostgreSQL (it
// no longer waits on the lock), and the other member goes again in a group
// of its own and commits while the lock is still held.
func TestGroupCommitMemberCancelledWhileRunning(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A turn-like transaction holds the record acct/locked.
	w := ledger.NewWriter(b.pool, b.clock.Now)
	defer w.Rollback(ctx)
	_, err := w.Put(ctx, "acct", "locked", jsonvalue.Value(`{"by": "turn"}`))
	require.NoError(t, err)
	tx, err := w.Tx(ctx)
	require.NoError(t, err)
	turnPID := backendPID(t, tx)

	// The holder of the head keeps a first group waiting, so that A and B
	// queue and go together as the next one.
	holder := holdHead(ctx, t, b)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := b.store.AppendEvent(ctx, "group.first", jsonvalue.Value(`{}`), "")
		require.NoError(t, err)
	})
	waitWaitingOn(t, b.pool, backendPID(t, holder))

	actx, acancel := context.WithCancel(ctx)
	aErr := make(chan error, 1)
	go func() {
		_, err := b.store.PutValue(actx, "acct", "locked", jsonvalue.Value(`{"by": "A"}`), "key-a")
		aErr <- err
	}()
	for b.store.Queued() < 1 {
		time.Sleep(time.Millisecond)
	}
	bDone := make(chan singleResult, 1)
	go func() {
		bDone <- single{typ: "note.made", value: `{"by": "B"}`, idem: "key-b"}.call(ctx, b.store)
	}()
	for b.store.Queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, holder.Commit(ctx))
	wg.Wait()
	// The group [A, B] now waits on the record the turn holds.
	waitWaitingOn(t, b.pool, turnPID)

	acancel()
	require.ErrorIs(t, <-aErr, context.Canceled)
	res := <-bDone // B commits while the turn still holds the record
	require.NoError(t, res.err)
	nobodyWaitsOn(t, b.pool, turnPID)

	require.NoError(t, w.Commit(ctx))
	cur, err := b.store.Value(ctx, "acct", "locked")
	require.NoError(t, err)
	require.JSONEq(t, `{"by": "turn"}`, string(cur.Value), "A's write committed")
	require.EqualValues(t, 1, cur.Version)
	require.Zero(t, countWhere(t, b.pool, `SELECT count(*) FROM idempotency_keys WHERE key = 'key-a'`))
	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	var types []string
	for _, e := range final {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"holder.took_head", "group.first", "note.made", "acct.inserted"}, types)

	// A's key is free: the same write again commits.
	kv, err := b.store.PutValue(ctx, "acct", "locked", jsonvalue.Value(`{"by": "A"}`), "key-a")
	require.NoError(t, err)
	require.EqualValues(t, 2, kv.Version)
}

// Issue 10 item 1 under group commit: a call whose context ends while its
// write is queued is taken out of the queue and its write never commits;
// the others queued with it commit.
func TestGroupCommitMemberCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := holdHead(ctx, t, b)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := b.store.AppendEvent(ctx, "group.first", jsonvalue.Value(`{}`), "")
		require.NoError(t, err)
	})
	waitWaitingOn(t, b.pool, backendPID(t, holder))

	actx, acancel := context.WithCancel(ctx)
	aErr := make(chan error, 1)
	go func() {
		_, err := b.store.AppendEvent(actx, "note.cancelled", jsonvalue.Value(`{}`), "")
		aErr <- err
	}()
	for b.store.Queued() < 1 {
		time.Sleep(time.Millisecond)
	}
	var later singleResult
	wg.Go(func() { later = single{typ: "note.made", value: `{}`}.call(ctx, b.store) })
	for b.store.Queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	acancel()
	require.ErrorIs(t, <-aErr, context.Canceled)
	require.Equal(t, 1, b.store.Queued(), "the cancelled write left the queue")

	require.NoError(t, holder.Commit(ctx))
	wg.Wait()
	require.NoError(t, later.err)
	var types []string
	for _, e := range allEvents(t, b.pool) {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"holder.took_head", "group.first", "note.made"}, types)
}

func countWhere(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// Issue 10 item 1 with the COMMIT sent in the group's batch (issue 14): a
// write whose deadline comes while its group waits on the ledger head is
// stopped by PostgreSQL before the deadline (the batch's statement_timeout),
// so releasing the head the moment the deadline passes commits nothing; a
// write queued behind it, with time left, goes in the next group and
// commits. (Here the cancel request sent at the deadline mostly wins its
// race with the release too; server's
// TestIssue10RequestTimeoutCancelsDatabaseWork, where the client is
// answered first, lost it in 3 of 8 runs without the bound.)
func TestGroupCommitDeadlineKeptByPostgreSQL(t *testing.T) {
	t.Parallel()
	b := oneRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	holder := holdHead(ctx, t, b)
	holderPID := backendPID(t, holder)

	short, stop := context.WithTimeout(ctx, 800*time.Millisecond)
	defer stop()
	shortErr := make(chan error, 1)
	go func() {
		_, err := b.store.AppendEvent(short, "late.write", jsonvalue.Value(`{}`), "late-key")
		shortErr <- err
	}()
	waitWaitingOn(t, b.pool, holderPID) // the short write's group waits on the head
	longDone := make(chan singleResult, 1)
	go func() { longDone <- single{typ: "patient.write", value: `{}`}.call(ctx, b.store) }()

	// The head is freed the moment the deadline passes, as a client answered
	// TIMEOUT then may see it freed: a cancel request sent at the deadline
	// would race this commit.
	<-short.Done()
	require.NoError(t, holder.Commit(ctx))
	require.ErrorIs(t, <-shortErr, context.DeadlineExceeded)
	res := <-longDone
	require.NoError(t, res.err)
	var types []string
	for _, e := range allEvents(t, b.pool) {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"holder.took_head", "patient.write"}, types, "the timed-out write committed")
	require.Zero(t, countWhere(t, b.pool, `SELECT count(*) FROM idempotency_keys WHERE key = 'late-key'`))
}

// holdHead begins a transaction that appends holder.took_head and so holds
// the ledger head until the test commits it (or ends: rolled back).
func holdHead(ctx context.Context, t *testing.T, b testBundle) pgx.Tx {
	t.Helper()
	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.WithoutCancel(ctx)) })
	_, err = ledger.Append(ctx, holder, b.clock.Now(), ev("holder.took_head"))
	require.NoError(t, err)
	return holder
}

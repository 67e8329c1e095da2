package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// accountsWithEntries opens n accounts of a probe monitor, writes one entry
// for each and delivers them; it returns the session keys by account and
// each account's entry identity.
func (b *bundle) accountsWithEntries(n int) (sids map[string]int64, entries map[int64]string) {
	b.t.Helper()
	actionID := b.probeMonitor(nil)
	accts := make([]string, n)
	for i := range accts {
		accts[i] = b.openAccount()
	}
	b.dispatch()
	sids, entries = map[string]int64{}, map[int64]string{}
	for _, a := range accts {
		sid := b.session(actionID, a).SID
		sids[a] = sid
		entries[sid] = b.entry(a, 1)
	}
	b.dispatch()
	return sids, entries
}

func ranSIDs(rs []turns.Ran) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.SID()
	}
	return out
}

// T1, T2, HARD-PARTS 3: one claim leases as many runnable sessions as it
// asks for, each with its own fencing token and its own turn over its own
// inputs; a second claim (another process) gets the others, and a third
// finds nothing: a leased session is nobody else's until its lease ends.
func TestT1T2OneClaimLeasesSeveralSessions(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") })
	sids, entries := b.accountsWithEntries(5)
	exA, exB, exC := b.executor("worker-a", turns.Config{}), b.executor("worker-b", turns.Config{}), b.executor("worker-c", turns.Config{})

	ranA, leased, err := turns.ClaimAndRun(b.ctx, exA, 3)
	require.NoError(t, err)
	require.Equal(t, 3, leased)
	ranB, leased, err := turns.ClaimAndRun(b.ctx, exB, 5)
	require.NoError(t, err)
	require.Equal(t, 2, leased, "the sessions A holds are skipped")
	ranC, leased, err := turns.ClaimAndRun(b.ctx, exC, 5)
	require.NoError(t, err)
	require.Zero(t, leased)
	require.Empty(t, ranC)

	all := append(ranSIDs(ranA), ranSIDs(ranB)...)
	require.ElementsMatch(t, mapValues(sids), all, "every session claimed once")
	for _, r := range append(ranA, ranB...) {
		require.Equal(t, 1, r.Turn())
		require.Equal(t, []string{entries[r.SID()]}, b.turnInputs(r.SID(), 1), "T2: a turn takes its own session's inputs")
	}
	require.Equal(t, 3, b.count(`SELECT count(*) FROM sessions WHERE lease_owner = 'worker-a'`))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM sessions WHERE lease_owner = 'worker-b'`))

	for ex, rs := range map[*turns.Executor][]turns.Ran{exA: ranA, exB: ranB} {
		verdicts, err := turns.CommitBatch(b.ctx, ex, rs)
		require.NoError(t, err)
		for _, v := range verdicts {
			require.Equal(t, turns.Committed, v)
		}
	}
	for _, sid := range sids {
		require.EqualValues(t, "COMPLETED", b.turn(sid, 1).Status)
		require.Equal(t, 1, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'CONSUMED' AND turn = 1`, sid))
	}
	require.Zero(t, b.count(`SELECT count(*) FROM sessions WHERE lease_owner IS NOT NULL OR next_turn_at IS NOT NULL`),
		"committed turns end their leases; nothing is left to run")
}

// HARD-PARTS 3, T6, T9: a batch commit where one turn's lease was taken
// over commits the others only. Worker A claims three sessions and runs
// their turns; its leases expire before it commits, and worker B takes one
// of the sessions over, runs the same turn again (same execution, same
// inputs) and commits it. A's batch then commits its other two turns and
// nothing of the third: each turn commits exactly once.
func TestHP3T6BatchWithALostLeaseCommitsTheOthersOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		out, err := countOutcome(req, "")
		if err == nil {
			out.Output = jsonvalue.MustEncode(map[string]int{"attempt": req.Attempt})
		}
		return out, err
	})
	sids, entries := b.accountsWithEntries(3)
	exA, exB := b.executor("worker-a", turns.Config{}), b.executor("worker-b", turns.Config{})

	ranA, leased, err := turns.ClaimAndRun(b.ctx, exA, 3)
	require.NoError(t, err)
	require.Equal(t, 3, leased)
	b.clock.Advance(testLease + time.Second)
	ranB, _, err := turns.ClaimAndRun(b.ctx, exB, 1)
	require.NoError(t, err)
	require.Len(t, ranB, 1)
	lost := ranB[0].SID()
	ok, err := turns.CommitAlone(b.ctx, exB, ranB[0])
	require.NoError(t, err)
	require.True(t, ok)

	verdicts, err := turns.CommitBatch(b.ctx, exA, ranA)
	require.NoError(t, err)
	for i, r := range ranA {
		if r.SID() == lost {
			require.Equal(t, turns.LeaseLost, verdicts[i])
		} else {
			require.Equal(t, turns.Committed, verdicts[i], "session %d", r.SID())
		}
	}
	for _, sid := range sids {
		s, err := b.app.Sessions.BySID(b.ctx, sid)
		require.NoError(t, err)
		require.Equal(t, 1, s.TurnCount)
		require.Equal(t, 1, readTally(t, s.State).Count, "one commit per turn (T6)")
		tu := b.turn(sid, 1)
		require.EqualValues(t, "COMPLETED", tu.Status)
		require.Equal(t, []string{entries[sid]}, b.turnInputs(sid, 1))
		require.Equal(t, 1, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'CONSUMED'`, sid))
		require.Len(t, b.transcript(tu.ExecutionID), 2, "one run's transcript")
		x := b.execution(tu.ExecutionID)
		if sid == lost {
			require.Equal(t, 2, x.Attempts, "B's run continued A's attempts (T9)")
			require.JSONEq(t, `{"attempt":2}`, string(x.Output), "B's outcome, not A's")
		} else {
			require.JSONEq(t, `{"attempt":1}`, string(x.Output))
		}
		require.Nil(t, s.LeaseExpires)
	}
}

// HARD-PARTS 3: the completer's transaction waits for a session row
// another transaction holds (a delivery, say) no longer than
// Config.SettleLockWait, so it cannot sit in a deadlock with one that locks
// sessions in another order: past the wait, the batch commits without that
// turn, which is committed by itself once the row is free.
func TestHP3BatchLeavesOutASessionAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	b, ex, ran, tx := ranWithOneSessionHeld(t, 10*time.Millisecond)
	held := ran[0].SID()
	verdicts, err := turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.Alone, turns.Committed}, verdicts)
	require.EqualValues(t, "RUNNING", b.turn(held, 1).Status, "nothing of the left-out turn is committed")
	require.EqualValues(t, "COMPLETED", b.turn(ran[1].SID(), 1).Status)
	require.NoError(t, tx.Commit(b.ctx))

	ok, err := turns.CommitAlone(b.ctx, ex, ran[0])
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, "COMPLETED", b.turn(held, 1).Status)
	s, err := b.app.Sessions.BySID(b.ctx, held)
	require.NoError(t, err)
	require.Equal(t, session.Open, s.Status)
	require.Equal(t, 1, readTally(t, s.State).Count)
}

// Issue 14: a batch whose session another transaction holds for a while
// (a dispatch batch delivering to it) waits for it and commits every turn
// in the one transaction, instead of leaving that turn to a commit of its
// own.
func TestHP3BatchWaitsForASessionHeldBriefly(t *testing.T) {
	t.Parallel()
	b, ex, ran, tx := ranWithOneSessionHeld(t, time.Hour)
	type result struct {
		verdicts []string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		vs, err := turns.CommitBatch(b.ctx, ex, ran)
		done <- result{vs, err}
	}()
	// The batch is waiting once its backend waits for the holder's
	// transaction id.
	var holder int64
	require.NoError(t, tx.QueryRow(b.ctx, `SELECT txid_current()`).Scan(&holder))
	require.Eventually(t, func() bool {
		var waiting bool
		err := b.app.Pool.QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text::bigint = $1)`, holder).Scan(&waiting)
		return err == nil && waiting
	}, time.Minute, 5*time.Millisecond)
	require.NoError(t, tx.Commit(b.ctx))

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, []string{turns.Committed, turns.Committed}, r.verdicts)
	for _, x := range ran {
		require.EqualValues(t, "COMPLETED", b.turn(x.SID(), 1).Status)
	}
}

// ranWithOneSessionHeld runs the turns of two sessions, each with an
// entry, on an executor whose batches wait up to wait for a session's
// lock, and returns them with an open transaction that holds the row of
// the first one's session (rolled back when the test ends, unless
// committed).
func ranWithOneSessionHeld(t *testing.T, wait time.Duration) (*bundle, *turns.Executor, []turns.Ran, pgx.Tx) {
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") })
	b.accountsWithEntries(2)
	ex := b.executor("worker-a", turns.Config{SettleLockWait: wait})
	ran, _, err := turns.ClaimAndRun(b.ctx, ex, 2)
	require.NoError(t, err)
	require.Len(t, ran, 2)
	tx, err := b.app.Pool.Begin(b.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(b.ctx, `UPDATE sessions SET updated_at = updated_at WHERE sid = $1`, ran[0].SID())
	require.NoError(t, err)
	return b, ex, ran, tx
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

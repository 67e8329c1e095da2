package turns_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// claimedTurns opens n accounts with an entry each and runs their first
// turns with one claim of worker-a, committing nothing.
func claimedTurns(t *testing.T, n int) (*bundle, map[string]int64, map[int64]string, *turns.Executor, []turns.Ran) {
	t.Helper()
	b := setup(t, countingAs("once"))
	sids, entries := b.accountsWithEntries(n)
	ex := b.executor("worker-a", turns.Config{})
	ran, leased, err := turns.ClaimAndRun(b.ctx, ex, n)
	require.NoError(t, err)
	require.Equal(t, n, leased)
	return b, sids, entries, ex, ran
}

// Issue 14, T6, HARD-PARTS 3: finished turns whose sessions did not change
// since their claim settle in one round trip: each turn committed, its
// input consumed, the state written, the lease ended.
func TestSettleInOneRoundTrip(t *testing.T) {
	t.Parallel()
	b, sids, entries, ex, ran := claimedTurns(t, 3)

	ok, err := turns.SettleAtOnce(b.ctx, ex, ran)
	require.NoError(t, err)
	require.True(t, ok)
	for _, sid := range sids {
		require.EqualValues(t, "COMPLETED", b.turn(sid, 1).Status)
		require.Equal(t, []string{entries[sid]}, b.turnInputs(sid, 1))
		require.Equal(t, 1, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND (state->>'count')::int = 1 AND lease_owner IS NULL`, sid))
		require.Zero(t, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING'`, sid))
	}
}

// Issue 14, S3, E1: a session that changed while its turn ran (here its
// end moved) fails the one-round-trip settle of the whole batch before
// anything is written; the completer's usual settle then decides from the
// sessions as they are and commits every turn.
func TestSettleInOneRoundTripGivesWayWhenASessionChanged(t *testing.T) {
	t.Parallel()
	b, sids, _, ex, ran := claimedTurns(t, 2)
	moved := ran[0].SID()
	_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET ends_at = $2 WHERE sid = $1`, moved, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)

	ok, err := turns.SettleAtOnce(b.ctx, ex, ran)
	require.False(t, ok)
	require.True(t, session.IsSessionChanged(err), "%v", err)
	for _, sid := range sids {
		require.EqualValues(t, "RUNNING", b.turn(sid, 1).Status, "nothing written")
	}

	verdicts, err := turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.Committed, turns.Committed}, verdicts)
	for _, sid := range sids {
		require.EqualValues(t, "COMPLETED", b.turn(sid, 1).Status)
	}
	require.Equal(t, 1, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND ends_at = $2`, moved, b.clock.Now().Add(time.Hour)),
		"the moved end stands")
}

// HARD-PARTS 3: a turn whose lease was taken over fails the one-round-trip
// settle; the usual settle then commits nothing of it and commits the
// others.
func TestSettleInOneRoundTripRefusesALostLease(t *testing.T) {
	t.Parallel()
	b, _, _, ex, ran := claimedTurns(t, 2)
	lost := ran[1].SID()
	_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET lease_token = lease_token + 1, lease_owner = 'worker-b' WHERE sid = $1`, lost)
	require.NoError(t, err)

	ok, err := turns.SettleAtOnce(b.ctx, ex, ran)
	require.False(t, ok)
	require.True(t, session.IsSessionChanged(err), "%v", err)

	verdicts, err := turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.Committed, turns.LeaseLost}, verdicts)
	require.EqualValues(t, "COMPLETED", b.turn(ran[0].SID(), 1).Status)
	require.EqualValues(t, "RUNNING", b.turn(lost, 1).Status, "the lost lease's turn is left to its new holder")
}

// HARD-PARTS 3, T6: a turn settles once. Settled again (as after a commit
// whose answer was lost on the way back), it finds its lease ended and
// commits nothing, either way it is settled.
func TestASettledTurnDoesNotSettleAgain(t *testing.T) {
	t.Parallel()
	b, sids, _, ex, ran := claimedTurns(t, 1)
	verdicts, err := turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.Committed}, verdicts)

	ok, err := turns.SettleAtOnce(b.ctx, ex, ran)
	require.False(t, ok)
	require.True(t, session.IsSessionChanged(err), "%v", err)
	verdicts, err = turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.LeaseLost}, verdicts)
	committed, err := turns.CommitAlone(b.ctx, ex, ran[0])
	require.NoError(t, err)
	require.False(t, committed)
	for _, sid := range sids {
		require.Equal(t, 1, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND (state->>'count')::int = 1`, sid), "counted once")
	}
}

// E4, E5: whether a session's end has come is decided under its lock, so
// a session whose end is near is settled the usual way (a timer may act
// on the end between a decision made from the claim's read and the lock).
func TestSettleInOneRoundTripLeavesANearEndToTheUsualSettle(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("once"))
	sids, _ := b.accountsWithEntries(1)
	for _, sid := range sids {
		_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET ends_at = $2 WHERE sid = $1`, sid, b.clock.Now().Add(30*time.Second))
		require.NoError(t, err)
	}
	ex := b.executor("worker-a", turns.Config{})
	ran, _, err := turns.ClaimAndRun(b.ctx, ex, 1)
	require.NoError(t, err)

	ok, err := turns.SettleAtOnce(b.ctx, ex, ran)
	require.NoError(t, err)
	require.False(t, ok, "not tried")
	verdicts, err := turns.CommitBatch(b.ctx, ex, ran)
	require.NoError(t, err)
	require.Equal(t, []string{turns.Committed}, verdicts)
}

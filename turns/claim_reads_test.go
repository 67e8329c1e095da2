package turns_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/turns"
)

// Issue 14, T2, T3: a claim reads what a session's turn is planned from in
// its first round trip when the session's action version is compiled
// already, and in a second one when the claim meets the version first (an
// executor whose store has compiled nothing, as after a restart). Both
// plan the turn over the inputs then pending, in delivery order.
func TestClaimPlansFromEitherRoundTripsReads(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("r"))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	first := b.entry(acct, 1)
	b.dispatch()
	s := b.session(actionID, acct)

	// The executor's pool counts the batches it sends (a round trip each).
	pool, sends := pgtest.CountedPool(t, b.app.Pool)
	fresh := action.NewStore(pool, b.clock, b.kinds)
	ex := turns.NewExecutor(pool, fresh, b.kinds, b.clock, b.log, turns.Config{Owner: "fresh", Lease: testLease})
	_, compiled := fresh.CachedCompiled(0)
	require.False(t, compiled, "nothing compiled: the claim reads in a second round trip")
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{first}, b.turnInputs(s.SID, 1))
	cs, _ := fresh.CachedCompiled(0)
	require.Len(t, cs, 1, "the claim compiled the session's version")
	meeting := sends.Batches.Swap(0)

	second, third := b.entry(acct, 2), b.entry(acct, 3)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{second, third}, b.turnInputs(s.SID, 2), "read in the claim's first round trip")
	require.Equal(t, meeting-1, sends.Batches.Load(), "a claim of a compiled version spends one round trip less")
	require.Equal(t, 2, b.session(actionID, acct).TurnCount)
	require.False(t, b.runOnce(ex), "nothing left to run")
}

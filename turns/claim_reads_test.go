package turns_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
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
	var batches atomic.Int64
	cfg := b.app.Pool.Config()
	cfg.ConnConfig.Tracer = batchCounter{&batches}
	pool, err := pgxpool.NewWithConfig(b.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	fresh := action.NewStore(pool, b.clock, b.kinds)
	ex := turns.NewExecutor(pool, fresh, b.kinds, b.clock, b.log, turns.Config{Owner: "fresh", Lease: testLease})
	require.Empty(t, fresh.CachedCompiled(), "nothing compiled: the claim reads in a second round trip")
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{first}, b.turnInputs(s.SID, 1))
	require.Len(t, fresh.CachedCompiled(), 1, "the claim compiled the session's version")
	meeting := batches.Swap(0)

	second, third := b.entry(acct, 2), b.entry(acct, 3)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{second, third}, b.turnInputs(s.SID, 2), "read in the claim's first round trip")
	require.Equal(t, meeting-1, batches.Load(), "a claim of a compiled version spends one round trip less")
	require.Equal(t, 2, b.session(actionID, acct).TurnCount)
	require.False(t, b.runOnce(ex), "nothing left to run")
}

// batchCounter counts the batches a pool's connections send.
type batchCounter struct{ n *atomic.Int64 }

func (c batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

package session_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Issue 14: the dispatcher is the pipeline's one serial step, so its round
// trips are counted. A batch that delivers events to their sessions spends
// three: one begins the transaction, locks the cursor and reads the events
// after it; one delivers; one records the batch, moves the cursor and
// commits. A poll that finds nothing spends two (the read, the commit).
func TestDispatchRoundTrips(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	acct := uuid.NewString()
	f.put("account", acct, account(acct))

	var trips atomic.Int64
	cfg := f.app.Pool.Config()
	cfg.ConnConfig.Tracer = tripCounter{&trips}
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := session.NewDispatcher(pool, action.NewStore(pool, f.clock, f.app.Kinds), f.clock, f.log)
	d.Notifier = ledger.NewNotifier(f.app.Pool) // its notifications are not the batch's

	// The first batch connects, builds the trigger index and creates the
	// session: not counted.
	require.Equal(t, 1, dispatchAll(t, f.ctx, d))
	s := f.session(monitorID, acct)

	for i := range 3 {
		f.put("entry", fmt.Sprint(i), entry(acct, i))
	}
	trips.Store(0)
	n, err := d.DispatchOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.EqualValues(t, 3, trips.Load(), "a delivering batch")
	require.Len(t, f.inputs(s), 3)

	trips.Store(0)
	n, err = d.DispatchOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.EqualValues(t, 2, trips.Load(), "a poll that finds nothing")
}

// tripCounter counts the round trips a pool's connections make: each
// query sent alone and each batch.
type tripCounter struct{ n *atomic.Int64 }

func (c tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

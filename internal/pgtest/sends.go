package pgtest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sends counts what a pool's connections send to PostgreSQL: each query
// sent alone and each batch is one round trip. It lets a test count the
// round trips of one loop of the service without a proxy (issue 14: the
// claim's and the dispatch batch's).
type Sends struct{ Queries, Batches atomic.Int64 }

// Total is the round trips counted since the last Reset.
func (s *Sends) Total() int64 { return s.Queries.Load() + s.Batches.Load() }

// Reset starts the count again.
func (s *Sends) Reset() {
	s.Queries.Store(0)
	s.Batches.Store(0)
}

// CountedPool returns a pool on base's database, configured as base, whose
// sends are counted; it never pings a connection before use (a ping would
// count), and is closed when t ends.
func CountedPool(t testing.TB, base *pgxpool.Pool) (*pgxpool.Pool, *Sends) {
	t.Helper()
	s := &Sends{}
	cfg := base.Config()
	cfg.ConnConfig.Tracer = sendTracer{s}
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: counted pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, s
}

type sendTracer struct{ s *Sends }

func (c sendTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.s.Queries.Add(1)
	return ctx
}

func (sendTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c sendTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.s.Batches.Add(1)
	return ctx
}

func (sendTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (sendTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// work is what a pass cost: CPU time of this process (the service and the
// bench's clients) and of the database's backends, transactions that
// wrote (transaction ids the cluster assigned), WAL bytes the cluster
// inserted and the times its WAL was flushed to disk (pg_stat_wal's
// wal_sync: every process's, counted as each reports its statistics, so
// to within about a second of the pass's edges). Unlike rates, these hardly move with a noisy neighbour, so they
// compare builds on a shared machine (issue 14: PostgreSQL CPU per consumed
// input).
type work struct {
	self     time.Duration
	postgres time.Duration // < 0: the backends' CPU is not readable (a remote server)
	xids     int64
	walBytes int64
	flushes  int64
}

// perInput divides w by n inputs, as printed: CPU in ms, the rest as counts.
func (w work) perInput(n int64) string {
	if n <= 0 {
		return "no inputs"
	}
	f := float64(n)
	pg := "PostgreSQL backends' CPU not readable"
	if w.postgres >= 0 {
		pg = fmt.Sprintf("PostgreSQL backends %.3f ms CPU", float64(w.postgres.Microseconds())/1000/f)
	}
	return fmt.Sprintf("%s, this process (service and clients) %.3f ms CPU, %.2f writing transactions, %.0f WAL bytes, %.2f WAL flushes",
		pg, float64(w.self.Microseconds())/1000/f, float64(w.xids)/f, float64(w.walBytes)/f, float64(w.flushes)/f)
}

// pgPerInput is the backends' CPU per input in ms; -1 when not readable.
func (w work) pgPerInput(n int64) float64 {
	if w.postgres < 0 || n <= 0 {
		return -1
	}
	return float64(w.postgres.Microseconds()) / 1000 / float64(n)
}

// workMeter measures work from its start.
type workMeter struct {
	pool  *pgxpool.Pool
	self  time.Duration
	pids  map[int]time.Duration // readable backends at the start, with their CPU then
	xid   int64
	walAt string
	syncs int64
}

// startWork reads the counters work is the difference of.
func startWork(ctx context.Context, pool *pgxpool.Pool) (*workMeter, error) {
	m := &workMeter{pool: pool, pids: map[int]time.Duration{}}
	pids, err := backendPIDs(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		if d, ok := procCPU(pid); ok {
			m.pids[pid] = d
		}
	}
	if err := pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, pg_current_wal_insert_lsn()::text, `+walSyncs).
		Scan(&m.xid, &m.walAt, &m.syncs); err != nil {
		return nil, fmt.Errorf("bench: read the cluster's counters: %w", err)
	}
	m.self = selfCPU()
	return m, nil
}

// stop returns the work done since the start. A backend that started
// meanwhile counts whole; one that ended meanwhile is lost (the service's
// pool keeps its connections for the length of a pass).
func (m *workMeter) stop(ctx context.Context) (work, error) {
	w := work{self: selfCPU() - m.self, postgres: -1}
	pids, err := backendPIDs(ctx, m.pool)
	if err != nil {
		return w, err
	}
	for _, pid := range pids {
		now, ok := procCPU(pid)
		if !ok {
			continue
		}
		w.postgres = max(w.postgres, 0) + now - m.pids[pid] // a new backend counts whole
	}
	var xid, syncs int64
	if err := m.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint, `+walSyncs, m.walAt).
		Scan(&xid, &w.walBytes, &syncs); err != nil {
		return w, fmt.Errorf("bench: read the cluster's counters: %w", err)
	}
	w.xids, w.flushes = xid-m.xid, syncs-m.syncs
	return w, nil
}

// walSyncs is the select-list expression of the cluster's WAL flushes so
// far (pg_stat_wal: PostgreSQL 14 and later).
const walSyncs = `coalesce((SELECT wal_sync FROM pg_stat_wal), 0)::bigint`

// backendPIDs lists the backends connected to the pool's database.
func backendPIDs(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return nil, fmt.Errorf("bench: list backends: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// Package pgmaint keeps the service's tables vacuumed and their
// statistics current (issue 14).
//
// The pipeline rewrites a few rows very often (a session's row several
// times per turn, the dispatcher's cursor and the ledger head once per
// batch) and turns each input's row over once (PENDING, then taken), so
// dead row versions pile up by the hundred thousand a minute; every
// lookup of a session, and every search for a session's pending inputs,
// then steps over them. PostgreSQL's autovacuum clears them, but by
// default only once a table's dead rows reach a fifth of it, looked at
// once a minute, and some installations turn it off (the machines this
// project is built on do): measured on two cores with autovacuum off, the
// bench's second and third runs took ten times as long from commit to
// turn as its first, and consumed inputs at half the rate; vacuumed every
// ten seconds, the three runs measured alike.
//
// So each process runs a Keeper: every Every it reads the tables'
// counters (pg_stat_user_tables) and vacuums (with ANALYZE) each table
// whose dead rows reach Threshold and a tenth of its live ones, and
// analyses each whose rows changed as much since its last analysis. One
// process at a time does it (an advisory lock); the others skip the round.
// VACUUM takes no lock that writers wait on, and a table's round costs in
// proportion to the pages changed since its last (the visibility map).
package pgmaint

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of a Keeper.
const (
	DefaultEvery     = 10 * time.Second
	DefaultThreshold = 1000
)

// lockKey is the advisory lock that lets one process keep the tables at a
// time ("pgmaint" in ASCII).
const lockKey = 0x70676d61696e74

// Keeper vacuums and analyses the tables of its pool's database.
type Keeper struct {
	Pool *pgxpool.Pool
	// Every is the time between rounds (DefaultEvery); Threshold the
	// fewest dead or changed rows that make a table due (DefaultThreshold).
	Every     time.Duration
	Threshold int64
	Log       *slog.Logger
}

// Run keeps the tables until ctx ends. A round that fails is logged and
// the next one tried.
func (k *Keeper) Run(ctx context.Context) error {
	every := k.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := k.Once(ctx); err != nil && ctx.Err() == nil && k.Log != nil {
			k.Log.Warn("table maintenance failed; tried again next round", "err", err)
		}
	}
}

// Done is what a round did to one table.
type Done struct {
	Table  string
	Vacuum bool // VACUUM (ANALYZE); otherwise ANALYZE
}

// Once runs one round and returns what it did, in order; nothing when
// another process holds the round's lock.
func (k *Keeper) Once(ctx context.Context) ([]Done, error) {
	threshold := k.Threshold
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	conn, err := k.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgmaint: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(lockKey)).Scan(&locked); err != nil {
		return nil, fmt.Errorf("pgmaint: lock: %w", err)
	}
	if !locked {
		return nil, nil
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(lockKey))
	}()
	// The counters as this backend sees them now, not as cached earlier.
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return nil, fmt.Errorf("pgmaint: %w", err)
	}
	rows, err := conn.Query(ctx, `
		SELECT quote_ident(schemaname) || '.' || quote_ident(relname),
		       n_dead_tup >= greatest($1, n_live_tup / 10)
		  FROM pg_stat_user_tables
		 WHERE schemaname = current_schema()
		   AND (n_dead_tup >= greatest($1, n_live_tup / 10) OR n_mod_since_analyze >= greatest($1, n_live_tup / 10))
		 ORDER BY n_dead_tup DESC`, threshold)
	if err != nil {
		return nil, fmt.Errorf("pgmaint: counters: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Done, error) {
		var d Done
		err := r.Scan(&d.Table, &d.Vacuum)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgmaint: counters: %w", err)
	}
	var done []Done
	for _, d := range due {
		stmt := "ANALYZE " + d.Table
		if d.Vacuum {
			stmt = "VACUUM (ANALYZE) " + d.Table
		}
		// Simple protocol: VACUUM runs outside a transaction block.
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return done, fmt.Errorf("pgmaint: %s: %w", stmt, err)
		}
		done = append(done, d)
	}
	return done, nil
}

// Package pgplan keeps PostgreSQL's plans of the service's statements
// driven by index lookups, whatever the tables' statistics say (issue 14).
//
// Every hot statement of the service reads or writes rows by key: a
// session by (action, id), its inputs by (session, seq), an event by id.
// PostgreSQL plans them from statistics that autovacuum refreshes at most
// once a minute per table, and caches a generic plan per prepared
// statement after five runs, kept until the next ANALYZE of a table it
// reads. So a plan made while a table was small (a new database, or a
// table that grew fast since) goes on scanning the whole table, or hashing
// it, long after it grew: measured on a fresh database, a batch settling 5
// turns read all 11,170 rows of session_inputs (10 ms) and the read of one
// event by id all 67,441 events (13 ms).
//
// Three settings keep the plans on the indexes and planned once:
//   - Settings, on every connection: no sequential scan where an index can
//     serve (enable_seqscan only raises a scan's estimated cost, so a table
//     without a usable index is still scanned), and no JIT compilation,
//     which the raised estimates would otherwise trigger and which never
//     pays off on statements that touch a few rows.
//   - plan_cache_mode=force_generic_plan, on every connection: each
//     prepared statement is planned once per connection. By default
//     PostgreSQL plans a statement afresh for its first five runs and
//     goes on doing so whenever a custom plan looks cheaper than the
//     generic one, which statements over parameter arrays (unnest, ANY)
//     always do: measured with perf during the bench's single-write pass,
//     planning took 15 % of PostgreSQL's CPU. With sequential scans off,
//     the generic plans are the index lookups a custom plan would make.
//   - KeyJoins, in transactions whose statements join a batch of keys (an
//     unnest of arrays) to the tables they update: nested loops only, so
//     each key is one index probe instead of a hash of the table.
package pgplan

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// Settings are the run-time parameters Configure gives every connection.
var Settings = map[string]string{
	"enable_seqscan":  "off",
	"jit":             "off",
	"plan_cache_mode": "force_generic_plan",
}

// Configure adds Settings to cfg's run-time parameters, leaving alone any
// the database URL already sets (a parameter in the URL's query, such as
// ?jit=on, overrides).
func Configure(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range Settings {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
}

// KeyJoins is a statement that makes the rest of its transaction plan
// joins as nested loops (SET LOCAL of enable_hashjoin and
// enable_mergejoin): for transactions whose statements join key arrays to
// tables, queued with their BEGIN so it costs no round trip. Its one row
// holds one ignorable column.
const KeyJoins = `SELECT ` + KeyJoinsExpr

// KeyJoinsExpr is KeyJoins as an expression (text, never null), to ride on
// a statement the transaction runs first anyway.
const KeyJoinsExpr = `set_config('enable_hashjoin', 'off', true) || set_config('enable_mergejoin', 'off', true)`

// ConfigurePool is Configure for a pool's connections, and has each
// connection encode and scan github.com/google/uuid values directly
// (Types), after any AfterConnect cfg already has.
func ConfigurePool(cfg *pgxpool.Config) {
	Configure(&cfg.ConnConfig.Config)
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		Types(c.TypeMap())
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
}

// Types makes tm encode uuid.UUID parameters (and their slices, which the
// batch statements pass) as the 16 bytes they are, and scan uuid columns
// into uuid.UUID the same way. Without it pgx takes a uuid.UUID as a
// driver.Valuer: it formats each one as text and parses the text back
// (with an error value per failed plan) before sending it, which was 9 %
// of the service's CPU in the bench's single-write pass (issue 14). The
// values read and written are unchanged; a uuid column scanned into an
// interface still gives [16]byte.
func Types(tm *pgtype.Map) {
	tm.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{pgxuuid.TryWrapUUIDEncodePlan}, tm.TryWrapEncodePlanFuncs...)
	tm.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{pgxuuid.TryWrapUUIDScanPlan}, tm.TryWrapScanPlanFuncs...)
}

package session

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgplan"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/ledger"
)

// Issue 14 (internal/pgplan): the statements that deliver inputs and
// settle turns reach sessions and their inputs by index probes, even in
// the generic plan made on tables that grew since they were created and
// were never analysed (a new database under load), which a connection
// keeps once made: no table is scanned or hashed whole.
func TestDeliveryAndSettlePlansProbeByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := keyJoinsTx(t)
	var err error

	whole := regexp.MustCompile(`Seq Scan|Hash Join|Merge Join|Hash Anti Join|Merge Anti Join|Hash Semi Join`)
	check := func(when string) {
		for name, q := range map[string]struct {
			sql string
			n   int
		}{
			"deliver":       {deliverSQL, 12},
			"settle inputs": {settleInputsSQL, 4},
		} {
			plan := pgtest.GenericPlan(t, tx, q.sql, q.n)
			require.NotRegexp(t, whole, plan, "%s, %s: a table read whole:\n%s", name, when, plan)
			require.Regexp(t, `Index (Only )?Scan using \w+ on session_inputs`, plan, "%s, %s:\n%s", name, when, plan)
		}
	}
	check("empty tables")

	// 20,000 inputs of 200 sessions, without statistics (the foreign
	// keys' triggers are off while they are written, as a replica's are).
	_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		INSERT INTO sessions (sid, action_id, id, version, input, status, started_at, created_at, updated_at)
		SELECT g, gen_random_uuid(), g::text, 1, '{}', 'OPEN', now(), now(), now() FROM generate_series(1, 200) g;
		INSERT INTO session_inputs (sid, seq, identity, kind, starts_turn, status, byte_size, delivered_at, order_key)
		SELECT s, q, 'event/' || s || '/' || q, 'EVENT', true, 'TAKEN', 10, now(), lpad(q::text, 20, '0')
		  FROM generate_series(1, 200) s, generate_series(1, 100) q;
		SET LOCAL session_replication_role = origin`)
	require.NoError(t, err)

	check("20,000 inputs")

	// 300 open sessions of one action and version (the bench's monitor),
	// 100 inputs each: a delivery finds its session by its route and key,
	// and whether it has the input by (sid, identity), never by reading
	// the action's open sessions or the session's inputs one by one.
	_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		INSERT INTO sessions (sid, action_id, id, version, input, status, started_at, created_at, updated_at)
		SELECT 1000 + g, '6f1d0f8e-0000-4000-8000-000000000001', 'acct-' || g, 1, '{}', 'OPEN', now(), now(), now() FROM generate_series(1, 300) g;
		INSERT INTO session_inputs (sid, seq, identity, kind, starts_turn, status, byte_size, delivered_at, order_key)
		SELECT 1000 + s, q, 'event/' || s || '/' || q, 'EVENT', true, 'CONSUMED', 10, now(), lpad(q::text, 20, '0')
		  FROM generate_series(1, 300) s, generate_series(1, 100) q;
		SET LOCAL session_replication_role = origin`)
	require.NoError(t, err)
	probes := func(when string, analysed bool) {
		plan := pgtest.GenericPlan(t, tx, deliverSQL, 12)
		require.Regexp(t, `Index Scan using sessions_pkey on sessions s_1\b`, plan, "session by key, %s:\n%s", when, plan)
		require.Regexp(t, `Index (Only )?Scan using session_inputs_sid_identity_key on session_inputs i\b`, plan, "input by identity, %s:\n%s", when, plan)
		require.NotRegexp(t, `sessions_open_version|sessions_status`, plan, "%s:\n%s", when, plan)
		if analysed {
			// Unanalysed, (action_id, sid) with a filter on id costs the
			// same as the unique (action_id, id) and may be taken: it reads
			// the action's sessions, cheap while they are few. Once
			// analysed (internal/pgmaint), the route is one probe.
			require.Regexp(t, `Index Scan using sessions_action_id_id_key on sessions r\b`, plan, "route, %s:\n%s", when, plan)
		}
	}
	probes("one action's 300 sessions, never analysed", false)
	_, err = tx.Exec(ctx, `ANALYZE sessions; ANALYZE session_inputs`)
	require.NoError(t, err)
	probes("one action's 300 sessions, analysed", true)
}

// Issue 14: the reads queued behind a claim (QueueClaimedPending) find the
// claimed sessions by key, not by reading their version's sessions, in the
// generic plan a connection keeps: made on a table never analysed, on one
// grown since it was analysed empty, and on one analysed. (Planned on
// the empty table's statistics while still empty, any index of sessions
// costs the same; the plan is made again after the next ANALYZE, which
// internal/pgmaint runs once the table is busy.)
func TestClaimedReadsProbeByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := keyJoinsTx(t)
	var err error
	actionID := uuid.MustParse("6f1d0f8e-0000-4000-8000-000000000001")
	check := func(when string) {
		b := &pgx.Batch{}
		known := VersionReads{}
		known.Add(actionID, 1, 100, true)
		QueueClaimedPending(b, time.Now(), known, map[int64]*Pending{}, map[int64]map[string]time.Time{}, map[uuid.UUID]ledger.Event{})
		require.Len(t, b.QueuedQueries, 4)
		for _, q := range b.QueuedQueries {
			plan := pgtest.GenericPlan(t, tx, q.SQL, len(q.Arguments))
			require.NotRegexp(t, `Seq Scan|Hash Join|Merge Join|sessions_action_created|sessions_open_version|sessions_status`, plan, "%s:\n%s", when, plan)
			require.Regexp(t, `Index Scan using sessions_pkey on sessions s(_\d+)?\b`, plan, "%s:\n%s", when, plan)
		}
	}
	check("empty tables, never analysed")
	_, err = tx.Exec(ctx, `ANALYZE sessions; ANALYZE session_inputs`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		SET LOCAL session_replication_role = replica;
		INSERT INTO sessions (sid, action_id, id, version, input, status, started_at, created_at, updated_at)
		SELECT g, '`+actionID.String()+`', 'acct-' || g, 1, '{}', 'OPEN', now(), now(), now() FROM generate_series(1, 3000) g;
		SET LOCAL session_replication_role = origin`)
	require.NoError(t, err)
	check("3,000 sessions of one version, statistics of the empty table")
	_, err = tx.Exec(ctx, `ANALYZE sessions`)
	require.NoError(t, err)
	check("3,000 sessions of one version, analysed")
}

// keyJoinsTx begins a transaction on a fresh database that plans joins as
// the dispatcher's, the claim's and the completer's do (pgplan.KeyJoins);
// it is rolled back when t ends.
func keyJoinsTx(t *testing.T) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.NewPool(t).Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, pgplan.KeyJoins)
	require.NoError(t, err)
	return tx
}

// Issue 14 (migration 00026): a claim finds runnable sessions through
// session_runnable's index on the runnable time and each session by its
// key, in the generic plan a connection keeps: on empty tables, and with
// 3,000 sessions of which 30 are runnable, before and after ANALYZE. The
// sessions are inserted with their triggers on, which fill session_runnable.
func TestClaimPlanFindsRunnableSessionsByIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := keyJoinsTx(t)
	check := func(when string) {
		b := &pgx.Batch{}
		QueueClaim(b, time.Now(), 16, &[]Claimed{})
		require.Len(t, b.QueuedQueries, 1)
		q := b.QueuedQueries[0]
		plan := pgtest.GenericPlan(t, tx, q.SQL, len(q.Arguments))
		require.NotRegexp(t, `Seq Scan|Hash Join|Merge Join|sessions_status|sessions_open_version`, plan, "%s:\n%s", when, plan)
		require.Regexp(t, `Index Scan using session_runnable_at on session_runnable r\b`, plan, "%s:\n%s", when, plan)
		require.Regexp(t, `Index Scan using sessions_pkey on sessions\b`, plan, "%s:\n%s", when, plan)
	}
	check("empty tables")
	_, err := tx.Exec(ctx, `
		INSERT INTO actions (id, current_version, created_at, updated_at) VALUES ('6f1d0f8e-0000-4000-8000-000000000001', 1, now(), now());
		INSERT INTO sessions (sid, action_id, id, version, input, status, started_at, created_at, updated_at, next_turn_at)
		SELECT g, '6f1d0f8e-0000-4000-8000-000000000001', 'acct-' || g, 1, '{}', 'OPEN', now(), now(), now(),
		       CASE WHEN g % 100 = 0 THEN now() END
		  FROM generate_series(1, 3000) g`)
	require.NoError(t, err)
	var runnable int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM session_runnable WHERE at IS NOT NULL`).Scan(&runnable))
	require.Equal(t, 30, runnable, "the insert trigger copies next_turn_at")
	check("3,000 sessions, never analysed")
	_, err = tx.Exec(ctx, `ANALYZE sessions; ANALYZE session_runnable`)
	require.NoError(t, err)
	check("3,000 sessions, analysed")
}

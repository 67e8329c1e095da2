package session

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgplan"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// Issue 14 (internal/pgplan): the statements that deliver inputs and
// settle turns reach sessions and their inputs by index probes, even in
// the generic plan made on tables that grew since they were created and
// were never analysed (a new database under load), which a connection
// keeps once made: no table is scanned or hashed whole.
func TestDeliveryAndSettlePlansProbeByKey(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, pgplan.KeyJoins) // as the dispatcher's and the completer's transactions
	require.NoError(t, err)

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
}

package pgmaint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgmaint"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// Issue 14: a round vacuums the tables whose dead rows piled up and
// analyses those that changed, and leaves the others; a second process's
// round while the first holds the lock does nothing.
func TestKeeperVacuumsWhatIsDue(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE churn (id int PRIMARY KEY, n int)`,
		`INSERT INTO churn SELECT g, 0 FROM generate_series(1, 3000) g`,
		`CREATE TABLE grows (id int PRIMARY KEY)`,
		`CREATE TABLE quiet (id int PRIMARY KEY)`,
		`INSERT INTO quiet VALUES (1)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	k := &pgmaint.Keeper{Pool: pool, Threshold: 500}
	_, err := k.Once(ctx) // whatever the template left behind
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM churn WHERE id > 1000`) // 2,000 dead rows
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO grows SELECT generate_series(1, 2000)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`) // the counters reach the others now
	require.NoError(t, err)
	conn.Release()

	// Another process holding the round: nothing done.
	other, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock(x'70676d61696e74'::bigint)`)
	require.NoError(t, err)
	done, err := k.Once(ctx)
	require.NoError(t, err)
	require.Empty(t, done)
	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock(x'70676d61696e74'::bigint)`)
	require.NoError(t, err)
	other.Release()

	done, err = k.Once(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []pgmaint.Done{{Table: "public.churn", Vacuum: true}, {Table: "public.grows"}}, done)

	var dead int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'churn'`).Scan(&dead))
	require.Less(t, dead, int64(500), "vacuumed")
	done, err = k.Once(ctx)
	require.NoError(t, err)
	require.Empty(t, done, "nothing due any more")
}

package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Schedule triggers across real processes (issue 15, A4; HARD-PARTS 2):
// a firing is one event and one execution (or one session start) however
// the process dies.
//
// First a kill in the middle of a firing, made deterministic: the test
// holds the ledger head's row lock, so the firing's transaction (which has
// locked its clock and is appending the event) waits; the process is
// killed with SIGKILL while it waits, the lock is released and the process
// starts again. Then random kills while two schedule triggers fire every
// second: one runs an execution of an action without a session block, the
// other starts a session keyed by the scheduled time.
//
// Once the actions are disabled and everything has drained, for each
// trigger: its firings' scheduled times are on the one-second grid and
// strictly increasing, each gap is the firing's missed count plus one (no
// firing lost uncounted, none twice), and each firing has exactly one
// SUCCEEDED execution, or started exactly one session.
//
// CRASH_SEED=<seed> replays the kill moments.
func TestCrashScheduleTriggerUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	rng := crashRNG(t)
	p, gql := startCrashService(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)

	const createOp = `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { actionId version } } }`
	execID, sessID := uuid.New(), uuid.New()
	require.NoError(t, gql.do(createOp, map[string]any{"id": execID, "input": map[string]any{
		"name": "tick", "kind": "agent.echo", "config": map[string]any{"sleep_ms": 5},
		"triggers": []any{map[string]any{"name": "tick", "schedule": map[string]any{"every": "1s"}}},
	}}))
	require.NoError(t, gql.do(createOp, map[string]any{"id": sessID, "input": map[string]any{
		"name": "slots", "kind": "agent.echo",
		"triggers": []any{map[string]any{"name": "slot", "schedule": map[string]any{"every": "1s"},
			"session": map[string]any{"start": map[string]any{"input": map[string]any{"slot": "string(event.data.scheduled_at)"}}}}},
		"session": map[string]any{"id": "string(session.input.slot)"},
	}}))

	// The deterministic kill, mid-firing.
	holder, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM ledger_head FOR UPDATE`)
	require.NoError(t, err)
	waiting := false
	for deadline := time.Now().Add(20 * time.Second); !waiting && time.Now().Before(deadline); {
		waiting = crashCount(t, conn, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE ledger_head%'`) > 0
		if !waiting {
			time.Sleep(20 * time.Millisecond) // polling for the firing to block
		}
	}
	require.True(t, waiting, "a firing's append waits on the held head")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'schedule.fired'`), "nothing fired yet")
	p.kill()
	require.NoError(t, tx.Rollback(ctx))
	p.start()

	// The random kills.
	for round := range 5 {
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond) // the random moment of the kill
		p.kill()
		t.Logf("round %d: killed", round)
		if round%2 == 1 {
			time.Sleep(1200 * time.Millisecond) // down across a firing: the next one counts it missed
		}
		p.start()
	}
	time.Sleep(1500 * time.Millisecond) // a firing or two with nothing killed
	for _, id := range []uuid.UUID{execID, sessID} {
		require.NoError(t, gql.do(`mutation($id: UUID!) { actions { setActionStatus(id: $id, status: DISABLED) { status } } }`,
			map[string]any{"id": id}))
	}
	drainExecutions(t, conn, 120*time.Second)
	crashDrain(t, conn, 120*time.Second)
	p.kill() // nothing may change while we look

	type firing struct {
		ID          uuid.UUID
		ScheduledAt time.Time
		Missed      int
	}
	firings := func(actionID uuid.UUID) []firing {
		rows, err := conn.Query(ctx, `SELECT id, data FROM events WHERE type = 'schedule.fired' AND data->>'action' = $1 ORDER BY position`,
			actionID.String())
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (firing, error) {
			var f firing
			var raw []byte
			if err := r.Scan(&f.ID, &raw); err != nil {
				return f, err
			}
			var d struct {
				ScheduledAt time.Time `json:"scheduled_at"`
				Missed      int       `json:"missed"`
			}
			err := json.Unmarshal(raw, &d)
			f.ScheduledAt, f.Missed = d.ScheduledAt, d.Missed
			return f, err
		})
		require.NoError(t, err)
		return out
	}
	var anchor time.Time
	for _, id := range []uuid.UUID{execID, sessID} {
		fs := firings(id)
		require.GreaterOrEqual(t, len(fs), 5, "it fired through the kills")
		require.NoError(t, conn.QueryRow(ctx, `SELECT anchor FROM trigger_schedules WHERE action_id = $1`, id).Scan(&anchor))
		missed := 0
		for i, f := range fs {
			require.Zero(t, f.ScheduledAt.Sub(anchor)%time.Second, "on the grid from the trigger's creation")
			if i == 0 {
				require.Equal(t, anchor.UTC().Add(time.Duration(f.Missed+1)*time.Second), f.ScheduledAt.UTC(), "the first firing counts what it passed over")
			} else {
				require.Equal(t, time.Duration(f.Missed+1)*time.Second, f.ScheduledAt.Sub(fs[i-1].ScheduledAt),
					"firing %d: the gap is its missed count plus one", i)
			}
			missed += f.Missed
		}
		var fired, missedTotal int
		require.NoError(t, conn.QueryRow(ctx, `SELECT fired, missed FROM trigger_schedules WHERE action_id = $1`, id).Scan(&fired, &missedTotal))
		require.Equal(t, len(fs), fired, "the clock counted each firing once")
		require.Equal(t, missed, missedTotal)
		t.Logf("action %s: %d firings, %d missed", id, len(fs), missed)
	}

	// One execution per firing, each SUCCEEDED.
	fs := firings(execID)
	require.Equal(t, len(fs), crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1`, execID))
	require.Equal(t, len(fs), crashCount(t, conn, `SELECT count(DISTINCT event_id) FROM executions WHERE action_id = $1 AND status = 'SUCCEEDED'`, execID))
	// One session per firing, started by it.
	fs = firings(sessID)
	require.Equal(t, len(fs), crashCount(t, conn, `SELECT count(*) FROM sessions WHERE action_id = $1`, sessID))
	for _, f := range fs {
		require.Equal(t, 1, crashCount(t, conn, `SELECT count(*) FROM sessions WHERE action_id = $1 AND origin_event_id = $2`, sessID, f.ID))
	}
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM intake_records WHERE action_id = $1`, sessID))
}

package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Backfills across real processes (issue 15): an action created with
// from=1 over a ledger of a few thousand events, while writes go on and
// the process is killed with SIGKILL at random moments, ends with exactly
// the sessions and inputs of an identical action that saw every event
// live: no event delivered twice or missed across kills and the seam with
// live dispatch. CRASH_SEED=<seed> replays the kill moments.
func TestCrashBackfillUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	rng := crashRNG(t)
	p, gql := startCrashService(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)

	const monitor = `{
	  name: "monitor", kind: "agent.echo", config: { sleep_ms: 0 },
	  triggers: [
	    { name: "opened", event: "event.type == \"account.inserted\"", session: { start: { input: { account_id: "string(event.data.account_id)" } } } },
	    { name: "entry", event: "event.type == \"entry.inserted\"", session: { resume: { id: "string(event.data.account_id)" } } }
	  ],
	  session: { id: "string(session.input.account_id)", turns: { on: ["entry"] } }
	}`
	ref, late := uuid.NewString(), uuid.NewString()
	require.NoError(t, gql.do(`mutation($id: UUID!) { actions { createAction(id: $id, input: `+monitor+`) { version } } }`, map[string]any{"id": ref}))

	// The past: accounts and entries, written in bulk.
	accts := make([]string, 40)
	for i := range accts {
		accts[i] = uuid.NewString()
	}
	n := 0
	bulk := func(count int) error {
		var recs []map[string]any
		for range count {
			a := accts[n%len(accts)]
			if n < len(accts) {
				recs = append(recs, map[string]any{"namespace": "account", "key": a, "value": map[string]any{"account_id": a}})
			} else {
				recs = append(recs, map[string]any{"namespace": "entry", "key": fmt.Sprintf("e%d", n), "value": map[string]any{"account_id": a, "n": n},
					"idempotencyKey": fmt.Sprintf("crash-e%d", n)})
			}
			n++
		}
		return gql.do(`mutation($r: [ValueInput!]!) { ledger { putValues(records: $r) { version } } }`, map[string]any{"r": recs})
	}
	for range 20 {
		require.NoError(t, bulk(500))
	}
	require.NoError(t, gql.do(`mutation($id: UUID!) { actions { createAction(id: $id, from: "1", input: `+monitor+`) { version } } }`, map[string]any{"id": late}))

	// Live writes and kills while it backfills.
	for round := range 4 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 5; i++ {
				if bulk(50) != nil {
					n -= 50 // cut off: written again with the same keys
					return
				}
			}
		}()
		time.Sleep(time.Duration(100+rng.IntN(600)) * time.Millisecond) // the random moment of the kill
		p.kill()
		<-done
		var cursor int64
		var joined *int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT cursor, joined_position FROM action_backfills`).Scan(&cursor, &joined))
		t.Logf("round %d: killed at %d records written; the backfill at %d, joined %v", round, n, cursor, joined != nil)
		p.start()
	}
	require.NoError(t, bulk(50))

	deadline := time.Now().Add(120 * time.Second)
	for crashCount(t, conn, `SELECT count(*) FROM action_backfills WHERE joined_position IS NULL`) > 0 {
		require.True(t, time.Now().Before(deadline), "the backfill did not join live dispatch")
		time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
	}
	crashDrain(t, conn, 120*time.Second)
	p.kill()

	view := func(id string) string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(string_agg(x, ';' ORDER BY x), '') FROM (
			SELECT s.id || ' ' || s.started_at::text || ' ' || coalesce((SELECT string_agg(i.event_id::text, ',' ORDER BY i.event_id)
				FROM session_inputs i WHERE i.sid = s.sid), '') AS x
			FROM sessions s WHERE s.action_id = $1) v`, id).Scan(&s))
		return s
	}
	require.Equal(t, view(ref), view(late))
	entries := crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'entry.inserted'`)
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM session_inputs i JOIN sessions s ON s.sid = i.sid WHERE s.action_id = $1`, late))
	require.Equal(t, len(accts), crashCount(t, conn, `SELECT count(*) FROM sessions WHERE action_id = $1`, late))
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM intake_records`))
	var status string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status FROM action_backfills WHERE action_id = $1`, late).Scan(&status))
	require.Equal(t, "DONE", status)
}

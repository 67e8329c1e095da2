package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Executions of actions without a session block across real processes
// (issue 15; HARD-PARTS 2 and 3 for executions). The built binary serves a
// fresh database.
//
// First, a kill in the middle of an execution, made deterministic: an http
// action's receiver holds the first request until the process has been
// killed with SIGKILL, then the process starts again; the execution, whose
// lease has expired, runs again (attempt 2, the same execution and event)
// and commits once.
//
// Then random kills: a Starlark action with a concurrency limit of one per
// account writes one record per entry (keyed by the entry's event, so a
// second commit would make a version 2 or an .updated event) and, in a
// record per account, the entry it saw last; an agent.echo action with a
// limit of two runs every entry too. Each round writes entries through
// GraphQL and kills the process at a random moment, then starts it again
// (writes cut off are retried with their idempotency keys). Once
// everything has drained: one execution per action and entry, every one
// SUCCEEDED, every record written once; and each of the Starlark action's
// executions saw, in its account's record, the entry before its own: the
// executions of one account ran one at a time, in the commit order of
// their entries.
//
// CRASH_SEED=<seed> replays the kill moments.
func TestCrashSessionlessUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	const (
		accounts = 3
		rounds   = 6
		batch    = 15
	)
	rng := crashRNG(t)

	// The http action's receiver: the first request waits for the kill.
	type call struct {
		Execution string `json:"execution_id"`
		Attempt   int    `json:"attempt"`
		Session   string `json:"session_id"`
		Inputs    []struct {
			Event struct{ Type string } `json:"event"`
		} `json:"inputs"`
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c call
		_ = json.Unmarshal(body, &c)
		mu.Lock()
		calls = append(calls, c)
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			arrived <- struct{}{}
			select { // held until the process is gone
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status": "OPEN", "output": {"attempt": `+jsonInt(c.Attempt)+`}}`)
	}))
	defer recv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	t.Setenv("HTTP_ALLOW", "127.0.0.1/32")
	p, gql := startCrashService(t)

	const createOp = `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { actionId version } } }`
	hookID, writerID, echoID := uuid.New(), uuid.New(), uuid.New()
	require.NoError(t, gql.do(createOp, map[string]any{"id": hookID, "input": map[string]any{
		"name": "probe-hook", "kind": "http",
		"config":   map[string]any{"url": recv.URL + "/hook", "secret": "0123456789abcdef0123", "timeout_ms": 60000},
		"triggers": []any{map[string]any{"name": "probe", "event": `event.type == "probe.inserted"`}},
	}}))
	require.NoError(t, gql.do(createOp, map[string]any{"id": writerID, "input": map[string]any{
		"name": "entry-writer", "kind": "starlark",
		"source": `
def turn(event):
    ev = event["inputs"][0]["event"]
    account = ev["data"]["account_id"]
    last = ledger.get("order", account)
    prev = None
    if last != None:
        prev = last["n"]
    ledger.put("order", account, {"n": ev["data"]["n"]})
    v = ledger.put("seen", ev["id"], {"n": ev["data"]["n"]})
    return {"output": {"version": v, "prev": prev}}
`,
		"triggers":    []any{map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`}},
		"concurrency": map[string]any{"limit": 1, "key": "string(event.data.account_id)"},
		"permissions": map[string]any{"read": []any{"order"}, "write": []any{"seen", "order"}},
	}}))
	require.NoError(t, gql.do(createOp, map[string]any{"id": echoID, "input": map[string]any{
		"name": "entry-echo", "kind": "agent.echo", "config": map[string]any{"sleep_ms": 20},
		"triggers":    []any{map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`}},
		"concurrency": map[string]any{"limit": 2},
	}}))

	// The deterministic kill, mid-execution.
	require.NoError(t, gql.put(crashWrite{ns: "probe", key: "p1", value: map[string]any{"n": 1}}))
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the http action's first request did not arrive")
	}
	p.kill()
	close(release)
	p.start()
	// The cut execution runs again (once its lease ran out) and commits
	// before the random kills begin: one of them could cut it again.
	{
		conn, err := pgx.Connect(t.Context(), p.dsn)
		require.NoError(t, err)
		deadline := time.Now().Add(60 * time.Second)
		for crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1 AND status = 'SUCCEEDED'`, hookID) == 0 {
			require.True(t, time.Now().Before(deadline), "the cut execution did not run again")
			time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
		}
		conn.Close(t.Context())
	}

	// The random kills.
	var writes []crashWrite
	accts := make([]string, accounts)
	for i := range accts {
		accts[i] = uuid.NewString()
	}
	for n := range rounds * batch {
		writes = append(writes, crashWrite{ns: "entry", key: uuid.NewString(),
			value: map[string]any{"account_id": accts[rng.IntN(accounts)], "n": n}})
	}
	next := 0
	for round := range rounds {
		end := (round + 1) * batch
		written := make(chan int, 1)
		go func(from, to int) {
			i := from
			for ; i < to; i++ {
				if gql.put(writes[i]) != nil {
					break // the process is gone; the write is retried with its key
				}
			}
			written <- i
		}(next, end)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond) // the random moment of the kill
		p.kill()
		next = <-written
		t.Logf("round %d: killed after %d of %d writes", round, next, len(writes))
		p.start()
	}
	for ; next < len(writes); next++ {
		require.NoError(t, gql.put(writes[next]))
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	drainExecutions(t, conn, 120*time.Second)
	p.kill() // nothing may change while we look

	// The http action: one execution, run twice (the kill cut the first
	// run), committed once, by the second run.
	var status string
	var attempts int
	var output []byte
	require.NoError(t, conn.QueryRow(ctx, `SELECT status, attempts, output FROM executions WHERE action_id = $1`, hookID).
		Scan(&status, &attempts, &output))
	require.Equal(t, "SUCCEEDED", status)
	require.Equal(t, 2, attempts)
	require.JSONEq(t, `{"attempt": 2}`, string(output))
	require.Equal(t, 1, crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1`, hookID))
	mu.Lock()
	require.Len(t, calls, 2, "at least once: the cut run and the one that committed")
	require.Equal(t, calls[0].Execution, calls[1].Execution, "the same execution")
	require.Equal(t, []int{1, 2}, []int{calls[0].Attempt, calls[1].Attempt})
	require.Empty(t, calls[1].Session, "no session")
	require.Equal(t, "probe.inserted", calls[1].Inputs[0].Event.Type)
	mu.Unlock()

	entries := len(writes)
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'entry.inserted'`),
		"every write committed once (idempotency keys)")
	for _, id := range []uuid.UUID{writerID, echoID} {
		// One execution per action and entry, whatever the kills.
		require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events e WHERE e.type = 'entry.inserted'
			AND (SELECT count(*) FROM executions x WHERE x.action_id = $1 AND x.event_id = e.id) <> 1`, id),
			"an entry without an execution, or with two")
		require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1 AND status <> 'SUCCEEDED'`, id))
	}
	// The writer's records committed once each, with their executions.
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM kv_values WHERE namespace = 'seen' AND version = 1`))
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'seen.inserted'`))
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'seen.updated'`), "a record written twice")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM executions x WHERE x.action_id = $1
		AND x.output->>'version' IS DISTINCT FROM '1'`, writerID))
	// The writer's executions of one account ran one at a time, in the
	// commit order of their entries: each saw the entry before its own.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM (
			SELECT x.output->>'prev' AS prev,
			       lag(e.data->>'n') OVER (PARTITION BY e.data->>'account_id' ORDER BY x.event_position) AS before
			  FROM executions x JOIN events e ON e.id = x.event_id WHERE x.action_id = $1) r
		WHERE r.prev IS DISTINCT FROM r.before`, writerID), "two executions of one account overlapped, or ran out of order")
	require.Equal(t, accounts, crashCount(t, conn, `SELECT count(DISTINCT concurrency_key) FROM executions WHERE action_id = $1`, writerID))
	t.Logf("%d executions; %d ran more than once (attempts > 1)",
		crashCount(t, conn, `SELECT count(*) FROM executions`),
		crashCount(t, conn, `SELECT count(*) FROM executions WHERE attempts > 1`))
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// drainExecutions waits until every event is dispatched and no execution
// is queued or running.
func drainExecutions(t *testing.T, conn *pgx.Conn, within time.Duration) {
	t.Helper()
	const q = `SELECT (SELECT position FROM ledger_head) - (SELECT position FROM dispatch_state),
		(SELECT count(*) FROM executions WHERE status IN ('QUEUED', 'RUNNING'))`
	deadline := time.Now().Add(within)
	var undispatched, open int64
	for time.Now().Before(deadline) {
		require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&undispatched, &open))
		if undispatched == 0 && open == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
	}
	var states []string
	rows, err := conn.Query(t.Context(), `SELECT status || ' ' || coalesce(error, '') FROM executions WHERE status IN ('QUEUED', 'RUNNING') LIMIT 5`)
	if err == nil {
		states, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	t.Fatalf("not drained after %s: %d events undispatched, %d executions queued or running: %s", within, undispatched, open,
		strings.Join(states, "; "))
}

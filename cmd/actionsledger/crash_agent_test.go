package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Approvals and held turns across real processes (P1-P5, H1-H3, T6, T7
// under SIGKILL). The built binary serves a fresh database with a Starlark
// tool that writes one ledger record per call, keyed by its input's "key",
// and an agent action with a session per account whose scripted model calls
// that tool (approval REQUIRED) for every entry and reports OPEN once the
// call ran. Its turns take one entry each (maxInputs 1), so every entry
// leads to exactly one gated call. A "suspicious" entry is refused first:
// the turn is held, and the test answers the hold with RETRY and a note
// that makes the model call the tool after all.
//
// The test answers each approval with APPROVE and a replacement input
// {"key": <interruptId>}, so each approved call writes the record named by
// its interrupt. Each round writes entries and answers what the sessions
// wait on, and kills the process with SIGKILL at a random moment (during a
// write, an answer or a turn), then starts it again; a write or an answer
// cut off by a kill is retried (the write with its idempotency key; the
// answer may then find ALREADY_ANSWERED, which counts as answered). Once
// everything has drained, the database must show every entry delivered
// once and taken by one turn (consumed by a completed turn, or received by a
// held turn that exactly one completed retry ran again), every interrupt
// answered once by one responded event and one COMMAND input consumed by
// one completed turn, every approved call's tool run committed exactly
// once, and turns numbered 1..N per session.
//
// The kill moments come from a seeded RNG; the seed is logged, and
// CRASH_SEED=<seed> replays it.
func TestCrashAgentApprovalsUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	const (
		accounts = 4
		rounds   = 10
		batch    = 6
	)
	rng := crashRNG(t)
	p, gql := startCrashService(t)

	toolID, agentID := uuid.New(), uuid.New()
	const createOp = `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { actionId version } } }`
	require.NoError(t, gql.do(createOp, map[string]any{"id": toolID, "input": crashFreezeTool()}))
	require.NoError(t, gql.do(createOp, map[string]any{"id": agentID, "input": crashAgentMonitor(toolID)}))

	var writes []crashWrite
	accts := make([]string, accounts)
	for i := range accts {
		accts[i] = uuid.NewString()
		writes = append(writes, crashWrite{ns: "account", key: accts[i], value: map[string]any{"account_id": accts[i]}})
	}
	suspicious := 0
	for n := range rounds * batch {
		v := map[string]any{"account_id": accts[rng.IntN(accounts)], "n": n}
		if rng.IntN(5) == 0 {
			v["note"] = "suspicious-transfer"
			suspicious++
		}
		writes = append(writes, crashWrite{ns: "entry", key: uuid.NewString(), value: v})
	}

	a := &crashAnswerer{gql: gql, actionID: agentID, sessions: accts, answered: map[string]bool{}}
	next := 0
	for round := range rounds {
		end := accounts + (round+1)*batch
		stop := make(chan struct{})
		done := make(chan int, 1)
		go func(from, to int) {
			i := from
			for ; i < to; i++ {
				if gql.put(writes[i]) != nil {
					done <- i // the process is gone; the write is retried with its key
					return
				}
				if i%2 == 1 && a.sweep() != nil {
					done <- i + 1
					return
				}
			}
			for {
				select {
				case <-stop:
					done <- i
					return
				default:
				}
				if a.sweep() != nil {
					done <- i
					return
				}
				time.Sleep(10 * time.Millisecond) // polling for the next interrupt
			}
		}(next, end)
		// The random moment of the kill: during a write, an answer or a turn.
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		p.kill()
		close(stop)
		next = <-done
		require.NoError(t, a.failure, "an answer failed for a reason other than the kill")
		t.Logf("round %d: killed after %d of %d writes, %d answers (in flight: %v)", round, next, len(writes), len(a.answered), a.inflight != nil)
		p.start()
		require.NoError(t, a.retryInflight(), "retrying the answer cut off by the kill")
	}
	for ; next < len(writes); next++ {
		require.NoError(t, gql.put(writes[next]))
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	drainStart := time.Now()
	deadline := drainStart.Add(90 * time.Second)
	for !crashAgentDrained(t, conn) {
		if time.Now().After(deadline) {
			crashAgentDump(t, conn)
			t.Fatalf("not drained after 90s")
		}
		require.NoError(t, a.sweep())
		require.NoError(t, a.failure)
		time.Sleep(20 * time.Millisecond) // polling for an asynchronous outcome
	}
	p.kill() // nothing may change while we look
	t.Logf("drained in %s", time.Since(drainStart).Round(time.Millisecond))

	entries := len(writes) - accounts
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'entry.inserted'`),
		"every write committed once (idempotency keys)")
	require.Equal(t, accounts, crashCount(t, conn, `SELECT count(*) FROM sessions WHERE action_id = $1`, agentID))
	// S6: every entry is an input of exactly one session, once.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events e WHERE e.type = 'entry.inserted'
		AND (SELECT count(*) FROM session_inputs i WHERE i.event_id = e.id) <> 1`),
		"an entry not delivered, or delivered twice")
	// T1, T6: every input taken by exactly one turn: CONSUMED by a
	// completed turn, or (H2, H3) RECEIVED by a held turn that exactly one
	// completed retry turn ran again (the inputs stay with the held turn).
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_inputs i
		WHERE i.turn IS NULL
		   OR (SELECT count(*) FROM turn_inputs ti WHERE ti.sid = i.sid AND ti.seq = i.seq) <> 1
		   OR NOT EXISTS (SELECT 1 FROM turn_inputs ti WHERE ti.sid = i.sid AND ti.seq = i.seq AND ti.turn = i.turn)
		   OR NOT CASE i.status
		     WHEN 'CONSUMED' THEN EXISTS (SELECT 1 FROM session_turns t WHERE t.sid = i.sid AND t.number = i.turn AND t.status = 'COMPLETED')
		     WHEN 'RECEIVED' THEN EXISTS (SELECT 1 FROM session_turns t WHERE t.sid = i.sid AND t.number = i.turn AND t.status = 'HELD')
		       AND (SELECT count(*) FROM session_turns r WHERE r.sid = i.sid AND r.retry_of = i.turn) = 1
		       AND (SELECT count(*) FROM session_turns r WHERE r.sid = i.sid AND r.retry_of = i.turn AND r.status = 'COMPLETED') = 1
		     ELSE false END`),
		"an input not taken exactly once by a completed turn (or by a held turn retried once)")
	require.Equal(t, suspicious, crashCount(t, conn, `SELECT count(*) FROM session_inputs WHERE status = 'RECEIVED'`),
		"H2: the suspicious entries stay with their held turns")
	// T1: turns numbered 1..N per session, no gaps (the key forbids duplicates).
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM sessions s
		WHERE s.turn_count <> (SELECT count(*) FROM session_turns t WHERE t.sid = s.sid)
		   OR s.turn_count <> coalesce((SELECT max(number) FROM session_turns t WHERE t.sid = s.sid), 0)
		   OR (s.turn_count > 0 AND (SELECT min(number) FROM session_turns t WHERE t.sid = s.sid) <> 1)`),
		"turn numbers are not 1..N")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_turns WHERE status NOT IN ('COMPLETED', 'HELD')`),
		"a turn left RUNNING or failed")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM sessions WHERE status <> 'OPEN'`))
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM intake_records`))

	// P1: every entry led to exactly one gated call; H1, H2: every
	// suspicious entry to exactly one hold.
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM session_interrupts WHERE kind = 'APPROVAL'`))
	require.Equal(t, suspicious, crashCount(t, conn, `SELECT count(*) FROM session_interrupts WHERE kind = 'HOLD'`))
	interrupts := entries + suspicious
	require.Len(t, a.answered, interrupts, "the test answered every interrupt")
	// P5, H5: each interrupt ANSWERED once: one responded event, one COMMAND
	// input, consumed by exactly one completed turn that took only it.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_interrupts n
		WHERE n.status <> 'ANSWERED' OR n.command_seq IS NULL
		   OR n.decision <> CASE n.kind WHEN 'APPROVAL' THEN 'APPROVE' ELSE 'RETRY' END
		   OR (SELECT count(*) FROM events e WHERE e.type = 'action_session.responded' AND e.data->>'interrupt_id' = n.id::text) <> 1
		   OR (SELECT count(*) FROM session_inputs i WHERE i.sid = n.sid AND i.kind = 'COMMAND' AND i.identity = 'command/' || n.id) <> 1
		   OR (SELECT count(*) FROM turn_inputs ti JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn
		        WHERE ti.sid = n.sid AND ti.seq = n.command_seq AND t.status = 'COMPLETED') <> 1
		   OR NOT EXISTS (SELECT 1 FROM session_inputs i JOIN session_turns t ON t.sid = i.sid AND t.number = i.turn
		        WHERE i.sid = n.sid AND i.seq = n.command_seq AND i.kind = 'COMMAND' AND i.status = 'CONSUMED'
		          AND t.status = 'COMPLETED' AND (SELECT count(*) FROM turn_inputs x WHERE x.sid = t.sid AND x.turn = t.number) = 1)`),
		"an interrupt not answered exactly once, or its answer not taken by exactly one completed turn of its own")
	require.Equal(t, interrupts, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'action_session.responded'`))
	require.Equal(t, interrupts, crashCount(t, conn, `SELECT count(*) FROM session_inputs WHERE kind = 'COMMAND'`))
	// P5, T6: every approved call ran and committed exactly once, with the
	// replacement input (and the fixed input over it): one ledger write of
	// the record named by its interrupt, one SUCCEEDED child execution of a
	// completed turn.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_interrupts n WHERE n.kind = 'APPROVAL' AND (
		   (SELECT count(*) FROM events e WHERE e.record_namespace = 'frozen' AND e.record_key = n.id::text) <> 1
		OR (SELECT count(*) FROM kv_values v WHERE v.namespace = 'frozen' AND v.key = n.id::text AND v.version = 1
		     AND v.value->>'requested_by' = 'crash-agent') <> 1
		OR (SELECT count(*) FROM executions c JOIN executions pe ON pe.id = c.parent_id
		     JOIN session_turns t ON t.execution_id = pe.id
		     WHERE c.action_id = $1 AND c.status = 'SUCCEEDED' AND c.input->>'key' = n.id::text AND t.status = 'COMPLETED') <> 1)`, toolID),
		"an approved call committed twice, or lost")
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM events WHERE record_namespace = 'frozen'`),
		"a tool write that no approval accounts for")
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1 AND status = 'SUCCEEDED'`, toolID))
	t.Logf("%d entries (%d suspicious), %d answers retried after a kill (%d ALREADY_ANSWERED), %d turns; "+
		"%d executions replayed after a kill (attempts > 1); tool executions not SUCCEEDED: %d",
		entries, suspicious, a.retried, a.already, crashCount(t, conn, `SELECT count(*) FROM session_turns`),
		crashCount(t, conn, `SELECT count(*) FROM executions WHERE attempts > 1`),
		crashCount(t, conn, `SELECT count(*) FROM executions WHERE action_id = $1 AND status <> 'SUCCEEDED'`, toolID))
}

// crashFreezeTool is a Starlark tool that writes the record its input's
// key names, once per call.
func crashFreezeTool() map[string]any {
	return map[string]any{
		"name": "crash-freeze", "kind": "starlark",
		"source": `
def call(event):
    i = event["input"]
    ledger.put("frozen", i["key"], {"requested_by": i.get("requested_by", "")})
    return {"frozen": i["key"]}
`,
		"tool": map[string]any{"name": "freeze_account", "description": "Freeze an account.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"key"},
				"properties": map[string]any{"key": map[string]any{"type": "string"}, "requested_by": map[string]any{"type": "string"}}}},
	}
}

// crashAgentMonitor is an agent action with a session per account (id: the
// account id) whose turns take one entry each. Its scripted model calls the
// gated tool at step 0 (after refusing a suspicious entry, unless a note
// says it was reviewed) and reports OPEN at step 1, once the call ran.
func crashAgentMonitor(toolID uuid.UUID) map[string]any {
	freeze := map[string]any{"name": "freeze_account", "input": map[string]any{"key": "chosen-by-the-model"}}
	return map[string]any{
		"name": "crash-agent-monitor",
		"kind": "agent",
		"config": map[string]any{
			"provider": "scripted",
			"system":   "You watch accounts for fraud.",
			"tools": []any{map[string]any{"action": toolID.String(), "approval": "REQUIRED",
				"input": map[string]any{"requested_by": "crash-agent"}}},
			"script": []any{
				map[string]any{"step": 0, "when": "The transfer was reviewed", "toolCalls": []any{freeze}},
				map[string]any{"step": 0, "when": "suspicious-transfer", "refusal": map[string]any{"category": "fraud", "explanation": "I cannot judge this transfer"}},
				map[string]any{"step": 0, "toolCalls": []any{freeze}},
				map[string]any{"step": 1, "toolCalls": []any{map[string]any{"name": "report_outcome",
					"input": map[string]any{"status": "OPEN", "state": map[string]any{"frozen": true}}}}},
			},
		},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session": map[string]any{
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"account_id": map[string]any{"type": "string"}},
				"required": []any{"account_id"}, "additionalProperties": false},
			"id":    "string(session.input.account_id)",
			"turns": map[string]any{"on": []any{"entry"}, "maxInputs": 1},
		},
	}
}

// crashAnswerer answers what the agent's sessions wait on: approvals with
// APPROVE and the replacement input {"key": <interruptId>}, holds with
// RETRY and a note that makes the model go on. It is used by one goroutine
// at a time.
type crashAnswerer struct {
	gql      crashClient
	actionID uuid.UUID
	sessions []string
	// answered holds the interrupts answered (ALREADY_ANSWERED on a retry
	// counts); inflight is an answer cut off by a kill, to retry.
	answered map[string]bool
	inflight *crashAnswer
	// retried counts answers repeated after a kill, already counts those
	// of them that found ALREADY_ANSWERED.
	retried, already int
	// failure is an answer refused for a reason other than ALREADY_ANSWERED
	// on a retry.
	failure error
}

type crashAnswer struct {
	session, interrupt string
	hold               bool
}

const crashPendingOp = `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
  approvals(status: PENDING) { interruptId } holds(status: PENDING) { interruptId } } } } }`

const crashRespondOp = `mutation($a: UUID!, $s: String!, $i: String!, $r: SessionResponseInput!) { actions {
  respondToSession(actionId: $a, id: $s, interruptId: $i, response: $r) { identity kind status } } }`

// sweep answers every pending interrupt of every session once. It returns
// a transport error (the process is gone); refusals are kept in failure.
func (a *crashAnswerer) sweep() error {
	for _, s := range a.sessions {
		var out struct {
			Actions struct {
				Action struct {
					Session *struct {
						Approvals, Holds []struct{ InterruptID string }
					}
				}
			}
		}
		if err := a.gql.query(crashPendingOp, map[string]any{"a": a.actionID, "s": s}, &out); err != nil {
			var ge crashGQLError
			if errors.As(err, &ge) {
				a.fail(err)
				continue
			}
			return err
		}
		sess := out.Actions.Action.Session
		if sess == nil {
			continue // not started yet
		}
		var todo []crashAnswer
		for _, h := range sess.Holds {
			todo = append(todo, crashAnswer{session: s, interrupt: h.InterruptID, hold: true})
		}
		for _, ap := range sess.Approvals {
			todo = append(todo, crashAnswer{session: s, interrupt: ap.InterruptID})
		}
		for _, ans := range todo {
			if err := a.respond(ans, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// retryInflight repeats the answer a kill cut off, if any.
func (a *crashAnswerer) retryInflight() error {
	if a.inflight == nil {
		return nil
	}
	return a.respond(*a.inflight, true)
}

func (a *crashAnswerer) respond(ans crashAnswer, retry bool) error {
	r := map[string]any{"approval": map[string]any{"decision": "APPROVE", "reason": "ok", "input": map[string]any{"key": ans.interrupt}}}
	if ans.hold {
		r = map[string]any{"hold": map[string]any{"decision": "RETRY", "note": "The transfer was reviewed; continue monitoring."}}
	}
	a.inflight = &ans
	err := a.gql.query(crashRespondOp, map[string]any{"a": a.actionID, "s": ans.session, "i": ans.interrupt, "r": r}, nil)
	var ge crashGQLError
	switch {
	case err == nil:
		a.answered[ans.interrupt] = true
		if retry {
			a.retried++
		}
	case retry && errors.As(err, &ge) && strings.Contains(err.Error(), "ALREADY_ANSWERED"):
		a.answered[ans.interrupt] = true
		a.retried++
		a.already++
	case errors.As(err, &ge):
		a.fail(fmt.Errorf("answering %+v: %w", ans, err))
	default:
		return err // transport: the process is gone; inflight stays set
	}
	a.inflight = nil
	return nil
}

func (a *crashAnswerer) fail(err error) {
	if a.failure == nil {
		a.failure = err
	}
}

// crashGQLError is a GraphQL error in a response (as opposed to a
// transport failure).
type crashGQLError struct{ msg string }

func (e crashGQLError) Error() string { return e.msg }

// query posts a GraphQL operation and decodes its data into out (when not
// nil); a GraphQL error comes back as crashGQLError.
func (c crashClient) query(q string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	if err != nil {
		return err
	}
	resp, err := c.http.Post(c.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage   `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if len(res.Errors) > 0 {
		return crashGQLError{msg: string(res.Errors[0])}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.Data, out)
}

// crashAgentDrained reports whether every event is dispatched, no turn
// runs, no input is PENDING, nothing is pending an answer and every session is
// OPEN.
func crashAgentDrained(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	return crashCount(t, conn, `SELECT ((SELECT position FROM ledger_head) - (SELECT position FROM dispatch_state))
		+ (SELECT count(*) FROM session_inputs WHERE status = 'PENDING')
		+ (SELECT count(*) FROM session_turns WHERE status = 'RUNNING')
		+ (SELECT count(*) FROM session_interrupts WHERE status = 'PENDING')
		+ (SELECT count(*) FROM sessions WHERE status <> 'OPEN')`) == 0
}

// crashAgentDump logs what keeps the agent's sessions from draining.
func crashAgentDump(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, q := range []string{
		`SELECT 'undispatched', (SELECT position FROM ledger_head) - (SELECT position FROM dispatch_state)`,
		`SELECT 'session ' || id || ' ' || status || ' ' || coalesce(reason, '') || ' next_turn_at=' || coalesce(next_turn_at::text, '-') || ' lease=' || coalesce(lease_expires_at::text, '-'), turn_count FROM sessions`,
		`SELECT 'input ' || kind || ' ' || status, count(*) FROM session_inputs GROUP BY 1`,
		`SELECT 'turn ' || status, count(*) FROM session_turns GROUP BY 1`,
		`SELECT 'interrupt ' || kind || ' ' || status, count(*) FROM session_interrupts GROUP BY 1`,
		`SELECT 'execution ' || status, count(*) FROM executions GROUP BY 1`,
	} {
		rows, err := conn.Query(t.Context(), q)
		require.NoError(t, err)
		for rows.Next() {
			var k string
			var n int64
			require.NoError(t, rows.Scan(&k, &n))
			t.Logf("%s: %d", k, n)
		}
		require.NoError(t, rows.Err())
	}
}

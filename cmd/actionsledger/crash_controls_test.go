package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Session controls across real processes (issue 16, G1, G9): the built
// binary serves a fresh database and is killed with SIGKILL.
//
// First an interrupt: an http action's receiver holds the first turn's
// request; the interrupt is sent over GraphQL and the process killed at
// once. Whether the turn settled before the kill or runs again after the
// restart (its lease expired), it ends CANCELLED exactly once, its input
// pending, the session WAITING; the same interrupt sent again returns the
// first input.
//
// Then messages under random kills: each is sent with its own idempotency
// key and sent again after a kill cut it off; once everything drained,
// every message is one COMMAND input and one action_session.commanded
// event, and a turn took each once.
//
// CRASH_SEED=<seed> replays the kill moments.
func TestCrashControlsUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	rng := crashRNG(t)
	var held atomic.Bool
	arrived := make(chan struct{}, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if held.CompareAndSwap(false, true) {
			arrived <- struct{}{}
			<-r.Context().Done() // held until the turn is interrupted or the process is gone
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status": "OPEN"}`)
	}))
	defer recv.Close()
	t.Setenv("HTTP_ALLOW", "127.0.0.1/32")
	p, gql := startCrashService(t)

	actionID := uuid.New()
	require.NoError(t, gql.do(`mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`,
		map[string]any{"id": actionID, "input": map[string]any{
			"name": "held-hook", "kind": "http",
			"config": map[string]any{"url": recv.URL + "/hook", "secret": "0123456789abcdef0123", "timeout_ms": 60000},
			"triggers": []any{
				map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
					"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
				map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
					"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}},
			},
			"session": map[string]any{"id": "string(session.input.id)"},
		}}))
	require.NoError(t, gql.put(crashWrite{ns: "account", key: "a1", value: map[string]any{"id": "a1"}}))
	require.NoError(t, gql.put(crashWrite{ns: "entry", key: "e1", value: map[string]any{"id": "a1"}}))
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the first turn's request did not arrive")
	}
	const interrupt = `mutation($a: UUID!) { actions { sendToSession(actionId: $a, id: "a1", command: INTERRUPT, idempotencyKey: "stop-1") { sequence } } }`
	require.NoError(t, gql.do(interrupt, map[string]any{"a": actionID}))
	p.kill()
	p.start()

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	var status, turnStatus string
	for time.Now().Before(deadline) {
		err := conn.QueryRow(ctx, `SELECT s.status, coalesce((SELECT t.status FROM session_turns t WHERE t.sid = s.sid AND t.number = 1), '')
			FROM sessions s WHERE s.action_id = $1 AND s.id = 'a1'`, actionID).Scan(&status, &turnStatus)
		require.NoError(t, err)
		if turnStatus == "CANCELLED" {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
	}
	require.Equal(t, "CANCELLED", turnStatus, "the interrupted turn ends cancelled")
	require.Equal(t, "WAITING", status)
	require.Equal(t, 1, crashCount(t, conn, `SELECT count(*) FROM session_turns t JOIN sessions s ON s.sid = t.sid WHERE s.action_id = $1`, actionID))
	require.Equal(t, 1, crashCount(t, conn, `SELECT count(*) FROM session_inputs i JOIN sessions s ON s.sid = i.sid
		WHERE s.action_id = $1 AND i.kind = 'EVENT' AND i.status = 'PENDING'`, actionID), "the entry waits for the next turn")
	require.NoError(t, gql.do(interrupt, map[string]any{"a": actionID}), "the same interrupt again returns the first")
	require.Equal(t, 1, crashCount(t, conn, `SELECT count(*) FROM session_inputs WHERE command = 'INTERRUPT'`))

	// Messages under random kills; the first wakes the session.
	const send = `mutation($a: UUID!, $m: String!, $k: String!) { actions { sendToSession(actionId: $a, id: "a1", message: $m, idempotencyKey: $k) { sequence } } }`
	const messages, rounds = 30, 5
	next := 0
	for round := range rounds {
		sent := make(chan int, 1)
		go func(from int) {
			i := from
			for ; i < messages; i++ {
				if gql.do(send, map[string]any{"a": actionID, "m": fmt.Sprint("message ", i), "k": fmt.Sprint("m", i)}) != nil {
					break // the process is gone: sent again with its key
				}
			}
			sent <- i
		}(next)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the random moment of the kill
		p.kill()
		next = <-sent
		t.Logf("round %d: killed after %d of %d messages", round, next, messages)
		p.start()
	}
	for ; next < messages; next++ {
		require.NoError(t, gql.do(send, map[string]any{"a": actionID, "m": fmt.Sprint("message ", next), "k": fmt.Sprint("m", next)}))
	}
	deadline = time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && crashCount(t, conn, `SELECT count(*) FROM session_inputs WHERE command = 'MESSAGE' AND status <> 'CONSUMED'`) > 0 {
		time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
	}
	p.kill() // nothing may change while we look
	require.Equal(t, messages, crashCount(t, conn, `SELECT count(*) FROM session_inputs WHERE command = 'MESSAGE'`), "each message once")
	require.Equal(t, messages, crashCount(t, conn, `SELECT count(DISTINCT idempotency_key) FROM session_inputs WHERE command = 'MESSAGE' AND status = 'CONSUMED'`))
	require.Equal(t, messages+1, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'action_session.commanded'`), "one event per command")
	require.Equal(t, messages, crashCount(t, conn, `SELECT count(*) FROM turn_inputs ti JOIN session_inputs i ON i.sid = ti.sid AND i.seq = ti.seq
		JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn WHERE i.command = 'MESSAGE' AND t.status = 'COMPLETED'`), "a committed turn took each once")
}

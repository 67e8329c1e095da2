package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/server"
)

const sessionUpdatesSub = `subscription($a: UUID!, $s: String!) { sessionUpdates(actionId: $a, id: $s) {
  kind pendingInputs turnNumber attempt
  session { id status reason state running }
  turn { number status checkpoint { status } }
  transcriptEntry { sequence kind data }
} }`

type sessionUpdate struct {
	Kind          string
	PendingInputs int
	TurnNumber    *int
	Attempt       *int
	Session       struct {
		ID, Status string
		Reason     *string
		State      json.RawMessage
		Running    bool
	}
	Turn *struct {
		Number     int
		Status     string
		Checkpoint *struct{ Status string }
	}
	TranscriptEntry *struct {
		Sequence int
		Kind     string
		Data     json.RawMessage
	}
}

func nextSessionUpdate(t testing.TB, s stream) sessionUpdate {
	t.Helper()
	var out struct{ SessionUpdates sessionUpdate }
	s.next(t).data(t, &out)
	return out.SessionUpdates
}

// waitSession polls until the dispatcher has created the session.
func (e *env) waitSession(t testing.TB, actionID, id string) {
	t.Helper()
	poll(t, "session "+id, func() bool {
		return e.countRows(t, `SELECT count(*) FROM sessions WHERE action_id = $1 AND id = $2`, actionID, id) == 1
	})
}

// untilTurnSettles reads updates until turn n is no longer RUNNING and
// returns them all.
func untilTurnSettles(t testing.TB, s stream, n int) []sessionUpdate {
	t.Helper()
	var ups []sessionUpdate
	for {
		u := nextSessionUpdate(t, s)
		ups = append(ups, u)
		if u.Kind == "SESSION" && u.Turn != nil && u.Turn.Number == n && u.Turn.Status != "RUNNING" {
			return ups
		}
	}
}

func transcriptKinds(ups []sessionUpdate, turn int) []string {
	var kinds []string
	for _, u := range ups {
		if u.Kind == "TRANSCRIPT" && u.TurnNumber != nil && *u.TurnNumber == turn {
			kinds = append(kinds, u.TranscriptEntry.Kind)
		}
	}
	return kinds
}

// Issue 12 item 2: sessionUpdates over both transports, through real echo
// turns: the session when subscribing, the live transcript entries of each
// turn, the turn's outcome and the pending count, then the close, after
// which the subscription completes.
func TestLiveSessionUpdatesEchoTurns(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	a := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": monitorDef()}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.waitSession(t, a, acct)
	vars := map[string]any{"a": a, "s": acct}

	ws, _, err := dialWS(t, e.srv.URL, nil, nil)
	require.NoError(t, err)
	ws.acked(t)
	subs := map[string]stream{
		"sse":                  sse(t, e.srv.URL, "", sessionUpdatesSub, vars),
		"graphql-transport-ws": ws.subscribe(t, "s", sessionUpdatesSub, vars),
	}
	for name, s := range subs {
		u := nextSessionUpdate(t, s)
		require.Equal(t, "SESSION", u.Kind, name)
		require.Equal(t, "OPEN", u.Session.Status, name)
		require.Nil(t, u.Turn, name)
		require.Equal(t, 0, u.PendingInputs, name)
	}

	for turn := 1; turn <= 2; turn++ {
		e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": acct, "amount": turn}, "")
		for name, s := range subs {
			ups := untilTurnSettles(t, s, turn)
			last := ups[len(ups)-1]
			require.EqualValues(t, "COMPLETED", last.Turn.Status, name)
			require.Equal(t, 0, last.PendingInputs, name)
			jsonEq(t, `{"count":`+strconv.Itoa(turn)+`,"last_turn":`+strconv.Itoa(turn)+`}`, last.Session.State)
			// The entries stream as the turn writes them, before its
			// commit is read; a SESSION update read after the commit may
			// come before them, so look at the whole run.
			rest := collectTranscript(t, s, ups, turn, 2)
			require.Equal(t, []string{"input", "reply"}, rest, name)
		}
	}

	e.ok(t, closeOp, vars, nil)
	for name, s := range subs {
		var u sessionUpdate
		for u.Session.Status != "CANCELLED" {
			u = nextSessionUpdate(t, s)
		}
		require.Equal(t, "complete", s.next(t).Type, "%s: a closed session's subscription completes", name)
	}
}

// collectTranscript returns the kinds of turn's entries among ups, reading
// more updates until there are want.
func collectTranscript(t testing.TB, s stream, ups []sessionUpdate, turn, want int) []string {
	t.Helper()
	kinds := transcriptKinds(ups, turn)
	for len(kinds) < want {
		u := nextSessionUpdate(t, s)
		kinds = append(kinds, transcriptKinds([]sessionUpdate{u}, turn)...)
	}
	return kinds
}

// Issue 12 items 1 and 2: the transcript entries of a running agent turn
// reach a subscriber while the turn runs (here it waits on its model's
// reply), and the held turn of a refusal streams its entries and then shows
// as HELD with the session WAITING.
func TestLiveSessionUpdatesRunningAgentTurn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	calls := make(chan struct{}, 8)
	api := newWireAPI(t, func(body map[string]any) (int, string) {
		calls <- struct{}{}
		<-release
		return http.StatusOK, chatCompletion("", "tool_calls",
			[3]string{"call_out", "report_outcome", `{"status":"OPEN","reason":"","state":{"seen":true}}`})
	}, nil)
	e := newLiveEnv(t, server.Config{Providers: map[string]provider.Provider{
		"openai": provider.NewOpenAI(provider.OpenAIConfig{BaseURL: api.url + "/v1", APIKey: "test"})}})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	a := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": a, "input": wireAgent("live-agent", map[string]any{
		"provider": "openai", "model": "gpt-test", "system": "You watch accounts."})}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.waitSession(t, a, "3f0c9f8e-account")
	s := sse(t, e.srv.URL, "", sessionUpdatesSub, map[string]any{"a": a, "s": "3f0c9f8e-account"})
	require.Equal(t, "OPEN", nextSessionUpdate(t, s).Session.Status)

	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 5}, "")
	<-calls // the turn runs and waits on the model
	var running, entry bool
	for !running || !entry {
		u := nextSessionUpdate(t, s)
		switch u.Kind {
		case "SESSION":
			if u.Turn == nil {
				require.Equal(t, 1, u.PendingInputs, "the entry was delivered; no turn yet")
				continue
			}
			require.EqualValues(t, "RUNNING", u.Turn.Status, "the model has not answered: the turn still runs")
			require.True(t, u.Session.Running)
			running = true
		case "TRANSCRIPT":
			require.Equal(t, 1, *u.TurnNumber)
			require.Equal(t, 1, *u.Attempt)
			require.Equal(t, 1, u.TranscriptEntry.Sequence)
			require.Equal(t, "input", u.TranscriptEntry.Kind)
			entry = true
		}
	}
	close(release)
	ups := untilTurnSettles(t, s, 1)
	require.Equal(t, "COMPLETED", ups[len(ups)-1].Turn.Status)
	require.Equal(t, []string{"model_message", "outcome"}, collectTranscript(t, s, ups, 1, 2))
}

// Issue 12 item 2: a held turn (the scripted model refuses) streams its
// entries, then shows as HELD with the session WAITING.
func TestLiveSessionUpdatesHeldTurn(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	toolID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": toolID, "input": freezeTool()}, nil)
	a := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": a, "input": agentMonitor(toolID)}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.waitSession(t, a, "3f0c9f8e-account")
	s := sse(t, e.srv.URL, "", sessionUpdatesSub, map[string]any{"a": a, "s": "3f0c9f8e-account"})
	require.Equal(t, "OPEN", nextSessionUpdate(t, s).Session.Status)

	e.put(t, "entry", "e2", map[string]any{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}, "")
	ups := untilTurnSettles(t, s, 1)
	last := ups[len(ups)-1]
	require.EqualValues(t, "HELD", last.Turn.Status)
	require.Equal(t, "WAITING", last.Session.Status)
	require.Contains(t, *last.Session.Reason, "turn 1 is held (agent_refused)")
	require.Equal(t, []string{"input", "model_message", "refusal"}, collectTranscript(t, s, ups, 1, 3))
}

// freezeTool is the Starlark tool of the approval walkthrough.
func freezeTool() map[string]any {
	return map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account", "description": "Freeze an account.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"},
				"properties": map[string]any{"account_id": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"},
					"requested_by": map[string]any{"type": "string"}}}}}
}

// A sessionUpdates subscription to an action that does not exist is
// refused naming actionId; to a session the action does not have, naming
// id (both NOT_FOUND).
func TestLiveSessionUpdatesNotFound(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	s := sse(t, e.srv.URL, "", sessionUpdatesSub, map[string]any{"a": uuid.NewString(), "s": "x"})
	r := s.next(t).result(t)
	requireError(t, r, "NOT_FOUND", "actionId")
	s.close()

	a := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": monitorDef()}, nil)
	s = sse(t, e.srv.URL, "", sessionUpdatesSub, map[string]any{"a": a, "s": "nobody"})
	r = s.next(t).result(t)
	requireError(t, r, "NOT_FOUND", "id")
	s.close()
}

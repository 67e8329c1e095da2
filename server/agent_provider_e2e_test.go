package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/server"
)

// These tests run the "agent" handler kind through the whole service
// against local HTTP servers that speak the real provider wire formats
// (OpenAI chat completions, Anthropic messages): GraphQL in, the provider
// SDKs over HTTP, tool actions, the ledger and the turn executor, stepped
// so every turn is deterministic.

// wireCall is one request a wireAPI received.
type wireCall struct {
	path   string
	header http.Header
	body   map[string]any
}

// wireAPI is a local model API. Each request goes to the answer function
// of its path (/v1/chat/completions or /v1/messages), which picks a canned
// reply from the request body; every request is recorded.
type wireAPI struct {
	t         *testing.T
	url       string
	openai    func(body map[string]any) (int, string)
	anthropic func(body map[string]any) (int, string)

	mu    sync.Mutex
	calls []wireCall
}

func newWireAPI(t *testing.T, openai, anthropic func(body map[string]any) (int, string)) *wireAPI {
	t.Helper()
	a := &wireAPI{t: t, openai: openai, anthropic: anthropic}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *wireAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		a.t.Errorf("model API: read body: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		a.t.Errorf("model API: the request body is not a JSON object: %v: %s", err, raw)
	}
	a.mu.Lock()
	a.calls = append(a.calls, wireCall{path: r.URL.Path, header: r.Header.Clone(), body: body})
	a.mu.Unlock()
	answer := map[string]func(map[string]any) (int, string){
		"/v1/chat/completions": a.openai, "/v1/messages": a.anthropic}[r.URL.Path]
	if r.Method != http.MethodPost || answer == nil {
		a.t.Errorf("model API: unexpected %s %s", r.Method, r.URL.Path)
		http.Error(w, `{"error":{"message":"not here","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	status, reply := answer(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply)
}

// requests returns the requests received so far.
func (a *wireAPI) requests() []wireCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]wireCall(nil), a.calls...)
}

// newWireEnv is a stepped service whose "openai" and "anthropic"
// providers talk to api.
func newWireEnv(t *testing.T, api *wireAPI) *env {
	t.Helper()
	return newSteppedEnv(t, server.Config{Providers: map[string]provider.Provider{
		"openai":    provider.NewOpenAI(provider.OpenAIConfig{BaseURL: api.url + "/v1", APIKey: "test"}),
		"anthropic": provider.NewAnthropic(provider.AnthropicConfig{BaseURL: api.url, APIKey: "test-ant"}),
	}})
}

// Replies as the APIs send them.

// chatCompletion is an OpenAI chat.completion body with one choice.
func chatCompletion(text string, finish string, calls ...[3]string) string {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if text != "" {
		msg["content"] = text
	}
	if len(calls) > 0 {
		tcs := make([]any, len(calls))
		for i, c := range calls { // id, name, arguments
			tcs[i] = map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}}
		}
		msg["tool_calls"] = tcs
	}
	return mustJSON(map[string]any{
		"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": 412, "completion_tokens": 37, "total_tokens": 449,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0}},
		"service_tier": "default", "system_fingerprint": nil,
	})
}

// anthropicMessage is an Anthropic Messages API reply body.
func anthropicMessage(content []any, stop string, details any) string {
	return mustJSON(map[string]any{
		"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-test",
		"content": content, "stop_reason": stop, "stop_sequence": nil, "stop_details": details,
		"usage": map[string]any{"input_tokens": 512, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
			"output_tokens": 24, "service_tier": "standard"},
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Reading request bodies.

func wireMessages(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, ok := body["messages"].([]any)
	require.True(t, ok, "messages: %v", body["messages"])
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i], ok = m.(map[string]any)
		require.True(t, ok, "message %d: %v", i, m)
	}
	return out
}

// lastMessage is the last message of a body, as the answer functions see
// it (no *testing.T: they run on the server's goroutine).
func lastMessage(body map[string]any) map[string]any {
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return nil
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	return m
}

// openAIToolNames lists the function names of an OpenAI request's tools.
func openAIToolNames(t *testing.T, body map[string]any) []string {
	t.Helper()
	var names []string
	for _, tl := range body["tools"].([]any) {
		names = append(names, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return names
}

// anthropicText joins the text blocks of an Anthropic message.
func anthropicText(m map[string]any) string {
	var b strings.Builder
	blocks, _ := m["content"].([]any)
	for _, bl := range blocks {
		if bm, _ := bl.(map[string]any); bm["type"] == "text" {
			s, _ := bm["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// wireToolCall checks an OpenAI assistant tool call. Arguments compare as
// JSON: a resumed conversation comes back from jsonb, which reorders keys
// and respaces them.
func wireToolCall(t *testing.T, call any, id, name, args string) {
	t.Helper()
	c := call.(map[string]any)
	require.Equal(t, id, c["id"])
	require.Equal(t, "function", c["type"])
	fn := c["function"].(map[string]any)
	require.Equal(t, name, fn["name"])
	require.JSONEq(t, args, fn["arguments"].(string))
}

// Tools and the agent.

// lookupSource is a Starlark tool that records a risk review in the ledger.
const lookupSource = `
def call(event):
    i = event["input"]
    ledger.put("reviews", i["account_id"], {"risk": "high"})
    return {"account_id": i["account_id"], "risk": "high"}
`

// wireTools creates the non-gated lookup_account and the freeze_account
// tool actions and returns their ids.
func wireTools(t *testing.T, e *env) (lookupID, freezeID string) {
	t.Helper()
	lookupID, freezeID = uuid.NewString(), uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": lookupID, "input": map[string]any{
		"name": "lookup-account", "kind": "starlark", "source": lookupSource,
		"tool": map[string]any{"name": "lookup_account", "description": "Look up an account's risk.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"},
				"properties": map[string]any{"account_id": map[string]any{"type": "string"}}}}}}, nil)
	e.ok(t, createOp, map[string]any{"id": freezeID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account", "description": "Freeze an account.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"},
				"properties": map[string]any{"account_id": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"},
					"requested_by": map[string]any{"type": "string"}}}}}}, nil)
	return lookupID, freezeID
}

// wireAgent is agentMonitor's triggers and session (id
// "3f0c9f8e-account", so the seed's operations run verbatim) with a real
// provider's config.
func wireAgent(name string, config map[string]any) map[string]any {
	def := agentMonitor(uuid.NewString())
	def["name"] = name
	def["config"] = config
	return def
}

// wireTurn is one turn as the tests read it.
type wireTurn struct {
	Number     int
	Status     string
	Inputs     []struct{ Kind, Identity, Status string }
	Checkpoint *struct{ Status string }
	Execution  struct {
		ID         string
		Status     string
		Attempts   int
		Error      *string
		Invocation struct {
			Approvals []struct {
				InterruptID, Tool, Status string
				Input                     json.RawMessage
				Response                  *struct{ Decision, Reason, Responder string }
			}
			Hold *struct {
				InterruptID, Cause, Status string
				Category, Explanation      *string
				Turn                       int
				Response                   *struct{ Decision, Note, Responder string }
			}
			Transcript struct {
				Nodes []struct {
					Kind string
					Data json.RawMessage
				}
			}
		}
		Children struct {
			Nodes []struct {
				Action     struct{ Definition struct{ Name string } }
				Status     string
				Input      json.RawMessage
				Invocation struct{ Output json.RawMessage }
			}
		}
	}
}

type wireSession struct {
	Status string
	Reason *string
	State  json.RawMessage
	Turns  struct{ Nodes []wireTurn }
}

const wireSessionOp = `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") {
  status reason state
  turns(first: 10) { nodes { number status inputs { kind identity status } checkpoint { status }
    execution { id status attempts error invocation {
      approvals { interruptId tool input status response { decision reason responder } }
      hold { interruptId cause category explanation turn status response { decision note responder } }
      transcript(first: 100) { nodes { kind data } } }
      children(first: 10) { nodes { action { definition { name } } status input invocation { output } } } } } } } } } }`

func (e *env) wireSession(t *testing.T, actionID string) *wireSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *wireSession }
		}
	}
	e.ok(t, wireSessionOp, map[string]any{"a": actionID}, &out)
	require.NotNil(t, out.Actions.Action.Session)
	return out.Actions.Action.Session
}

func (s *wireSession) turn(t *testing.T, n int) wireTurn {
	t.Helper()
	for _, tu := range s.Turns.Nodes {
		if tu.Number == n {
			return tu
		}
	}
	require.FailNow(t, "no such turn", "turn %d", n)
	return wireTurn{}
}

func (tu wireTurn) kinds() []string {
	var out []string
	for _, n := range tu.Execution.Invocation.Transcript.Nodes {
		out = append(out, n.Kind)
	}
	return out
}

// openAIMonitor answers like a model watching accounts: it looks the
// account up, then freezes it (a gated call), and reports the outcome once
// it has the freeze's result, approved or denied.
func openAIMonitor(body map[string]any) (int, string) {
	last := lastMessage(body)
	switch {
	case last["role"] == "tool" && last["tool_call_id"] == "call_freeze":
		content, _ := last["content"].(string)
		frozen := !strings.HasPrefix(content, "error: ")
		return http.StatusOK, chatCompletion("", "tool_calls", [3]string{"call_outcome", "report_outcome",
			mustJSON(map[string]any{"status": "OPEN", "state": map[string]any{"frozen": frozen, "risk": "high"}})})
	case last["role"] == "tool" && last["tool_call_id"] == "call_lookup":
		return http.StatusOK, chatCompletion("", "tool_calls", [3]string{"call_freeze", "freeze_account",
			`{"account_id": "3f0c9f8e", "reason": "large entry", "requested_by": "the model"}`})
	default:
		return http.StatusOK, chatCompletion("Checking the account.", "tool_calls",
			[3]string{"call_lookup", "lookup_account", `{"account_id":"3f0c9f8e"}`})
	}
}

// wireOpenAIMonitor sets up scenario 1 and 2: an OpenAI agent with a plain
// and a gated tool over a session with an end, run to its first pause.
func wireOpenAIMonitor(t *testing.T) (e *env, api *wireAPI, actionID string) {
	t.Helper()
	api = newWireAPI(t, openAIMonitor, nil)
	e = newWireEnv(t, api)
	lookupID, freezeID := wireTools(t, e)
	actionID = uuid.NewString()
	def := wireAgent("openai-monitor", map[string]any{
		"provider": "openai", "model": "gpt-test", "system": "You watch accounts for fraud.",
		"tools": []any{
			map[string]any{"action": lookupID},
			map[string]any{"action": freezeID, "approval": "REQUIRED", "input": map[string]any{"requested_by": "agent-monitor"}},
		},
	})
	def["session"].(map[string]any)["ends"] = "session.started_at + duration('720h')"
	e.ok(t, createOp, map[string]any{"id": actionID, "input": def}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)
	return e, api, actionID
}

// TestAgentProviderOpenAIApprovalEndToEnd: an OpenAI-compatible agent's
// plain tool call runs at once, its gated call pauses the turn (P1), the
// seed's approve.graphql answers it (P5), and the next turn sends the
// model the whole conversation with the approved call's result before it
// reports the outcome; before the session's end only OPEN is offered (E2).
func TestAgentProviderOpenAIApprovalEndToEnd(t *testing.T) {
	t.Parallel()
	e, api, actionID := wireOpenAIMonitor(t)

	// Turn 1 made two model calls: lookup, then the gated freeze.
	reqs := api.requests()
	require.Len(t, reqs, 2)
	first := reqs[0]
	require.Equal(t, "/v1/chat/completions", first.path)
	require.Equal(t, "Bearer test", first.header.Get("Authorization"))
	require.Equal(t, "gpt-test", first.body["model"])
	require.EqualValues(t, 1024, first.body["max_tokens"], "config maxTokens' default, as a compatible server reads it")
	msgs := wireMessages(t, first.body)
	require.Len(t, msgs, 2)
	require.Equal(t, map[string]any{"role": "system", "content": "You watch accounts for fraud."}, msgs[0])
	require.Equal(t, "user", msgs[1]["role"])
	prompt := msgs[1]["content"].(string)
	require.Contains(t, prompt, `Session "3f0c9f8e-account", turn 1.`)
	require.Contains(t, prompt, `"entry.inserted"`)
	require.Contains(t, prompt, `"amount":12000`)
	require.Contains(t, prompt, "The session ends at 2026-04-01T09:00:00Z")
	require.Equal(t, []string{"lookup_account", "freeze_account", "report_outcome"}, openAIToolNames(t, first.body))
	for _, tl := range first.body["tools"].([]any) {
		fn := tl.(map[string]any)["function"].(map[string]any)
		if fn["name"] == "report_outcome" {
			status := fn["parameters"].(map[string]any)["properties"].(map[string]any)["status"].(map[string]any)
			require.Equal(t, []any{"OPEN"}, status["enum"], "E2: before the end an agent is offered only OPEN")
		}
	}
	second := wireMessages(t, reqs[1].body)
	require.Len(t, second, 4)
	require.Equal(t, "tool", second[3]["role"])
	require.Equal(t, "call_lookup", second[3]["tool_call_id"])
	require.JSONEq(t, `{"account_id":"3f0c9f8e","risk":"high"}`, second[3]["content"].(string))

	// The plain call ran at once as the turn's child and wrote the ledger;
	// P1: the gated one waits.
	s := e.wireSession(t, actionID)
	require.Equal(t, "WAITING", s.Status)
	t1 := s.turn(t, 1)
	require.EqualValues(t, "COMPLETED", t1.Status)
	require.Equal(t, "WAITING", t1.Checkpoint.Status)
	require.Len(t, t1.Execution.Children.Nodes, 1)
	child := t1.Execution.Children.Nodes[0]
	require.Equal(t, "lookup-account", child.Action.Definition.Name)
	require.EqualValues(t, "SUCCEEDED", child.Status)
	jsonEq(t, `{"account_id":"3f0c9f8e"}`, child.Input)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'reviews' AND key = '3f0c9f8e'`))
	require.Len(t, t1.Execution.Invocation.Approvals, 1)
	ap := t1.Execution.Invocation.Approvals[0]
	require.Equal(t, "freeze_account", ap.Tool)
	require.Equal(t, "PENDING", ap.Status)
	jsonEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, ap.Input)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`), "P1: the gated call did not run")
	require.Equal(t, []string{"input", "model_message", "tool_call", "tool_result", "model_message", "approval_request", "outcome"}, t1.kinds())

	// P5: the seed's Approve operation, verbatim.
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": actionID, "interruptId": ap.InterruptID}, nil)
	e.step(t)

	reqs = api.requests()
	require.Len(t, reqs, 3, "turn 2 made one model call")
	msgs = wireMessages(t, reqs[2].body)
	require.Len(t, msgs, 6, "system, the turn-1 prompt, and the two exchanges; no extra user text")
	require.Equal(t, "system", msgs[0]["role"])
	require.Equal(t, prompt, msgs[1]["content"], "the paused conversation is resumed, not re-rendered")
	require.Equal(t, "assistant", msgs[2]["role"])
	require.Equal(t, "Checking the account.", msgs[2]["content"])
	require.Len(t, msgs[2]["tool_calls"], 1)
	wireToolCall(t, msgs[2]["tool_calls"].([]any)[0], "call_lookup", "lookup_account", `{"account_id":"3f0c9f8e"}`)
	require.Equal(t, "tool", msgs[3]["role"])
	require.Equal(t, "call_lookup", msgs[3]["tool_call_id"])
	require.JSONEq(t, `{"account_id":"3f0c9f8e","risk":"high"}`, msgs[3]["content"].(string))
	require.Equal(t, "assistant", msgs[4]["role"])
	require.Len(t, msgs[4]["tool_calls"], 1)
	wireToolCall(t, msgs[4]["tool_calls"].([]any)[0], "call_freeze", "freeze_account",
		`{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"the model"}`)
	require.Equal(t, "tool", msgs[5]["role"])
	require.Equal(t, "call_freeze", msgs[5]["tool_call_id"])
	require.JSONEq(t, `{"frozen":"3f0c9f8e"}`, msgs[5]["content"].(string), "the approved call's output")

	s = e.wireSession(t, actionID)
	require.Equal(t, "OPEN", s.Status)
	require.JSONEq(t, `{"frozen":true,"risk":"high"}`, string(s.State))
	t2 := s.turn(t, 2)
	require.EqualValues(t, "COMPLETED", t2.Status)
	require.Len(t, t2.Inputs, 1)
	require.Equal(t, "COMMAND", t2.Inputs[0].Kind)
	require.Len(t, t2.Execution.Children.Nodes, 1, "the approved call ran as turn 2's child")
	require.Equal(t, "freeze-account", t2.Execution.Children.Nodes[0].Action.Definition.Name)
	jsonEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, t2.Execution.Children.Nodes[0].Input)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen' AND value->>'requested_by' = 'agent-monitor'`))
	require.Equal(t, []string{"note", "approval_response", "tool_call", "tool_result", "model_message", "outcome"}, t2.kinds())
	var outcome struct {
		Status string
		State  json.RawMessage
	}
	last := t2.Execution.Invocation.Transcript.Nodes[len(t2.kinds())-1]
	require.NoError(t, json.Unmarshal(last.Data, &outcome))
	require.Equal(t, "OPEN", outcome.Status)
	require.JSONEq(t, `{"frozen":true,"risk":"high"}`, string(outcome.State))
	resp := s.turn(t, 1).Execution.Invocation.Approvals[0].Response
	require.NotNil(t, resp)
	require.Equal(t, "APPROVE", resp.Decision)
	require.Equal(t, "dev", resp.Responder)
}

// denyOp answers an approval request with DENY and a reason (P5).
const denyOp = `mutation($actionId: UUID!, $interruptId: String!) { actions {
  respondToSession(actionId: $actionId, id: "3f0c9f8e-account", interruptId: $interruptId,
    response: { approval: { decision: DENY, reason: "The customer confirmed the transfer." } }) { identity kind status } } }`

// TestAgentProviderOpenAIDenyEndToEnd: a denied gated call never runs and
// the model is told so, with the reason, as an error tool result (P5).
func TestAgentProviderOpenAIDenyEndToEnd(t *testing.T) {
	t.Parallel()
	e, api, actionID := wireOpenAIMonitor(t)
	s := e.wireSession(t, actionID)
	require.Equal(t, "WAITING", s.Status)
	ap := s.turn(t, 1).Execution.Invocation.Approvals[0]

	e.ok(t, denyOp, map[string]any{"actionId": actionID, "interruptId": ap.InterruptID}, nil)
	e.step(t)

	reqs := api.requests()
	require.Len(t, reqs, 3)
	msgs := wireMessages(t, reqs[2].body)
	require.Len(t, msgs, 6)
	require.Equal(t, "tool", msgs[5]["role"])
	require.Equal(t, "call_freeze", msgs[5]["tool_call_id"])
	require.Equal(t, "error: denied by dev: The customer confirmed the transfer.", msgs[5]["content"])

	s = e.wireSession(t, actionID)
	require.Equal(t, "OPEN", s.Status)
	require.JSONEq(t, `{"frozen":false,"risk":"high"}`, string(s.State))
	t2 := s.turn(t, 2)
	require.EqualValues(t, "COMPLETED", t2.Status)
	require.Empty(t, t2.Execution.Children.Nodes, "the denied call never ran")
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`))
	require.Equal(t, []string{"note", "approval_response", "tool_result", "model_message", "outcome"}, t2.kinds())
	resp := s.turn(t, 1).Execution.Invocation.Approvals[0].Response
	require.NotNil(t, resp)
	require.Equal(t, "DENY", resp.Decision)
	require.Equal(t, "The customer confirmed the transfer.", resp.Reason)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'action_session.responded'
		AND data->>'decision' = 'DENY' AND data->>'reason' = 'The customer confirmed the transfer.'`))
}

// anthropicReviewer answers like a model that looks the account up, then
// refuses, until a responder's note says the transfer was reviewed; then it
// reports the outcome.
func anthropicReviewer(body map[string]any) (int, string) {
	if strings.Contains(mustJSON(body["messages"]), "The transfer was reviewed") {
		return http.StatusOK, anthropicMessage([]any{
			map[string]any{"type": "text", "text": "The responder reviewed it; keeping the session open."},
			map[string]any{"type": "tool_use", "id": "toolu_01Outcome", "name": "report_outcome",
				"input": map[string]any{"status": "OPEN", "state": map[string]any{"reviewed": true}}},
		}, "tool_use", nil)
	}
	if last := lastMessage(body); last["role"] == "user" && strings.Contains(mustJSON(last["content"]), "tool_result") {
		return http.StatusOK, anthropicMessage([]any{}, "refusal",
			map[string]any{"type": "refusal", "category": "cyber", "explanation": "Declined by a policy classifier."})
	}
	return http.StatusOK, anthropicMessage([]any{
		map[string]any{"type": "text", "text": "Let me look the account up."},
		map[string]any{"type": "tool_use", "id": "toolu_01Lookup", "name": "lookup_account", "input": map[string]any{"account_id": "3f0c9f8e"}},
	}, "tool_use", nil)
}

// TestAgentProviderAnthropicRefusalEndToEnd: an Anthropic refusal holds the
// turn (H1, H2) with stop_details' category and explanation, and nothing
// the turn did commits; the seed's retry_held_turn.graphql runs the held
// inputs again with the responder's note (H3) and the model goes on.
func TestAgentProviderAnthropicRefusalEndToEnd(t *testing.T) {
	t.Parallel()
	api := newWireAPI(t, nil, anthropicReviewer)
	e := newWireEnv(t, api)
	lookupID, freezeID := wireTools(t, e)
	actionID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": actionID, "input": wireAgent("anthropic-monitor", map[string]any{
		"provider": "anthropic", "model": "claude-test", "system": "You watch accounts for fraud.",
		"tools": []any{
			map[string]any{"action": lookupID},
			map[string]any{"action": freezeID, "approval": "REQUIRED"},
		},
	})}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)

	reqs := api.requests()
	require.Len(t, reqs, 2, "H1: a refusal is not retried")
	first := reqs[0]
	require.Equal(t, "/v1/messages", first.path)
	require.Equal(t, "test-ant", first.header.Get("X-Api-Key"))
	require.Equal(t, "claude-test", first.body["model"])
	require.EqualValues(t, 1024, first.body["max_tokens"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "You watch accounts for fraud."}}, first.body["system"])
	var names []string
	for _, tl := range first.body["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
		require.Contains(t, tl, "input_schema")
	}
	require.Equal(t, []string{"lookup_account", "freeze_account", "report_outcome"}, names)
	msgs := wireMessages(t, reqs[1].body)
	require.Len(t, msgs, 3)
	require.JSONEq(t, `[{"type":"tool_result","tool_use_id":"toolu_01Lookup","content":[{"type":"text","text":"{\"account_id\":\"3f0c9f8e\",\"risk\":\"high\"}"}]}]`,
		mustJSON(msgs[2]["content"]))

	// H2: the turn is held, its inputs received, the session waiting.
	s := e.wireSession(t, actionID)
	require.Equal(t, "WAITING", s.Status)
	require.Contains(t, *s.Reason, "turn 1 is held")
	t1 := s.turn(t, 1)
	require.EqualValues(t, "HELD", t1.Status)
	require.EqualValues(t, "HELD", t1.Execution.Status)
	hold := t1.Execution.Invocation.Hold
	require.NotNil(t, hold)
	require.Equal(t, "REFUSED", hold.Cause)
	require.Equal(t, "cyber", *hold.Category)
	require.Equal(t, "Declined by a policy classifier.", *hold.Explanation)
	require.Equal(t, 1, hold.Turn)
	require.NotEmpty(t, t1.Inputs)
	for _, in := range t1.Inputs {
		require.Equal(t, "RECEIVED", in.Status)
	}
	// H1: the lookup's write and its child execution rolled back; the
	// transcript is kept.
	require.Empty(t, t1.Execution.Children.Nodes)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'reviews'`))
	require.Equal(t, []string{"input", "model_message", "tool_call", "tool_result", "model_message", "refusal"}, t1.kinds())

	// H3: the seed's Retry operation, verbatim.
	e.ok(t, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": actionID, "interruptId": hold.InterruptID}, nil)
	e.step(t)

	reqs = api.requests()
	require.Len(t, reqs, 3)
	msgs = wireMessages(t, reqs[2].body)
	require.Len(t, msgs, 1, "a retry starts a fresh conversation")
	require.Equal(t, "user", msgs[0]["role"])
	text := anthropicText(msgs[0])
	require.Contains(t, text, `Session "3f0c9f8e-account", turn 2.`)
	note := strings.Index(text, "Note from the responder: The transfer was reviewed; continue monitoring.")
	require.Positive(t, note)
	for _, in := range t1.Inputs {
		at := strings.Index(text, `"identity":"`+in.Identity+`"`)
		require.Positive(t, at, "the held input %s is replayed", in.Identity)
		require.Less(t, at, note, "the held inputs come before the answer")
	}
	require.Contains(t, text, `"amount":12000`)

	s = e.wireSession(t, actionID)
	require.Equal(t, "OPEN", s.Status)
	require.JSONEq(t, `{"reviewed":true}`, string(s.State))
	t2 := s.turn(t, 2)
	require.EqualValues(t, "COMPLETED", t2.Status)
	require.Len(t, t2.Inputs, 1, "H3: the retry turn lists only the answer")
	require.Equal(t, "COMMAND", t2.Inputs[0].Kind)
	require.Equal(t, []string{"input", "model_message", "outcome"}, t2.kinds())
	h := s.turn(t, 1).Execution.Invocation.Hold
	require.Equal(t, "RETRY", h.Response.Decision)
	require.Equal(t, "The transfer was reviewed; continue monitoring.", h.Response.Note)
}

// skipOp answers a held turn with SKIP (H4).
const skipOp = `mutation($actionId: UUID!, $interruptId: String!) { actions {
  respondToSession(actionId: $actionId, id: "3f0c9f8e-account", interruptId: $interruptId,
    response: { hold: { decision: SKIP } }) { identity kind status } } }`

// TestAgentProviderUnfinishedSkipEndToEnd: a model that keeps answering in
// plain text is reminded once per attempt, and after config attempts the
// turn is held UNFINISHED (H1, H2, T7); SKIP opens the session again
// without a model call (H4).
func TestAgentProviderUnfinishedSkipEndToEnd(t *testing.T) {
	t.Parallel()
	api := newWireAPI(t, func(map[string]any) (int, string) {
		return http.StatusOK, chatCompletion("The entry looks fine to me.", "stop")
	}, nil)
	e := newWireEnv(t, api)
	actionID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": actionID, "input": wireAgent("chatty-monitor", map[string]any{
		"provider": "openai", "model": "gpt-test", "attempts": 2,
	})}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)

	reqs := api.requests()
	require.Len(t, reqs, 4, "two attempts of two model calls: the answer and the answer to the reminder")
	msgs := wireMessages(t, reqs[0].body)
	require.Len(t, msgs, 1, "no system prompt configured")
	require.Equal(t, []string{"report_outcome"}, openAIToolNames(t, reqs[0].body))
	msgs = wireMessages(t, reqs[1].body)
	require.Len(t, msgs, 3)
	require.Equal(t, "assistant", msgs[1]["role"])
	require.Equal(t, "The entry looks fine to me.", msgs[1]["content"])
	require.Equal(t, "user", msgs[2]["role"])
	require.Contains(t, msgs[2]["content"], "You ended your message without calling report_outcome")
	require.Contains(t, msgs[2]["content"], "OPEN, COMPLETED, FAILED", "E2: without an end every status is offered")
	require.Equal(t, reqs[0].body["messages"], reqs[2].body["messages"], "T7: the retry sees the same inputs and state")

	s := e.wireSession(t, actionID)
	require.Equal(t, "WAITING", s.Status)
	require.Contains(t, *s.Reason, "agent_unfinished")
	t1 := s.turn(t, 1)
	require.EqualValues(t, "HELD", t1.Status)
	require.Equal(t, 2, t1.Execution.Attempts)
	hold := t1.Execution.Invocation.Hold
	require.NotNil(t, hold)
	require.Equal(t, "UNFINISHED", hold.Cause)
	require.Nil(t, hold.Category)
	require.Nil(t, hold.Explanation)
	require.Equal(t, []string{"input", "model_message", "note", "model_message", "note"}, t1.kinds(),
		"the last attempt's transcript: answer, reminder, answer, unfinished")

	e.ok(t, skipOp, map[string]any{"actionId": actionID, "interruptId": hold.InterruptID}, nil)
	e.step(t)
	require.Len(t, api.requests(), 4, "H4: no model call")
	s = e.wireSession(t, actionID)
	require.Equal(t, "OPEN", s.Status)
	require.Nil(t, s.Reason)
	require.Len(t, s.Turns.Nodes, 1, "SKIP runs no turn")
	t1 = s.turn(t, 1)
	require.Equal(t, "SKIP", t1.Execution.Invocation.Hold.Response.Decision)
	require.EqualValues(t, "HELD", t1.Status)
	for _, in := range t1.Inputs {
		require.Equal(t, "RECEIVED", in.Status, "H4: the held inputs are not taken again")
	}
}

// TestAgentProviderTransportFailureEndToEnd: a provider's HTTP error is
// retried up to config attempts when retryable and not at all when
// permanent; then the turn and the session fail with a reason naming the
// execution and the inputs stay unconsumed (T7).
func TestAgentProviderTransportFailureEndToEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, provider, body, want string
		status, requests           int
	}{
		{name: "openai 500 retried", provider: "openai", status: http.StatusInternalServerError, requests: 2,
			body: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			want: "provider: openai: HTTP 500 Internal Server Error: server_error: The server had an error while processing your request."},
		{name: "openai 400 permanent", provider: "openai", status: http.StatusBadRequest, requests: 1,
			body: `{"error":{"message":"The model 'gpt-test' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			want: "provider: openai: HTTP 400 Bad Request: invalid_request_error/model_not_found: The model 'gpt-test' does not exist."},
		{name: "anthropic 529 retried", provider: "anthropic", status: 529, requests: 2,
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`,
			want: "provider: anthropic: HTTP 529"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := func(map[string]any) (int, string) { return tc.status, tc.body }
			api := newWireAPI(t, answer, answer)
			e := newWireEnv(t, api)
			actionID := uuid.NewString()
			e.ok(t, createOp, map[string]any{"id": actionID, "input": wireAgent("failing-monitor", map[string]any{
				"provider": tc.provider, "model": "gpt-test", "attempts": 2,
			})}, nil)
			e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
			e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
			e.step(t)

			require.Len(t, api.requests(), tc.requests)
			s := e.wireSession(t, actionID)
			require.EqualValues(t, "FAILED", s.Status)
			t1 := s.turn(t, 1)
			require.EqualValues(t, "FAILED", t1.Status)
			require.EqualValues(t, "FAILED", t1.Execution.Status)
			require.Equal(t, tc.requests, t1.Execution.Attempts)
			require.NotNil(t, s.Reason)
			require.Contains(t, *s.Reason, "execution "+t1.Execution.ID+" failed: model call 1: "+tc.want)
			require.NotNil(t, t1.Execution.Error)
			require.Contains(t, *t1.Execution.Error, tc.want)
			if tc.status == 529 {
				require.Contains(t, *t1.Execution.Error, "overloaded_error: Overloaded")
			}
			require.NotEmpty(t, t1.Inputs)
			for _, in := range t1.Inputs {
				require.Equal(t, "PENDING", in.Status, "T7: the inputs stay unconsumed")
			}
			require.Equal(t, []string{"input", "note"}, t1.kinds(), "the last attempt's transcript notes the error")
		})
	}
}

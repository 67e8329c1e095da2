package mcp_test

// Issue 17, agents that use MCP servers: an agent's config names external
// MCP servers (here this same service's /mcp, reached over HTTP with a
// bearer token from config.secrets) whose tools join its tool list, with
// approval gates, recorded as tool calls in the transcript; a server that
// is down fails the turn's attempt with a clear, retryable error.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

func allowLoopback(c *server.Config) { c.HTTPAllow = []string{"127.0.0.1"} }

// remoteAgent is an agent with a session per task (opened by task.inserted,
// resumed by task.updated) whose scripted model calls ledger__lookup and
// reports.
func remoteAgent(serverURL string, extra map[string]any, server map[string]any) map[string]any {
	srv := map[string]any{"name": "ledger", "url": serverURL}
	for k, v := range server {
		srv[k] = v
	}
	cfg := map[string]any{
		"provider":   "scripted",
		"mcpServers": []any{srv},
		"script": []any{
			map[string]any{"step": 0, "toolCalls": []any{map[string]any{"id": "c1", "name": "ledger__lookup", "input": map[string]any{"q": "a-1"}}}},
			map[string]any{"step": 1, "toolCalls": []any{map[string]any{"name": "report_outcome", "input": map[string]any{"status": "COMPLETED", "reason": "looked it up"}}}},
		},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return map[string]any{
		"name": "researcher", "kind": "agent", "config": cfg,
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "task.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
			map[string]any{"name": "asked", "event": `event.type == "task.updated"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}}},
		"session": map[string]any{"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}},
			"required": []any{"id"}, "additionalProperties": false}, "id": "string(session.input.id)"},
	}
}

func (e *env) createAction(t *testing.T, def map[string]any) uuid.UUID {
	t.Helper()
	id := uuid.New()
	e.gql(t, `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { actionId } } }`,
		map[string]any{"id": id, "in": def}, nil)
	return id
}

// putTask opens task id's session and asks it something (a turn).
func (e *env) putTask(t *testing.T, id string) {
	t.Helper()
	for i := range 2 {
		e.gql(t, `mutation($k: String!, $v: JSON!) { ledger { putValue(namespace: "task", key: $k, value: $v) { key } } }`,
			map[string]any{"k": id, "v": map[string]any{"id": id, "n": i}}, nil)
	}
}

type remoteSession struct {
	Status    string
	Reason    *string
	Approvals []struct {
		InterruptID string
		Tool        string
		Status      string
		Input       json.RawMessage
	}
	Turns struct {
		Nodes []struct {
			Number    int
			Status    string
			Execution struct {
				Status     string
				Error      *string
				Attempts   int
				Invocation struct {
					Output     json.RawMessage
					Transcript struct {
						Nodes []struct {
							Kind string
							Data map[string]any
						}
					}
				}
			}
		}
	}
}

func (e *env) remoteSession(t *testing.T, action uuid.UUID, id string) remoteSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *remoteSession }
		}
	}
	e.gql(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
		status reason approvals { interruptId tool status input }
		turns { nodes { number status execution { status error attempts invocation { output transcript(first: 100) { nodes { kind data } } } } } } } } } }`,
		map[string]any{"a": action, "s": id}, &out)
	require.NotNil(t, out.Actions.Action.Session)
	return *out.Actions.Action.Session
}

// entries returns the transcript entries of kind in a turn.
func entries(s remoteSession, turn int, kind string) []map[string]any {
	var out []map[string]any
	for _, tu := range s.Turns.Nodes {
		if tu.Number != turn {
			continue
		}
		for _, n := range tu.Execution.Invocation.Transcript.Nodes {
			if n.Kind == kind {
				out = append(out, n.Data)
			}
		}
	}
	return out
}

func TestMCPAgentUsesAnExternalMCPServer(t *testing.T) { // issue 17
	e := newSteppedEnv(t, true, allowLoopback)
	lookup := e.createTool(t, "lookup", echoSource, map[string]any{"name": "lookup", "description": "Look a thing up."})
	tok := e.token(t, "researcher-agent", [2]string{"CALL", "financial.Action.document:" + lookup.String()})
	agent := e.createAction(t, remoteAgent(e.srv.URL+"/mcp", map[string]any{"secrets": map[string]any{"ledger_token": "Bearer " + tok}},
		map[string]any{"authorization": "ledger_token"}))

	// The secret is write-only: queries show it redacted.
	var def struct {
		Actions struct {
			Action struct {
				Definition struct{ Config map[string]any }
			}
		}
	}
	e.gql(t, `query($a: UUID!) { actions { action(id: $a) { definition { config } } } }`, map[string]any{"a": agent}, &def)
	require.Equal(t, "(redacted)", def.Actions.Action.Definition.Config["secrets"])
	require.NotContains(t, e.logs.String(), tok)

	e.putTask(t, "t-1")
	e.step(t)
	s := e.remoteSession(t, agent, "t-1")
	require.Equal(t, "COMPLETED", s.Status, "%+v", s)
	calls := entries(s, 1, "tool_call")
	require.Len(t, calls, 1)
	require.Equal(t, "ledger__lookup", calls[0]["tool"])
	require.Equal(t, "ledger", calls[0]["mcp_server"])
	require.Equal(t, "lookup", calls[0]["mcp_tool"])
	results := entries(s, 1, "tool_result")
	require.Len(t, results, 1)
	require.Equal(t, false, results[0]["is_error"])
	require.JSONEq(t, `{"echo": {"q": "a-1"}}`, results[0]["content"].(string))
	var out map[string]any
	require.NoError(t, json.Unmarshal(s.Turns.Nodes[0].Execution.Invocation.Output, &out))
	require.EqualValues(t, 1, out["tool_calls"])
}

func TestMCPAgentGatesExternalToolsOnApproval(t *testing.T) { // issue 17, P1, P5
	e := newSteppedEnv(t, false, allowLoopback)
	e.createTool(t, "lookup", echoSource, map[string]any{"name": "lookup"})
	agent := e.createAction(t, remoteAgent(e.srv.URL+"/mcp", nil, map[string]any{"approval": "REQUIRED", "tools": []any{"lookup"}}))
	e.putTask(t, "t-2")
	e.step(t)
	s := e.remoteSession(t, agent, "t-2")
	require.Equal(t, "WAITING", s.Status)
	require.Len(t, s.Approvals, 1)
	require.Equal(t, "ledger__lookup", s.Approvals[0].Tool)
	require.JSONEq(t, `{"q": "a-1"}`, string(s.Approvals[0].Input))
	require.Empty(t, entries(s, 1, "tool_call"), "nothing ran before the approval")

	e.gql(t, `mutation($a: UUID!, $i: String!) { actions { respondToSession(actionId: $a, id: "t-2", interruptId: $i,
		response: { approval: { decision: APPROVE, input: {q: "a-2"} } }) { kind } } }`,
		map[string]any{"a": agent, "i": s.Approvals[0].InterruptID}, nil)
	e.step(t)
	s = e.remoteSession(t, agent, "t-2")
	require.Equal(t, "COMPLETED", s.Status, "%+v", s)
	calls := entries(s, 2, "tool_call")
	require.Len(t, calls, 1)
	require.Equal(t, true, calls[0]["approved"])
	results := entries(s, 2, "tool_result")
	require.JSONEq(t, `{"echo": {"q": "a-2"}}`, results[0]["content"].(string), "the approved replacement input ran")
}

func TestMCPAgentWithADownServerFailsRetryably(t *testing.T) { // issue 17, T7
	e := newSteppedEnv(t, false, allowLoopback)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String() + "/mcp"
	require.NoError(t, ln.Close()) // nothing listens there now
	agent := e.createAction(t, remoteAgent(down, map[string]any{"attempts": 2}, nil))
	e.putTask(t, "t-3")
	e.step(t)
	s := e.remoteSession(t, agent, "t-3")
	require.Equal(t, "FAILED", s.Status)
	tu := s.Turns.Nodes[0]
	require.Equal(t, 2, tu.Execution.Attempts, "an unreachable server is retried")
	require.NotNil(t, tu.Execution.Error)
	require.Contains(t, *tu.Execution.Error, "config.mcpServers[0]: the MCP server ledger ("+down+") is unavailable (retryable")
	require.True(t, strings.Contains(*s.Reason, "unavailable"), *s.Reason)
}

func TestMCPAgentConfigIsChecked(t *testing.T) { // issue 17, A3
	e := newSteppedEnv(t, false)
	for _, tc := range []struct {
		server map[string]any
		extra  map[string]any
		field  string
	}{
		{map[string]any{"url": "http://127.0.0.1:9/mcp"}, nil, "input.config.mcpServers[0].url"},
		{map[string]any{"url": "ftp://example.com/mcp"}, nil, "input.config.mcpServers[0].url"},
		{map[string]any{"name": "has space"}, nil, "input.config.mcpServers[0].name"},
		{map[string]any{"authorization": "missing"}, nil, "input.config.mcpServers[0].authorization"},
		{map[string]any{"approval": "MAYBE"}, nil, "input.config.mcpServers[0].approval"},
		{nil, map[string]any{"secrets": "(redacted)"}, "input.config.secrets"},
	} {
		def := remoteAgent("https://mcp.example.com/mcp", tc.extra, tc.server)
		errs := e.gqlErrors(t, "", `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { actionId } } }`,
			map[string]any{"id": uuid.New(), "in": def}, nil)
		require.NotEmpty(t, errs, "%v", tc)
		ext := errs[0]["extensions"].(map[string]any)
		require.Equal(t, "INVALID_CONFIG", ext["code"], "%v", errs)
		require.Equal(t, tc.field, ext["field"], "%v", errs)
	}
}

// dyingServer is an outside MCP server (the go-sdk's, with one tool,
// lookup) that goes down once a client calls a tool: it lists its tools,
// then the connection of the tools/call request is cut, and every request
// after it too, as when the process dies mid-turn.
func dyingServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "outside", Version: "1"}, nil)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "lookup", Description: "Look a thing up."},
		func(context.Context, *gomcp.CallToolRequest, map[string]any) (*gomcp.CallToolResult, any, error) {
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "found"}}}, nil, nil
		})
	h := gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return srv }, &gomcp.StreamableHTTPOptions{Stateless: true})
	var down atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			down.Store(true)
		}
		if down.Load() {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// An outside MCP server that goes down mid-turn (after listing its tools,
// at the call) fails the call, not the turn: the model gets an error result
// saying the server is unavailable and that retrying may help, and the turn
// goes on to its outcome.
func TestMCPAgentOutsideServerGoingDownMidTurn(t *testing.T) { // issue 17, T7
	e := newSteppedEnv(t, false, allowLoopback)
	outside := dyingServer(t)
	agent := e.createAction(t, remoteAgent(outside.URL+"/mcp", nil, nil))
	e.putTask(t, "t-4")
	e.step(t)
	s := e.remoteSession(t, agent, "t-4")
	require.Equal(t, "COMPLETED", s.Status, "%+v", s)
	calls := entries(s, 1, "tool_call")
	require.Len(t, calls, 1)
	require.Equal(t, "ledger__lookup", calls[0]["tool"])
	results := entries(s, 1, "tool_result")
	require.Len(t, results, 1)
	require.Equal(t, true, results[0]["is_error"])
	content := results[0]["content"].(string)
	require.True(t, strings.HasPrefix(content, "UPSTREAM_UNAVAILABLE (retryable): the MCP server ledger is unavailable"), content)
	require.Equal(t, 1, s.Turns.Nodes[0].Execution.Attempts, "the call failed, not the attempt")
}

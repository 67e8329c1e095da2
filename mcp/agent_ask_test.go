package mcp_test

// Issue 17, agents over MCP (SPEC I4): an agent action with an mcp block is
// listed as one tool; each call is delivered to a session of the action as
// a REQUEST input, runs in a turn of its own with the agent's loop, and is
// answered with that turn's output. The input lists its execution and the
// number of tool calls the execution made (calls). Approvals and holds
// raised during the turn reach the client as progress notifications and
// are answered through the inbox; a client that goes away loses nothing.
// The agents run the scripted model provider: no network.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/mcp"
)

// caseSchema is the served agents' arguments: a case and a question.
var caseSchema = map[string]any{"type": "object", "properties": map[string]any{
	"case_id": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"}},
	"required": []any{"case_id", "message"}, "additionalProperties": false}

// servedAgent is an agent served over MCP as tool name, with a session per
// case (mcp.session.start maps request.arguments.case_id) and the given
// tool references and script.
func servedAgent(name string, tools []any, script []any, role map[string]any) map[string]any {
	if role == nil {
		role = map[string]any{"start": map[string]any{"input": map[string]any{"case": "request.arguments.case_id"}}}
	}
	return map[string]any{
		"name": name, "kind": "agent",
		"config": map[string]any{"provider": "scripted", "tools": tools, "script": script},
		"session": map[string]any{"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"case": map[string]any{"type": "string"}},
			"required": []any{"case"}, "additionalProperties": false}, "id": "string(session.input.case)"},
		"mcp": map[string]any{"name": name, "description": "Ask the " + name + " agent about a case.", "inputSchema": caseSchema, "session": role},
	}
}

func step(n int, text string, calls ...map[string]any) map[string]any {
	s := map[string]any{"step": n, "toolCalls": calls}
	if text != "" {
		s["text"] = text
	}
	return s
}

func toolCall(name string, input map[string]any) map[string]any {
	return map[string]any{"name": name, "input": input}
}

var reportOpen = toolCall("report_outcome", map[string]any{"status": "OPEN"})

// askParams is a tools/call of an agent with a progress token (and a
// request key, when key is set).
func askParams(name, caseID, message, key string) *gomcp.CallToolParams {
	p := &gomcp.CallToolParams{Name: name, Arguments: map[string]any{"case_id": caseID, "message": message}}
	if key != "" {
		p.Meta = gomcp.Meta{mcp.MetaRequestKey: key}
	}
	p.SetProgressToken("progress-" + caseID)
	return p
}

// requestInputs reads a session's inputs with their execution and calls.
type requestInput struct {
	Kind      string
	Identity  string
	Status    string
	Turn      *int
	Calls     *int
	Event     *struct{ EventType string }
	Execution *struct {
		ID         string
		Status     string
		Invocation struct{ Output json.RawMessage }
	}
}

func (e *env) requestInputs(t *testing.T, action uuid.UUID, id string) []requestInput {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct {
				Session *struct {
					Inputs struct{ Nodes []requestInput }
				}
			}
		}
	}
	e.gql(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
		inputs { nodes { kind identity status turn calls event { eventType } execution { id status invocation { output } } } } } } } }`,
		map[string]any{"a": action, "s": id}, &out)
	require.NotNil(t, out.Actions.Action.Session, "no session %q", id)
	return out.Actions.Action.Session.Inputs.Nodes
}

func TestMCPAskAgentIsARequestInput(t *testing.T) { // issue 17, I4
	e := newEnv(t, false)
	lookup := e.createTool(t, "lookup", echoSource, map[string]any{"name": "lookup", "description": "Look a thing up."})
	agent := e.createAction(t, servedAgent("researcher", []any{map[string]any{"action": lookup.String()}}, []any{
		step(0, "", toolCall("lookup", map[string]any{"q": 1}), toolCall("lookup", map[string]any{"q": 2})),
		step(1, "The case is clear: 42.", reportOpen),
	}, nil))
	cs := e.mustConnect(t, "/mcp", "")

	// Listed beside the tools, with its description, schema and kind.
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var listed *gomcp.Tool
	for _, tool := range res.Tools {
		if tool.Name == "researcher" {
			listed = tool
		}
	}
	require.NotNil(t, listed, "tools: %v", toolNames(t, cs))
	require.Equal(t, "Ask the researcher agent about a case.", listed.Description)
	require.Equal(t, mcp.KindRequest, listed.Meta[mcp.MetaKind])
	require.Equal(t, agent.String(), listed.Meta[mcp.MetaActionID])
	require.Equal(t, []any{"case_id", "message"}, listed.InputSchema.(map[string]any)["required"])

	// The call is answered with the turn's output: the agent's reply.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := cs.CallTool(ctx, askParams("researcher", "c-1", "What is the answer?", ""))
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	require.Equal(t, "The case is clear: 42.", text(t, r))
	require.Equal(t, "c-1", r.Meta[mcp.MetaSessionID])
	require.EqualValues(t, 2, r.StructuredContent.(map[string]any)["tool_calls"])
	key := r.Meta[mcp.MetaRequestKey].(string)
	require.Equal(t, "request/"+key, r.Meta[mcp.MetaInput])

	// The session query lists it as a REQUEST input with its execution and calls.
	ins := e.requestInputs(t, agent, "c-1")
	require.Len(t, ins, 1)
	in := ins[0]
	require.Equal(t, "REQUEST", in.Kind)
	require.Equal(t, "request/"+key, in.Identity)
	require.Equal(t, "CONSUMED", in.Status)
	require.Equal(t, 1, *in.Turn)
	require.Equal(t, "action_session.requested", in.Event.EventType)
	require.NotNil(t, in.Execution)
	require.Equal(t, r.Meta[mcp.MetaExecutionID], in.Execution.ID)
	require.Equal(t, "SUCCEEDED", in.Execution.Status)
	require.NotNil(t, in.Calls)
	require.Equal(t, 2, *in.Calls, "the two lookups the turn made")

	// A second question reaches the same session, in a turn of its own.
	r2, err := cs.CallTool(ctx, askParams("researcher", "c-1", "And again?", ""))
	require.NoError(t, err)
	require.False(t, r2.IsError, "%s", text(t, r2))
	ins = e.requestInputs(t, agent, "c-1")
	require.Len(t, ins, 2)
	require.Equal(t, 2, *ins[1].Turn)
	require.NotEqual(t, ins[0].Execution.ID, ins[1].Execution.ID)

	// The same request again (its key in _meta) is not asked twice: the
	// call gets the first answer.
	again, err := cs.CallTool(ctx, askParams("researcher", "c-1", "What is the answer?", key))
	require.NoError(t, err)
	require.Equal(t, "The case is clear: 42.", text(t, again))
	require.Equal(t, r.Meta[mcp.MetaExecutionID], again.Meta[mcp.MetaExecutionID])
	require.Len(t, e.requestInputs(t, agent, "c-1"), 2)
	// ... unless its arguments differ: a key names one request.
	conflict, err := cs.CallTool(ctx, askParams("researcher", "c-1", "Something else", key))
	require.NoError(t, err)
	require.True(t, conflict.IsError)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", conflict.Meta[mcp.MetaCode])

	// Arguments that do not match the schema are refused with the field.
	bad, err := call(t, cs, "researcher", map[string]any{"case_id": "c-1"})
	require.NoError(t, err)
	require.True(t, bad.IsError)
	require.Equal(t, "BAD_USER_INPUT", bad.Meta[mcp.MetaCode])
	require.Equal(t, "arguments", bad.StructuredContent.(map[string]any)["error"].(map[string]any)["field"])

	// The action shows its MCP endpoint, which serves it alone.
	var out struct {
		Actions struct {
			Action struct{ McpEndpoint *string }
		}
	}
	e.gql(t, `query($a: UUID!) { actions { action(id: $a) { mcpEndpoint } } }`, map[string]any{"a": agent}, &out)
	require.Equal(t, mcp.Endpoint(agent), *out.Actions.Action.McpEndpoint)
	one := e.mustConnect(t, mcp.Endpoint(agent), "")
	require.Equal(t, []string{"researcher"}, toolNames(t, one))
}

// A resume mapping reaches open sessions only (the rules of a resume
// trigger); the MCP session id can name the session too.
func TestMCPAskMapsRequestsToSessions(t *testing.T) { // issue 17, I4, S2
	e := newEnv(t, false)
	script := []any{step(0, "noted", reportOpen)}
	starter := e.createAction(t, servedAgent("starter", nil, script,
		map[string]any{"start": map[string]any{"input": map[string]any{"case": "request.mcp_session"}}}))
	resumer := servedAgent("resumer", nil, script, map[string]any{"resume": map[string]any{"id": "string(request.arguments.case_id)"}})
	resumer["triggers"] = []any{map[string]any{"name": "opened", "event": `event.type == "case.inserted"`,
		"session": map[string]any{"start": map[string]any{"input": map[string]any{"case": "string(event.data.id)"}}}}}
	resumerID := e.createAction(t, resumer)
	cs := e.mustConnect(t, "/mcp", "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Keyed by the MCP session: one agent session per client connection.
	r, err := cs.CallTool(ctx, askParams("starter", "x", "hello", ""))
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	mcpSession := r.Meta[mcp.MetaSessionID].(string)
	require.Equal(t, cs.ID(), mcpSession, "the session is named by the client's Mcp-Session-Id")
	_, err = cs.CallTool(ctx, askParams("starter", "y", "hello again", ""))
	require.NoError(t, err)
	require.Len(t, e.requestInputs(t, starter, mcpSession), 2)
	other := e.mustConnect(t, "/mcp", "")
	r, err = other.CallTool(ctx, askParams("starter", "x", "hello", ""))
	require.NoError(t, err)
	require.NotEqual(t, mcpSession, r.Meta[mcp.MetaSessionID], "another client, another session")

	// Resume: no session, no delivery.
	r, err = cs.CallTool(ctx, askParams("resumer", "k-1", "anyone?", ""))
	require.NoError(t, err)
	require.True(t, r.IsError)
	require.Equal(t, "NOT_FOUND", r.Meta[mcp.MetaCode])
	// Once an event opens it, requests reach it.
	e.gql(t, `mutation { ledger { putValue(namespace: "case", key: "k-1", value: {id: "k-1"}) { key } } }`, nil, nil)
	require.Eventually(t, func() bool { return e.sessionStatus(t, resumerID, "k-1") == "OPEN" }, time.Minute, 20*time.Millisecond)
	r, err = cs.CallTool(ctx, askParams("resumer", "k-1", "anyone?", ""))
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	require.Equal(t, "noted", text(t, r))

	// A closed session takes no requests.
	e.gql(t, `mutation($a: UUID!) { actions { closeSession(actionId: $a, id: "k-1", reason: "done") { status } } }`, map[string]any{"a": resumerID}, nil)
	r, err = cs.CallTool(ctx, askParams("resumer", "k-1", "still there?", ""))
	require.NoError(t, err)
	require.True(t, r.IsError)
	require.Equal(t, "SESSION_CLOSED", r.Meta[mcp.MetaCode])
}

// G7: a singleton started by MCP requests holds its slot as one started
// by a trigger does: a request for another session while it is live is
// refused with SESSION_SLOT_TAKEN, naming the holder; the holder's own
// requests go on reaching it.
func TestMCPAskSingletonSlot(t *testing.T) { // issue 16, G7, I4
	e := newEnv(t, false)
	def := servedAgent("single", nil, []any{step(0, "noted", reportOpen)}, nil)
	def["session"].(map[string]any)["concurrency"] = 1
	e.createAction(t, def)
	cs := e.mustConnect(t, "/mcp", "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	r, err := cs.CallTool(ctx, askParams("single", "c-1", "first", ""))
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	r, err = cs.CallTool(ctx, askParams("single", "c-2", "second", ""))
	require.NoError(t, err)
	require.True(t, r.IsError, "a second live session of a singleton")
	require.Equal(t, "SESSION_SLOT_TAKEN", r.Meta[mcp.MetaCode])
	require.Contains(t, text(t, r), `"c-1"`)
	r, err = cs.CallTool(ctx, askParams("single", "c-1", "again", ""))
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
}

func (e *env) sessionStatus(t *testing.T, action uuid.UUID, id string) string {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *struct{ Status string } }
		}
	}
	e.gql(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status } } } }`, map[string]any{"a": action, "s": id}, &out)
	if out.Actions.Action.Session == nil {
		return ""
	}
	return out.Actions.Action.Session.Status
}

// progressClient connects a go-sdk client whose progress notifications go
// to the returned channel.
func (e *env) progressClient(t *testing.T) (*gomcp.ClientSession, <-chan *gomcp.ProgressNotificationParams) {
	t.Helper()
	ch := make(chan *gomcp.ProgressNotificationParams, 64)
	c := gomcp.NewClient(&gomcp.Implementation{Name: "actionsledger-test", Version: "1"}, &gomcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *gomcp.ProgressNotificationClientRequest) { ch <- r.Params },
	})
	cs, err := c.Connect(t.Context(), &gomcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs, ch
}

// interruptOf waits for a progress notification of a request to session
// sessionID listing an interrupt of kind, and returns the interrupt.
func interruptOf(t *testing.T, ch <-chan *gomcp.ProgressNotificationParams, kind, sessionID string) map[string]any {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case p := <-ch:
			if p.Meta[mcp.MetaSessionID] != sessionID {
				continue
			}
			list, _ := p.Meta[mcp.MetaInterrupts].([]any)
			for _, it := range list {
				if m := it.(map[string]any); m["kind"] == kind {
					require.Contains(t, p.Message, "answer in the inbox")
					return m
				}
			}
		case <-timeout:
			t.Fatalf("no progress notification listed an interrupt of kind %s", kind)
		}
	}
}

type callOutcome struct {
	res *gomcp.CallToolResult
	err error
}

func goCall(cs *gomcp.ClientSession, p *gomcp.CallToolParams) <-chan callOutcome {
	done := make(chan callOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := cs.CallTool(ctx, p)
		done <- callOutcome{r, err}
	}()
	return done
}

func (e *env) respond(t *testing.T, action uuid.UUID, id, interruptID string, response map[string]any) {
	t.Helper()
	e.gql(t, `mutation($a: UUID!, $s: String!, $i: String!, $r: SessionResponseInput!) { actions {
		respondToSession(actionId: $a, id: $s, interruptId: $i, response: $r) { kind } } }`,
		map[string]any{"a": action, "s": id, "i": interruptID, "r": response}, nil)
}

// An approval raised during the request's turn reaches the client as a
// progress notification, is answered through the inbox, and the call then
// gets the answer of the turn that finished the work; a held turn likewise
// (RETRY answers the request, SKIP leaves it unanswered).
func TestMCPAskReportsApprovalsAndHolds(t *testing.T) { // issue 17, I4, P1, P5, H2, H3
	e := newEnv(t, false)
	freeze := e.createTool(t, "freeze", echoSource, map[string]any{"name": "freeze"})
	agent := e.createAction(t, servedAgent("guard", []any{map[string]any{"action": freeze.String(), "approval": "REQUIRED"}}, []any{
		map[string]any{"when": "Note from the responder: go on", "text": "Retried fine.", "toolCalls": []any{reportOpen}},
		map[string]any{"when": "hold me", "refusal": map[string]any{"category": "policy", "explanation": "not this"}},
		step(0, "", toolCall("freeze", map[string]any{"account": "a-1"})),
		step(1, "Frozen after approval.", reportOpen),
	}, nil))
	cs, progress := e.progressClient(t)

	done := goCall(cs, askParams("guard", "c-1", "freeze a-1", ""))
	approval := interruptOf(t, progress, "APPROVAL", "c-1")
	require.Equal(t, "freeze", approval["tool"])
	require.Equal(t, map[string]any{"account": "a-1"}, approval["input"])
	// The inbox lists it, as any approval.
	var inbox struct {
		Actions struct {
			Inbox struct {
				Nodes []struct{ InterruptID string }
			}
		}
	}
	e.gql(t, `query($a: UUID!) { actions { inbox(actionId: $a) { nodes { interruptId } } } }`, map[string]any{"a": agent}, &inbox)
	require.Len(t, inbox.Actions.Inbox.Nodes, 1)
	require.Equal(t, approval["interruptId"], inbox.Actions.Inbox.Nodes[0].InterruptID)
	e.respond(t, agent, "c-1", approval["interruptId"].(string), map[string]any{"approval": map[string]any{"decision": "APPROVE"}})
	out := <-done
	require.NoError(t, out.err)
	require.False(t, out.res.IsError, "%s", text(t, out.res))
	require.Equal(t, "Frozen after approval.", text(t, out.res))
	// The request's execution is the turn that finished it (turn 2, which
	// ran the approved call); turn 1 paused before it.
	ins := e.requestInputs(t, agent, "c-1")
	require.Equal(t, "REQUEST", ins[0].Kind)
	require.Equal(t, 1, *ins[0].Turn)
	require.Equal(t, out.res.Meta[mcp.MetaExecutionID], ins[0].Execution.ID)
	require.Equal(t, 1, *ins[0].Calls, "the approved freeze")

	// A refused turn is held: the client hears of the hold; RETRY with a
	// note runs the request again and answers it.
	done = goCall(cs, askParams("guard", "c-2", "hold me", ""))
	hold := interruptOf(t, progress, "HOLD", "c-2")
	require.Equal(t, "REFUSED", hold["cause"])
	select {
	case o := <-done:
		t.Fatalf("the call returned while its turn is held: %+v", o)
	default:
	}
	e.respond(t, agent, "c-2", hold["interruptId"].(string), map[string]any{"hold": map[string]any{"decision": "RETRY", "note": "go on"}})
	out = <-done
	require.NoError(t, out.err)
	require.False(t, out.res.IsError, "%s", text(t, out.res))
	require.Equal(t, "Retried fine.", text(t, out.res))
	ins = e.requestInputs(t, agent, "c-2")
	require.Equal(t, "RECEIVED", ins[0].Status, "the held turn received it")
	require.Equal(t, out.res.Meta[mcp.MetaExecutionID], ins[0].Execution.ID, "the retry answered it")

	// SKIP leaves the request without an answer, which the client is told.
	done = goCall(cs, askParams("guard", "c-3", "hold me", ""))
	hold = interruptOf(t, progress, "HOLD", "c-3")
	e.respond(t, agent, "c-3", hold["interruptId"].(string), map[string]any{"hold": map[string]any{"decision": "SKIP"}})
	out = <-done
	require.NoError(t, out.err)
	require.True(t, out.res.IsError)
	require.Equal(t, "REQUEST_SKIPPED", out.res.Meta[mcp.MetaCode])
	ins = e.requestInputs(t, agent, "c-3")
	require.Equal(t, "RECEIVED", ins[0].Status)
	require.Nil(t, ins[0].Execution, "a skipped request has no answering execution")
}

// A client that goes away loses nothing: its request was committed before
// it waited, its turn runs and commits once, and a call with the same key
// gets the answer (issue 17, T6).
func TestMCPAskSurvivesTheClientGoingAway(t *testing.T) {
	e := newSteppedEnv(t, false)
	agent := e.createAction(t, servedAgent("patient", nil, []any{step(0, "Here you are.", reportOpen)}, nil))
	cs, progress := e.progressClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := askParams("patient", "c-1", "take your time", "")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, p)
		done <- err
	}()
	// Delivered: the first progress notification says so.
	first := <-progress
	require.Contains(t, first.Message, "waiting for its turn")
	key := first.Meta[mcp.MetaRequestKey].(string)
	cancel()
	require.Error(t, <-done)

	ins := e.requestInputs(t, agent, "c-1")
	require.Len(t, ins, 1)
	require.Equal(t, "PENDING", ins[0].Status)
	e.step(t)
	ins = e.requestInputs(t, agent, "c-1")
	require.Equal(t, "CONSUMED", ins[0].Status)
	require.NotNil(t, ins[0].Execution)

	// Calling again with the key waits for nothing: the answer is there.
	r, err := cs.CallTool(t.Context(), askParams("patient", "c-1", "take your time", key))
	require.NoError(t, err)
	require.Equal(t, "Here you are.", text(t, r))
	require.Equal(t, ins[0].Execution.ID, r.Meta[mcp.MetaExecutionID])
	var turns struct {
		Actions struct {
			Action struct {
				Session struct {
					Turns struct{ Nodes []struct{ Number int } }
				}
			}
		}
	}
	e.gql(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "c-1") { turns { nodes { number } } } } } }`, map[string]any{"a": agent}, &turns)
	require.Len(t, turns.Actions.Action.Session.Turns.Nodes, 1, "the turn ran once")
}

package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// freezeSource is a Starlark tool that records the freeze it was asked for.
const freezeSource = `
def call(event):
    i = event["input"]
    ledger.put("frozen", i["account_id"], {"reason": i.get("reason", ""), "requested_by": i.get("requested_by", "")})
    return {"frozen": i["account_id"]}
`

// agentMonitor is an agent action over the monitor's triggers whose
// session id is "<account_id>-account", so the seed's approve and retry
// operations (which name session "3f0c9f8e-account") run verbatim. Its
// scripted model freezes the account (a gated tool, fixed input
// requested_by) on an ordinary entry, refuses on a suspicious one, and
// goes on once a responder's note says the transfer was reviewed.
func agentMonitor(toolID string) map[string]any {
	outcome := func(state map[string]any) map[string]any {
		return map[string]any{"name": "report_outcome", "input": map[string]any{"status": "OPEN", "state": state}}
	}
	return map[string]any{
		"name": "agent-monitor",
		"kind": "agent",
		"config": map[string]any{
			"provider": "scripted",
			"system":   "You watch accounts for fraud.",
			"tools": []any{map[string]any{"action": toolID, "approval": "REQUIRED",
				"input": map[string]any{"requested_by": "agent-monitor"}}},
			"script": []any{
				map[string]any{"step": 0, "when": "The transfer was reviewed", "toolCalls": []any{outcome(map[string]any{"reviewed": true})}},
				map[string]any{"step": 0, "when": "suspicious-transfer", "refusal": map[string]any{"category": "fraud", "explanation": "I cannot judge this transfer"}},
				map[string]any{"step": 0, "text": "Freezing the account.", "toolCalls": []any{map[string]any{"id": "call_freeze", "name": "freeze_account",
					"input": map[string]any{"account_id": "3f0c9f8e", "reason": "large entry", "requested_by": "the model"}}}},
				map[string]any{"step": 1, "toolCalls": []any{outcome(map[string]any{"frozen": true})}},
			},
		},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": `string(event.data.account_id) + "-account"`}}},
		},
		"session": map[string]any{
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"account_id": map[string]any{"type": "string"}},
				"required": []any{"account_id"}, "additionalProperties": false},
			"id":    `string(session.input.account_id) + "-account"`,
			"turns": map[string]any{"on": []any{"entry"}},
		},
	}
}

const agentSessionOp = `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") {
  status reason state
  approvals { interruptId status }
  holds { interruptId status }
  turns(first: 10) { nodes { number status inputs { kind identity status }
    checkpoint { status }
    execution { id status invocation {
      approvals { interruptId tool toolVersion input executionId status toolAction { actionId version } execution { id }
        response { decision reason responder command { kind } } }
      hold { interruptId cause category explanation turn status response { decision note responder } }
      transcript(first: 100) { nodes { kind data } } }
      children(first: 10) { nodes { action { definition { name } } status input } } } } } } } } }`

type agentTurn struct {
	Number     int
	Status     string
	Inputs     []struct{ Kind, Identity, Status string }
	Checkpoint *struct{ Status string }
	Execution  struct {
		ID         string
		Status     string
		Invocation struct {
			Approvals []struct {
				InterruptID, Tool, ExecutionID, Status string
				ToolVersion                            int
				Input                                  json.RawMessage
				ToolAction                             *struct {
					ActionID string
					Version  int
				}
				Execution *struct{ ID string }
				Response  *struct {
					Decision, Reason, Responder string
					Command                     struct{ Kind string }
				}
			}
			Hold *struct {
				InterruptID, Cause, Category, Explanation, Status string
				Turn                                              int
				Response                                          *struct{ Decision, Note, Responder string }
			}
			Transcript struct{ Nodes []struct{ Kind string } }
		}
		Children struct {
			Nodes []struct {
				Action struct{ Definition struct{ Name string } }
				Status string
				Input  json.RawMessage
			}
		}
	}
}

type agentSession struct {
	Status    string
	Reason    *string
	State     json.RawMessage
	Approvals []struct{ InterruptID, Status string }
	Holds     []struct{ InterruptID, Status string }
	Turns     struct{ Nodes []agentTurn }
}

func (e *env) agentSession(t testing.TB, actionID string) *agentSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *agentSession }
		}
	}
	e.ok(t, agentSessionOp, map[string]any{"a": actionID}, &out)
	require.NotNil(t, out.Actions.Action.Session)
	return out.Actions.Action.Session
}

// turnN returns turn n of a newest-first listing.
func (s *agentSession) turnN(t testing.TB, n int) agentTurn {
	t.Helper()
	for _, tu := range s.Turns.Nodes {
		if tu.Number == n {
			return tu
		}
	}
	require.FailNow(t, "no such turn", "turn %d", n)
	return agentTurn{}
}

// TestAgentApprovalAndHeldTurnEndToEnd walks issue 5's proof through
// GraphQL with the seed's operations verbatim: an agent pauses before a
// gated tool (P1), is approved with examples/approve.graphql (P5) and
// continues; a refused turn is held (H1, H2) and retried with
// examples/retry_held_turn.graphql (H3).
func TestAgentApprovalAndHeldTurnEndToEnd(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	toolID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account", "description": "Freeze an account.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"},
				"properties": map[string]any{"account_id": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"},
					"requested_by": map[string]any{"type": "string"}}}}}}, nil)
	actionID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": actionID, "input": agentMonitor(toolID)}, nil)

	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)

	// P1: the turn paused before the gated call.
	s := e.agentSession(t, actionID)
	require.Equal(t, "WAITING", s.Status)
	t1 := s.turnN(t, 1)
	require.EqualValues(t, "COMPLETED", t1.Status)
	require.Equal(t, "WAITING", t1.Checkpoint.Status)
	require.Len(t, t1.Execution.Invocation.Approvals, 1)
	ap := t1.Execution.Invocation.Approvals[0]
	require.Equal(t, "freeze_account", ap.Tool)
	require.Equal(t, 1, ap.ToolVersion)
	require.Equal(t, toolID, ap.ToolAction.ActionID)
	require.Equal(t, t1.Execution.ID, ap.ExecutionID)
	require.Equal(t, t1.Execution.ID, ap.Execution.ID)
	require.Equal(t, "PENDING", ap.Status)
	jsonEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, ap.Input)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`), "nothing ran yet")

	// P3: an entry while waiting stays pending.
	e.put(t, "entry", "e2", map[string]any{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}, "")
	e.step(t)
	require.Len(t, e.agentSession(t, actionID).Turns.Nodes, 1)

	// P5: the seed's Approve operation, verbatim.
	var approved struct {
		Actions struct {
			RespondToSession struct{ Identity, Kind, Status string }
		}
	}
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": actionID, "interruptId": ap.InterruptID}, &approved)
	require.Equal(t, "COMMAND", approved.Actions.RespondToSession.Kind)
	require.Equal(t, "PENDING", approved.Actions.RespondToSession.Status)
	require.Equal(t, "command/"+ap.InterruptID, approved.Actions.RespondToSession.Identity)
	// G1: the same answer again returns the first; another is refused.
	var repeated struct {
		Actions struct {
			RespondToSession struct{ Identity string }
		}
	}
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": actionID, "interruptId": ap.InterruptID}, &repeated)
	require.Equal(t, approved.Actions.RespondToSession.Identity, repeated.Actions.RespondToSession.Identity)
	r := e.do(t, `mutation($a: UUID!, $i: String!) { actions { respondToSession(actionId: $a, id: "3f0c9f8e-account", interruptId: $i,
		response: { approval: { decision: DENY, reason: "changed my mind" } }) { identity } } }`, map[string]any{"a": actionID, "i": ap.InterruptID})
	requireError(t, r, "ALREADY_ANSWERED", "interruptId")

	e.step(t)
	s = e.agentSession(t, actionID)
	t2 := s.turnN(t, 2)
	require.EqualValues(t, "COMPLETED", t2.Status)
	require.Len(t, t2.Inputs, 1, "the answer runs in a turn of its own")
	require.Equal(t, "COMMAND", t2.Inputs[0].Kind)
	require.Len(t, t2.Execution.Children.Nodes, 1, "the approved call ran as the turn's child")
	require.Equal(t, "freeze-account", t2.Execution.Children.Nodes[0].Action.Definition.Name)
	jsonEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, t2.Execution.Children.Nodes[0].Input)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen' AND value->>'requested_by' = 'agent-monitor'`))
	resp := s.turnN(t, 1).Execution.Invocation.Approvals[0].Response
	require.NotNil(t, resp)
	require.Equal(t, "APPROVE", resp.Decision)
	require.Equal(t, "Confirmed with the customer.", resp.Reason)
	require.Equal(t, "dev", resp.Responder, "the responder is the principal")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'action_session.responded'
		AND data->>'decision' = 'APPROVE' AND data->>'responder' = 'dev' AND data->>'reason' = 'Confirmed with the customer.'`))

	// The waiting entry is suspicious: turn 3 is refused and held.
	s = e.agentSession(t, actionID)
	t3 := s.turnN(t, 3)
	require.EqualValues(t, "HELD", t3.Status)
	require.Equal(t, "WAITING", s.Status)
	require.Contains(t, *s.Reason, "turn 3 is held")
	require.JSONEq(t, `{"frozen":true}`, string(s.State), "H2: state as turn 2 left it")
	hold := t3.Execution.Invocation.Hold
	require.NotNil(t, hold)
	require.Equal(t, "REFUSED", hold.Cause)
	require.Equal(t, "fraud", hold.Category)
	require.Equal(t, "I cannot judge this transfer", hold.Explanation)
	require.Equal(t, 3, hold.Turn)
	require.EqualValues(t, "HELD", t3.Execution.Status)
	require.NotEmpty(t, t3.Execution.Invocation.Transcript.Nodes, "H1: the held execution keeps its transcript")
	require.Equal(t, "RECEIVED", t3.Inputs[0].Status)

	// H3: the seed's Retry operation, verbatim.
	var retried struct {
		Actions struct {
			RespondToSession struct{ Identity, Status string }
		}
	}
	e.ok(t, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": actionID, "interruptId": hold.InterruptID}, &retried)
	require.Equal(t, "PENDING", retried.Actions.RespondToSession.Status)
	e.step(t)
	s = e.agentSession(t, actionID)
	require.Equal(t, "OPEN", s.Status)
	require.JSONEq(t, `{"reviewed":true}`, string(s.State))
	t4 := s.turnN(t, 4)
	require.EqualValues(t, "COMPLETED", t4.Status)
	require.Len(t, t4.Inputs, 1, "H3: the retry turn lists only the answer")
	require.Equal(t, "COMMAND", t4.Inputs[0].Kind)
	require.Equal(t, "RETRY", s.turnN(t, 3).Execution.Invocation.Hold.Response.Decision)
	require.Equal(t, "The transfer was reviewed; continue monitoring.", s.turnN(t, 3).Execution.Invocation.Hold.Response.Note)

	// Each hold is answered once (H5): the same answer again returns the
	// first (G1), a different one is refused.
	e.ok(t, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": actionID, "interruptId": hold.InterruptID}, nil)
	r = e.do(t, `mutation($a: UUID!, $i: String!) { actions { respondToSession(actionId: $a, id: "3f0c9f8e-account", interruptId: $i,
		response: { hold: { decision: SKIP } }) { identity } } }`, map[string]any{"a": actionID, "i": hold.InterruptID})
	requireError(t, r, "ALREADY_ANSWERED", "interruptId")
}

// P5, H5 with authorisation: responding needs RESPOND on the action; the
// responder recorded is the authenticated principal.
func TestAgentRespondNeedsRespond(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	toolID := uuid.NewString()
	e.allowed(t, adminToken, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account"}}})
	actionID := uuid.NewString()
	e.allowed(t, adminToken, createOp, map[string]any{"id": actionID, "input": agentMonitor(toolID)})
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)
	s := e.agentSession(t, actionID)
	ap := s.turnN(t, 1).Execution.Invocation.Approvals[0]

	_, reader := e.token(t, "reader", pol("READ", "financial.Action.document"))
	_, responder := e.token(t, "carol", pol("RESPOND", "financial.Action.document:"+actionID))
	vars := map[string]any{"actionId": actionID, "interruptId": ap.InterruptID}
	e.forbidden(t, reader, example(t, "approve.graphql"), vars)
	e.allowed(t, responder, example(t, "approve.graphql"), vars)
	e.step(t)
	s = e.agentSession(t, actionID)
	require.Equal(t, "carol", s.turnN(t, 1).Execution.Invocation.Approvals[0].Response.Responder)
}

// Bad answers get a clear error naming the field as the client wrote it.
func TestRespondBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	const op = `mutation($a: UUID!, $id: String!, $i: String!, $r: SessionResponseInput!) { actions {
	  respondToSession(actionId: $a, id: $id, interruptId: $i, response: $r) { identity } } }`
	vars := func(id string, r map[string]any) map[string]any {
		return map[string]any{"a": uuid.NewString(), "id": id, "i": uuid.NewString(), "r": r}
	}
	for _, c := range []struct {
		id          string
		r           map[string]any
		code, field string
	}{
		{"s", map[string]any{"approval": map[string]any{"decision": "APPROVE", "reason": "a\x00b"}}, "BAD_USER_INPUT", "response.approval.reason"},
		{"s", map[string]any{"hold": map[string]any{"decision": "RETRY", "note": "a\x00b"}}, "BAD_USER_INPUT", "response.hold.note"},
		{"s", map[string]any{"approval": map[string]any{"decision": "APPROVE", "input": map[string]any{"k": "a\x00b"}}}, "INVALID_JSON", "response.approval.input"},
		{"s", map[string]any{}, "BAD_USER_INPUT", "response"},
		{string(make([]byte, 600)), map[string]any{"hold": map[string]any{"decision": "SKIP"}}, "BAD_USER_INPUT", "id"},
	} {
		if c.id != "s" {
			c.id = strings.Repeat("x", 600)
		}
		requireError(t, e.do(t, op, vars(c.id, c.r)), c.code, c.field)
	}
}

// A3, issue 5: every problem of an agent's config is reported at once,
// each with its field; tool references are checked when the agent is made.
func TestAgentConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	r := e.do(t, createOp, map[string]any{"id": uuid.NewString(), "input": map[string]any{
		"name": "bad-agent", "kind": "agent",
		"config": map[string]any{"provider": "scripted", "script": []any{map[string]any{"text": "x"}}, "maxSteps": 0, "attempts": 0,
			"tools": []any{map[string]any{"action": uuid.NewString(), "approval": "MAYBE"}}},
		"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
			"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}}},
		"session": map[string]any{"id": "string(session.input.account_id)"},
	}})
	var fields []string
	for _, ge := range r.Errors {
		require.Equal(t, "INVALID_CONFIG", ge.code())
		fields = append(fields, ge.field())
	}
	require.ElementsMatch(t, []string{"input.config.maxSteps", "input.config.attempts", "input.config.tools[0].approval",
		"input.config.tools[0].action"}, fields)
}

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/examples"
)

// The seed's answers to an approval and to a held turn, byte for byte
// (SPEC I2: they run unchanged). Both name session "3f0c9f8e-account".
var (
	approveOp       = examples.Approve
	retryHeldTurnOp = examples.RetryHeldTurn
)

// The account of the agent part: the seed's approve and retry operations
// hard-code its session id, so every run uses it; sessions are per action
// and each run creates a new agent action, so runs do not collide.
const (
	agentAccount   = "3f0c9f8e"
	agentSessionID = agentAccount + "-account"
)

// The operations of the agent walkthrough in docs/agents.md ("Walkthrough:
// an approval, then a held turn"), named so the demo can send operationName.
const (
	createFreezeToolOp = `mutation CreateFreezeTool($id: UUID!, $source: String!) { actions { createAction(id: $id, input: {
  name: "freeze-account", kind: "starlark", source: $source
  tool: { name: "freeze_account", description: "Freeze an account.",
          inputSchema: { type: "object", required: ["account_id"] } }
}) { actionId } } }`

	createAgentMonitorOp = `mutation CreateAgentMonitor($id: UUID!, $tool: String!) { actions { createAction(id: $id, input: {
  name: "agent-monitor", kind: "agent"
  config: {
    provider: "scripted", system: "You watch accounts for fraud."
    tools: [{ action: $tool, approval: "REQUIRED", input: { requested_by: "agent-monitor" } }]
    script: [
      { step: 0, when: "The transfer was reviewed",
        toolCalls: [{ name: "report_outcome", input: { status: "OPEN", state: { reviewed: true } } }] }
      { step: 0, when: "suspicious-transfer", refusal: { category: "fraud", explanation: "I cannot judge this transfer" } }
      { step: 0, toolCalls: [{ name: "freeze_account", input: { account_id: "3f0c9f8e", reason: "large entry" } }] }
      { step: 1, toolCalls: [{ name: "report_outcome", input: { status: "OPEN", state: { frozen: true } } }] }
    ]
  }
  triggers: [
    { name: "opened", event: "event.type == \"account.inserted\""
      session: { start: { input: { account_id: "string(event.data.account_id)" } } } }
    { name: "entry", event: "event.type == \"entry.inserted\""
      session: { resume: { id: "string(event.data.account_id) + \"-account\"" } } }
  ]
  session: { id: "string(session.input.account_id) + \"-account\"", turns: { on: ["entry"] } }
}) { actionId } } }`

	// freezeSource is the walkthrough's Starlark tool: it records the freeze.
	freezeSource = `def call(event):
    i = event["input"]
    ledger.put("frozen", i["account_id"], {"reason": i.get("reason", ""), "requested_by": i.get("requested_by", "")})
    return {"frozen": i["account_id"]}
`

	agentPutOp = `mutation AgentPut($namespace: String!, $key: String!, $value: JSON!, $idempotencyKey: String) {
  ledger { putValue(namespace: $namespace, key: $key, value: $value, idempotencyKey: $idempotencyKey) { event { eventType position } } }
}`
	frozenOp = `query Frozen($key: String!) { ledger { value(namespace: "frozen", key: $key) { value version } } }`

	agentSessionOp = `query AgentSession($actionId: UUID!, $id: String!) { actions { action(id: $actionId) { session(id: $id) {
  status reason state
  turns(first: 10) { nodes { number status inputs { kind status }
    checkpoint { status state }
    execution { id status invocation {
      approvals { interruptId tool toolVersion input status toolAction { actionId } response { decision reason responder } }
      hold { interruptId cause category explanation turn status response { decision note responder } } }
      children(first: 10) { nodes { action { definition { name } } status input } } } } } } } } }`
)

// agentSession is the agent part's session as AgentSession reads it.
type agentSession struct {
	Status string
	Reason *string
	State  json.RawMessage
	Turns  struct{ Nodes []agentTurn } // newest first
}

type agentTurn struct {
	Number     int
	Status     string
	Inputs     []struct{ Kind, Status string }
	Checkpoint *struct {
		Status string
		State  json.RawMessage
	}
	Execution struct {
		ID         string
		Status     string
		Invocation struct {
			Approvals []struct {
				InterruptID, Tool, Status string
				ToolVersion               int
				Input                     json.RawMessage
				ToolAction                *struct{ ActionID string }
				Response                  *struct{ Decision, Reason, Responder string }
			}
			Hold *struct {
				InterruptID, Cause, Category, Explanation, Status string
				Turn                                              int
				Response                                          *struct{ Decision, Note, Responder string }
			}
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

// turn returns turn n, or nil.
func (s *agentSession) turn(n int) *agentTurn {
	for i := range s.Turns.Nodes {
		if s.Turns.Nodes[i].Number == n {
			return &s.Turns.Nodes[i]
		}
	}
	return nil
}

// settled reports whether turn n exists and is no longer running.
func (s *agentSession) settled(n int) bool {
	t := s.turn(n)
	return t != nil && t.Status != "RUNNING"
}

// caughtUp reports whether turn n has settled and the session, as read,
// is the one the turn left (its checkpoint's status and state). The
// session and its turns are read by separate statements of one request,
// so a read can see the turn settled and the session as it was while the
// turn ran.
func (s *agentSession) caughtUp(n int) bool {
	if !s.settled(n) {
		return false
	}
	c := s.turn(n).Checkpoint
	return c == nil || (c.Status == s.Status && jsonEqual(c.State, string(s.State)))
}

// agentDemo runs the walkthrough "an approval, then a held turn" of docs/agents.md
// (SPEC P1, P3, P5, H1-H3) against the demo's app and prints each step.
// Deviations from the walkthrough are returned as problems; an error means
// a step could not be taken at all (a request failed, a wait timed out).
type agentDemo struct {
	gql     gqlClient
	out     io.Writer
	timeout time.Duration

	toolID, actionID uuid.UUID
	problems         []string
}

func (d *agentDemo) problemf(format string, args ...any) {
	d.problems = append(d.problems, fmt.Sprintf(format, args...))
}

// run walks the scenario; it stops early, with the problems so far, when
// a deviation leaves nothing to answer (no approval request, no hold).
func (d *agentDemo) run(ctx context.Context) ([]string, error) {
	began := time.Now()
	d.toolID, d.actionID = uuid.New(), uuid.New()
	if err := d.gql.do(ctx, "CreateFreezeTool", createFreezeToolOp, map[string]any{"id": d.toolID, "source": freezeSource}, &struct{}{}); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "created tool freeze-account %s (Starlark: writes frozen/<account_id>)\n", d.toolID)
	if err := d.gql.do(ctx, "CreateAgentMonitor", createAgentMonitorOp, map[string]any{"id": d.actionID, "tool": d.toolID.String()}, &struct{}{}); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "created agent agent-monitor %s (scripted model; freeze_account needs approval; session id <account_id>-account)\n", d.actionID)

	frozenBefore, _, err := d.frozen(ctx)
	if err != nil {
		return nil, err
	}
	acctPos, err := d.write(ctx, "account", agentAccount, map[string]any{"account_id": agentAccount})
	if err != nil {
		return nil, err
	}
	e1Pos, err := d.write(ctx, "entry", "e1", map[string]any{"account_id": agentAccount, "amount": 12000})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "opened account %s (event position %s) and wrote entry e1, amount 12000 (position %s)\n", agentAccount, acctPos, e1Pos)

	interruptID, err := d.awaitApproval(ctx)
	if err != nil || interruptID == "" {
		return d.problems, err
	}
	if err := d.respond(ctx, "Approve", approveOp, "approve.graphql", interruptID); err != nil {
		return nil, err
	}
	if err := d.awaitFrozen(ctx, frozenBefore); err != nil {
		return nil, err
	}

	e2Pos, err := d.write(ctx, "entry", "e2", map[string]any{"account_id": agentAccount, "amount": 5, "note": "suspicious-transfer"})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "wrote entry e2, amount 5, note \"suspicious-transfer\" (position %s)\n", e2Pos)
	holdID, err := d.awaitHold(ctx)
	if err != nil || holdID == "" {
		return d.problems, err
	}
	if err := d.respond(ctx, "Retry", retryHeldTurnOp, "retry_held_turn.graphql", holdID); err != nil {
		return nil, err
	}
	s, err := d.awaitRetried(ctx)
	if err != nil {
		return nil, err
	}
	d.printTurns(s)
	if len(d.problems) == 0 {
		fmt.Fprintf(d.out, "demo (agent): approval and held turn, %d turns in %.1fs\n", len(s.Turns.Nodes), time.Since(began).Seconds())
	}
	return d.problems, nil
}

// awaitApproval waits for turn 1 to pause before the gated call (P1) and
// prints the request; it returns the interruptId, empty when there is none.
func (d *agentDemo) awaitApproval(ctx context.Context) (string, error) {
	s, err := d.await(ctx, "the session to wait for approval", func(s *agentSession) bool {
		return s.caughtUp(1)
	})
	if err != nil {
		return "", err
	}
	t1 := s.turn(1)
	if t1 == nil || t1.Status != "COMPLETED" || t1.Checkpoint == nil || t1.Checkpoint.Status != "WAITING" {
		d.problemf("turn 1 is %s, want COMPLETED with the session WAITING (P1)", describeTurn(t1))
	}
	fmt.Fprintf(d.out, "turn 1 paused before a gated call: session %s (%s)\n", s.Status, deref(s.Reason))
	if t1 == nil || len(t1.Execution.Invocation.Approvals) != 1 {
		d.problemf("turn 1 lists %d approval requests, want 1", approvalsOf(t1))
		return "", nil
	}
	ap := t1.Execution.Invocation.Approvals[0]
	fmt.Fprintf(d.out, "  approval request: tool %s v%d, input %s, interruptId %s\n", ap.Tool, ap.ToolVersion, compact(ap.Input), ap.InterruptID)
	if ap.Tool != "freeze_account" || ap.Status != "PENDING" || ap.ToolAction == nil || ap.ToolAction.ActionID != d.toolID.String() {
		d.problemf("approval request is for %s (%s, tool action %v), want a PENDING call of freeze_account, action %s", ap.Tool, ap.Status, ap.ToolAction, d.toolID)
	}
	if want := `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`; !jsonEqual(ap.Input, want) {
		d.problemf("approval request input %s, want %s (the fixed input applied)", compact(ap.Input), want)
	}
	return ap.InterruptID, nil
}

// respond runs one of the seed's answers verbatim and prints the COMMAND
// input it returns (P5, H3).
func (d *agentDemo) respond(ctx context.Context, op, query, file, interruptID string) error {
	var resp struct {
		Actions struct {
			RespondToSession *struct{ Identity, Kind, Status string }
		}
	}
	if err := d.gql.do(ctx, op, query, map[string]any{"actionId": d.actionID, "interruptId": interruptID}, &resp); err != nil {
		return err
	}
	r := resp.Actions.RespondToSession
	if r == nil {
		d.problemf("%s returned no input", file)
		return nil
	}
	kind := r.Kind
	if kind == "" {
		kind = "COMMAND" // retry_held_turn.graphql does not select kind
	}
	fmt.Fprintf(d.out, "answered with %s: %s input %s, %s\n", file, kind, r.Identity, r.Status)
	if r.Identity != "command/"+interruptID || kind != "COMMAND" || r.Status != "PENDING" {
		d.problemf("%s returned %s input %s (%s), want PENDING COMMAND input command/%s", file, kind, r.Identity, r.Status, interruptID)
	}
	return nil
}

// awaitFrozen waits for turn 2, which takes the approval alone and runs the
// approved call as its child, and prints the state and the frozen record.
func (d *agentDemo) awaitFrozen(ctx context.Context, versionBefore int) error {
	s, err := d.await(ctx, "turn 2 to commit", func(s *agentSession) bool { return s.caughtUp(2) })
	if err != nil {
		return err
	}
	t2 := s.turn(2)
	fmt.Fprintf(d.out, "turn 2 %s, took %s, ran %s: session %s, state %s\n", t2.Status, inputKinds(t2), childNames(t2), s.Status, compact(s.State))
	if t2.Status != "COMPLETED" || inputKinds(t2) != "[COMMAND]" {
		d.problemf("turn 2 is %s, want COMPLETED taking the approval's COMMAND input alone", describeTurn(t2))
	}
	if childNames(t2) != "[freeze-account SUCCEEDED]" {
		d.problemf("turn 2 ran %s, want the approved call of freeze-account as its one child", childNames(t2))
	}
	if s.Status != "OPEN" || !jsonEqual(s.State, `{"frozen":true}`) {
		d.problemf("after turn 2 the session is %s with state %s, want OPEN with {\"frozen\":true}", s.Status, compact(s.State))
	}
	if t1 := s.turn(1); t1 != nil && len(t1.Execution.Invocation.Approvals) == 1 {
		r := t1.Execution.Invocation.Approvals[0].Response
		if r == nil || r.Decision != "APPROVE" || r.Responder != "dev" || r.Reason != "Confirmed with the customer." {
			d.problemf("turn 1's approval response is %+v, want APPROVE by dev with the seed's reason", r)
		}
	}
	version, value, err := d.frozen(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  frozen/%s = %s (version %d)\n", agentAccount, compact(value), version)
	if version != versionBefore+1 || !jsonEqual(value, `{"reason":"large entry","requested_by":"agent-monitor"}`) {
		d.problemf("frozen/%s is %s at version %d, want one new write by agent-monitor (version %d)", agentAccount, compact(value), version, versionBefore+1)
	}
	return nil
}

// awaitHold waits for turn 3, which the model refuses, to be held (H1, H2)
// and prints the hold; it returns its interruptId, empty when there is none.
func (d *agentDemo) awaitHold(ctx context.Context) (string, error) {
	// The session and its turns are read by separate statements of one
	// request, so a read can see the turn settled and the session as it
	// was while the turn ran: wait until the session has moved on too.
	s, err := d.await(ctx, "turn 3 to be held", func(s *agentSession) bool { return s.settled(3) && s.Status != "OPEN" })
	if err != nil {
		return "", err
	}
	t3 := s.turn(3)
	fmt.Fprintf(d.out, "turn 3 %s: session %s (%s), state still %s\n", t3.Status, s.Status, deref(s.Reason), compact(s.State))
	if t3.Status != "HELD" || s.Status != "WAITING" || !strings.Contains(deref(s.Reason), "turn 3 is held") {
		d.problemf("turn 3 is %s with the session %s (%s), want HELD with the session WAITING", t3.Status, s.Status, deref(s.Reason))
	}
	if !jsonEqual(s.State, `{"frozen":true}`) {
		d.problemf("state after the held turn is %s, want {\"frozen\":true} as turn 2 left it (H2)", compact(s.State))
	}
	h := t3.Execution.Invocation.Hold
	if h == nil {
		d.problemf("turn 3 has no hold")
		return "", nil
	}
	fmt.Fprintf(d.out, "  hold: cause %s, category %s, explanation %q, interruptId %s\n", h.Cause, h.Category, h.Explanation, h.InterruptID)
	if h.Cause != "REFUSED" || h.Category != "fraud" || h.Explanation != "I cannot judge this transfer" || h.Turn != 3 {
		d.problemf("hold is %s/%s/%q for turn %d, want REFUSED/fraud/\"I cannot judge this transfer\" for turn 3", h.Cause, h.Category, h.Explanation, h.Turn)
	}
	return h.InterruptID, nil
}

// awaitRetried waits for turn 4, the retry of the held turn (H3), and
// prints the final state.
func (d *agentDemo) awaitRetried(ctx context.Context) (*agentSession, error) {
	s, err := d.await(ctx, "the retry to commit", func(s *agentSession) bool { return s.caughtUp(4) })
	if err != nil {
		return nil, err
	}
	t4 := s.turn(4)
	fmt.Fprintf(d.out, "turn 4 %s, took %s: session %s, state %s\n", t4.Status, inputKinds(t4), s.Status, compact(s.State))
	if t4.Status != "COMPLETED" || inputKinds(t4) != "[COMMAND]" {
		d.problemf("turn 4 is %s, want COMPLETED listing only the retry's COMMAND input (H3)", describeTurn(t4))
	}
	if s.Status != "OPEN" || !jsonEqual(s.State, `{"reviewed":true}`) {
		d.problemf("after the retry the session is %s with state %s, want OPEN with {\"reviewed\":true}", s.Status, compact(s.State))
	}
	if t3 := s.turn(3); t3 != nil && t3.Execution.Invocation.Hold != nil {
		r := t3.Execution.Invocation.Hold.Response
		if r == nil || r.Decision != "RETRY" || r.Note != "The transfer was reviewed; continue monitoring." {
			d.problemf("turn 3's hold response is %+v, want RETRY with the seed's note", r)
		}
	}
	return s, nil
}

// printTurns prints the session's turns, oldest first.
func (d *agentDemo) printTurns(s *agentSession) {
	fmt.Fprintf(d.out, "session %s turns:\n", agentSessionID)
	for i := len(s.Turns.Nodes) - 1; i >= 0; i-- {
		t := &s.Turns.Nodes[i]
		fmt.Fprintf(d.out, "  turn %d  %-9s  inputs %s\n", t.Number, t.Status, inputKinds(t))
	}
	if len(s.Turns.Nodes) != 4 {
		d.problemf("the session has %d turns, want 4", len(s.Turns.Nodes))
	}
}

// await polls the agent's session every 100ms until done holds, the
// session ends (it never should here) or d.timeout passes.
func (d *agentDemo) await(ctx context.Context, what string, done func(*agentSession) bool) (*agentSession, error) {
	deadline := time.Now().Add(d.timeout)
	for {
		var resp struct {
			Actions struct {
				Action *struct{ Session *agentSession }
			}
		}
		if err := d.gql.do(ctx, "AgentSession", agentSessionOp, map[string]any{"actionId": d.actionID, "id": agentSessionID}, &resp); err != nil {
			return nil, err
		}
		if resp.Actions.Action == nil {
			return nil, fmt.Errorf("demo: agent action %s not found", d.actionID)
		}
		if s := resp.Actions.Action.Session; s != nil {
			if done(s) {
				return s, nil
			}
			if s.Status != "OPEN" && s.Status != "WAITING" {
				return nil, fmt.Errorf("demo: waiting for %s: session %s is %s (%s)", what, agentSessionID, s.Status, deref(s.Reason))
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("demo: waited %s for %s", d.timeout, what)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// write puts a record as the walkthrough does and returns its event's
// position. On a database an earlier run used, the key exists and the
// write appends <namespace>.updated, which the agent does not watch; the
// record is then written again under a key of this run's own (the agent
// reads the account from the value, not the key).
func (d *agentDemo) write(ctx context.Context, ns, key string, value map[string]any) (string, error) {
	ev, err := d.put(ctx, ns, key, value)
	if err != nil || ev.EventType == ns+".inserted" {
		return ev.Position, err
	}
	runKey := key + "-" + d.actionID.String()[:8]
	fmt.Fprintf(d.out, "(%s/%s exists from an earlier run: writing %s/%s instead)\n", ns, key, ns, runKey)
	ev, err = d.put(ctx, ns, runKey, value)
	if err == nil && ev.EventType != ns+".inserted" {
		err = fmt.Errorf("demo: writing %s/%s appended %s, want %s.inserted", ns, runKey, ev.EventType, ns)
	}
	return ev.Position, err
}

type agentEvent struct{ EventType, Position string }

func (d *agentDemo) put(ctx context.Context, ns, key string, value map[string]any) (agentEvent, error) {
	var resp struct {
		Ledger struct {
			PutValue struct{ Event agentEvent }
		}
	}
	err := d.gql.do(ctx, "AgentPut", agentPutOp, map[string]any{"namespace": ns, "key": key, "value": value,
		"idempotencyKey": fmt.Sprintf("demo-agent/%s/%s/%s", d.actionID, ns, key)}, &resp)
	return resp.Ledger.PutValue.Event, err
}

// frozen reads frozen/<account>: its version (0: none) and value.
func (d *agentDemo) frozen(ctx context.Context) (int, json.RawMessage, error) {
	var resp struct {
		Ledger struct {
			Value *struct {
				Value   json.RawMessage
				Version int
			}
		}
	}
	if err := d.gql.do(ctx, "Frozen", frozenOp, map[string]any{"key": agentAccount}, &resp); err != nil {
		return 0, nil, err
	}
	if resp.Ledger.Value == nil {
		return 0, nil, nil
	}
	return resp.Ledger.Value.Version, resp.Ledger.Value.Value, nil
}

func inputKinds(t *agentTurn) string {
	kinds := make([]string, len(t.Inputs))
	for i, in := range t.Inputs {
		kinds[i] = in.Kind
	}
	return "[" + strings.Join(kinds, " ") + "]"
}

func childNames(t *agentTurn) string {
	names := make([]string, len(t.Execution.Children.Nodes))
	for i, c := range t.Execution.Children.Nodes {
		names[i] = c.Action.Definition.Name + " " + c.Status
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func describeTurn(t *agentTurn) string {
	if t == nil {
		return "missing"
	}
	cp := "none"
	if t.Checkpoint != nil {
		cp = t.Checkpoint.Status
	}
	return fmt.Sprintf("%s (inputs %s, checkpoint %s)", t.Status, inputKinds(t), cp)
}

func approvalsOf(t *agentTurn) int {
	if t == nil {
		return 0
	}
	return len(t.Execution.Invocation.Approvals)
}

// jsonEqual compares a JSON value with want as values, not bytes.
func jsonEqual(got json.RawMessage, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}

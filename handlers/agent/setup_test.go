package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

var (
	lookupID  = uuid.MustParse("11111111-1111-4111-8111-111111111111") // a plain tool
	sendID    = uuid.MustParse("22222222-2222-4222-8222-222222222222") // a tool agents gate
	brokenID  = uuid.MustParse("33333333-3333-4333-8333-333333333333") // inactive
	notToolID = uuid.MustParse("44444444-4444-4444-8444-444444444444") // an action without a tool block
	testNow   = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
)

// fakeDir is a ToolDirectory over a map, with the server's messages.
type fakeDir struct {
	tools  map[uuid.UUID]*ToolInfo
	status map[uuid.UUID]string // a tool's status when not ACTIVE
	err    error                // returned for every lookup when set
}

func (d *fakeDir) Tool(_ context.Context, id uuid.UUID) (*ToolInfo, error) {
	if d.err != nil {
		return nil, d.err
	}
	if id == brokenID {
		return nil, fault.New(fault.ActionInactive, "", "the tool action %s is DISABLED", id)
	}
	if s := d.status[id]; s != "" {
		return nil, fault.New(fault.ActionInactive, "", "the tool action %s is %s", id, s)
	}
	if id == notToolID {
		return nil, fault.New(fault.NotATool, "", "action %q (%s) is not a tool", "monitor", id)
	}
	t, ok := d.tools[id]
	if !ok {
		return nil, fault.New(fault.NotFound, "", "no tool action %s", id)
	}
	return t, nil
}

// call is one Env.CallTool.
type call struct {
	Action string
	Input  string
}

// fakeEnv is a turns.Env whose tools are Go functions by action id.
type fakeEnv struct {
	mu    sync.Mutex
	calls []call
	tools map[string]func(input jsonvalue.Value) (jsonvalue.Value, error)
	// denied are the tools MayCall refuses.
	denied map[string]bool
}

func (e *fakeEnv) CallApprovedTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	return e.CallTool(ctx, actionID, input)
}

func (e *fakeEnv) CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.calls = append(e.calls, call{Action: actionID, Input: string(input)})
	f := e.tools[actionID]
	e.mu.Unlock()
	if f == nil {
		return nil, fault.New(fault.NotFound, "", "no tool %s", actionID)
	}
	return f(input)
}

// MayCall allows every tool but those in denied.
func (e *fakeEnv) MayCall(_ context.Context, actionID string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.denied[actionID], nil
}

func (e *fakeEnv) recorded() []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]call(nil), e.calls...)
}

func (e *fakeEnv) LedgerGet(context.Context, string, string) (jsonvalue.Value, bool, error) {
	return nil, false, errors.New("not in these tests")
}

func (e *fakeEnv) LedgerPut(context.Context, string, string, jsonvalue.Value) (int64, error) {
	return 0, errors.New("not in these tests")
}

func (e *fakeEnv) Session(context.Context, string, string) (*turns.SessionView, error) {
	return nil, errors.New("not in these tests")
}

func (e *fakeEnv) Now() time.Time { return testNow }

// entry is a transcript entry as the test sees it.
type entry struct {
	Kind string
	Data map[string]any
}

// fakeRec collects transcript entries.
type fakeRec struct {
	mu      sync.Mutex
	entries []entry
}

func (r *fakeRec) Add(kind string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, entry{Kind: kind, Data: m})
}

func (r *fakeRec) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.Kind
	}
	return out
}

func (r *fakeRec) of(kind string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, e := range r.entries {
		if e.Kind == kind {
			out = append(out, e.Data)
		}
	}
	return out
}

// spy records the requests a provider gets and answers through next.
type spy struct {
	mu   sync.Mutex
	reqs []*provider.Request
	next provider.Provider
}

func (s *spy) Complete(ctx context.Context, req *provider.Request) (*provider.Reply, error) {
	s.mu.Lock()
	cp := *req
	cp.Messages = append([]provider.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, &cp)
	s.mu.Unlock()
	return s.next.Complete(ctx, req)
}

func (s *spy) requests() []*provider.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*provider.Request(nil), s.reqs...)
}

// bundle is what a test works with.
type bundle struct {
	env  *fakeEnv
	dir  *fakeDir
	opts Options
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dir := &fakeDir{tools: map[uuid.UUID]*ToolInfo{
		lookupID: {ActionID: lookupID, Version: 3, Name: "lookup", Description: "Look an account up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		sendID:   {ActionID: sendID, Version: 7, Name: "send_money", Description: "Send money."},
	}, status: map[uuid.UUID]string{}}
	env := &fakeEnv{tools: map[string]func(jsonvalue.Value) (jsonvalue.Value, error){
		lookupID.String(): func(in jsonvalue.Value) (jsonvalue.Value, error) {
			return jsonvalue.Value(`{"found":true,"input":` + string(in) + `}`), nil
		},
		sendID.String(): func(in jsonvalue.Value) (jsonvalue.Value, error) {
			return jsonvalue.Value(`{"sent":` + string(in) + `}`), nil
		},
	}}
	return &bundle{env: env, dir: dir, opts: Options{Tools: dir, Now: func() time.Time { return testNow }}}
}

// handler builds the kind's handler for cfg (a value encoded as JSON).
func (b *bundle) handler(t *testing.T, cfg any) *handler {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	h, err := Kind(b.opts).New(turns.Spec{Config: raw})
	require.NoError(t, err)
	return h.(*handler)
}

// request is turn 1 of session "acct-1" with one EVENT input.
func (b *bundle) request() *turns.Request {
	return &turns.Request{
		ActionID:    uuid.MustParse("99999999-9999-4999-8999-999999999999"),
		Version:     1,
		SessionID:   "acct-1",
		Input:       jsonvalue.Value(`{"account_id":"acct-1"}`),
		State:       jsonvalue.Value(`{"seen":0}`),
		Turn:        1,
		ExecutionID: uuid.MustParse("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"),
		Attempt:     1,
		Env:         b.env,
		Inputs: []turns.InputView{{
			Identity: "ev-1", Kind: "EVENT", Sequence: 1, Triggers: []string{"entry"},
			Event: &turns.EventView{ID: uuid.MustParse("bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"), Type: "entry.inserted", Data: jsonvalue.Value(`{"amount":12}`), CommitTime: testNow, Position: 5},
		}},
	}
}

// run runs one turn and checks that every JSON value of the outcome can
// be stored.
func run(t *testing.T, h *handler, req *turns.Request) (*turns.Outcome, *fakeRec, error) {
	t.Helper()
	rec := &fakeRec{}
	out, err := h.run(context.Background(), req, rec)
	if out != nil {
		for name, v := range map[string]jsonvalue.Value{"state": out.State, "output": out.Output, "resume": out.Resume} {
			if len(v) > 0 {
				require.NoError(t, jsonvalue.Check(v, name))
			}
		}
		for _, a := range out.Approvals {
			require.NoError(t, jsonvalue.Check(a.Input, "approval.input"))
		}
	}
	return out, rec, err
}

// approval is a COMMAND input answering an approval request (P5).
func approval(interruptID uuid.UUID, decision, reason string, input string) turns.InputView {
	c := &turns.Command{InterruptID: interruptID.String(), Kind: commandApproval, Decision: session.Decision(decision), Reason: reason, Responder: "alice"}
	if input != "" {
		c.Input = jsonvalue.Value(input)
	}
	return turns.InputView{Identity: "cmd-" + interruptID.String()[:8] + "-" + decision, Kind: "COMMAND", Sequence: 9, Command: c}
}

func retry(note string) turns.InputView {
	return turns.InputView{Identity: "cmd-retry", Kind: "COMMAND", Sequence: 10, Command: &turns.Command{InterruptID: uuid.NewString(), Kind: commandHold, Decision: decisionRetry, Note: note, Responder: "bob"}}
}

// step is a scripted reply for the step'th model call.
func step(n int, reply map[string]any) map[string]any {
	reply["step"] = n
	return reply
}

func callTo(name string, input any) map[string]any {
	return map[string]any{"name": name, "input": input}
}

func report(status, reason string, state any) map[string]any {
	in := map[string]any{"status": status}
	if reason != "" {
		in["reason"] = reason
	}
	if state != nil {
		in["state"] = state
	}
	return callTo(toolReportOutcome, in)
}

func scripted(tools []any, script ...any) map[string]any {
	cfg := map[string]any{"provider": "scripted", "script": script}
	if tools != nil {
		cfg["tools"] = tools
	}
	return cfg
}

func ref(id uuid.UUID, extra map[string]any) map[string]any {
	m := map[string]any{"action": id.String()}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func toolResults(rec *fakeRec) []string {
	var out []string
	for _, d := range rec.of("tool_result") {
		out = append(out, fmt.Sprintf("%v %v", d["tool"], d["content"]))
	}
	return out
}

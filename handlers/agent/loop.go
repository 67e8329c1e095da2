package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/mcp/remote"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// MaxResult is the most bytes of a tool result the model gets; longer
// results are cut and marked.
const MaxResult = 32 << 10

// maxReason is the longest reason an outcome may carry (T5).
const maxReason = 1000

// Statuses a turn reports.
const (
	statusOpen      = "OPEN"
	statusCompleted = "COMPLETED"
	statusFailed    = "FAILED"
	statusWaiting   = "WAITING"
)

// Command kinds and decisions (P5, H3).
const (
	commandApproval = "APPROVAL"
	commandHold     = "HOLD"
	decisionApprove = "APPROVE"
	decisionDeny    = "DENY"
	decisionRetry   = "RETRY"
)

// recorder takes transcript entries (a *turns.Transcript).
type recorder interface {
	Add(kind string, data any)
}

type discard struct{}

func (discard) Add(string, any) {}

// tool is a resolved tool reference.
type tool struct {
	ref   ToolRef
	index int // in config.tools
	info  *ToolInfo
	name  string // as the model sees it
}

// loop is one turn's conversation.
type loop struct {
	h     *handler
	req   *turns.Request
	rec   recorder
	tools map[string]*tool // by model-facing name
	names []string         // model-facing names of config.tools, in order
	// remote are the tools of config.mcpServers by model-facing name, in
	// order in remoteNames; sessions the turn's connections (issue 17).
	remote      map[string]*remoteTool
	remoteNames []string
	sessions    []*remote.Session
	specs       []provider.ToolSpec
	allowed     []string // statuses report_outcome offers (E2)

	msgs   []provider.Message
	steps  int // model calls
	calls  int // tool calls made
	usage  provider.Usage
	text   string // the model's latest text
	nudged bool
	// replayed is the next recorded reply a replay gives (T9); see
	// turns.RecordedReplies.
	replayed int
}

// newLoop resolves the tools (T7: a reference that cannot be resolved
// fails the attempt for good; a transient directory error is retried).
func (h *handler) newLoop(ctx context.Context, req *turns.Request, rec recorder) (*loop, error) {
	l := &loop{h: h, req: req, rec: rec, tools: map[string]*tool{}, remote: map[string]*remoteTool{}, allowed: allowedStatuses(req)}
	for i, ref := range h.cfg.Tools {
		t, err := l.resolve(ctx, i, ref)
		if err != nil {
			return nil, err
		}
		l.tools[t.name] = t
		l.names = append(l.names, t.name)
		schema := t.info.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		l.specs = append(l.specs, provider.ToolSpec{Name: t.name, Description: t.info.Description, InputSchema: schema})
	}
	if err := l.connectMCP(ctx); err != nil {
		return nil, err
	}
	l.specs = append(l.specs, reportOutcomeSpec(l.allowed))
	if h.cfg.Programmatic {
		l.specs = append(l.specs, runCodeSpec(l.codeTools()))
	}
	return l, nil
}

func (l *loop) resolve(ctx context.Context, i int, ref ToolRef) (*tool, error) {
	field := fmt.Sprintf("config.tools[%d]", i)
	if l.h.opts.Tools == nil {
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s): this server resolves no tools", field, ref.Action))
	}
	if l.req.Env != nil {
		// Nothing of a tool the version may not call (its name, description,
		// schema, whether it exists) reaches the model (issue 11).
		ok, err := l.req.Env.MayCall(ctx, ref.Action.String())
		switch {
		case err != nil:
			return nil, fmt.Errorf("resolving %s (tool action %s): %w", field, ref.Action, err)
		case !ok:
			return nil, turns.Permanent(fmt.Errorf("%s (tool action %s) cannot be used: not allowed: this action may not call it (its author does not hold CALL on it)", field, ref.Action))
		}
	}
	info, err := l.h.opts.Tools.Tool(ctx, ref.Action)
	switch {
	case err != nil && fault.As(err) != nil:
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s) cannot be used: %w", field, ref.Action, err))
	case err != nil:
		return nil, fmt.Errorf("resolving %s (tool action %s): %w", field, ref.Action, err)
	case info == nil:
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s) cannot be used: not found", field, ref.Action))
	}
	name := ref.Name
	if name == "" {
		name = info.Name
	}
	switch {
	case !namePattern.MatchString(name):
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s): the tool's name %q is not one a model can use; set %s.name", field, ref.Action, name, field))
	case builtin(name):
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s): the tool's name %q is a built-in tool's; set %s.name", field, ref.Action, name, field))
	case l.tools[name] != nil:
		return nil, turns.Permanent(fmt.Errorf("%s (tool action %s): the name %q is already config.tools[%d]'s; set %s.name", field, ref.Action, name, l.tools[name].index, field))
	}
	if info.Approval {
		// The tool's owner requires approval: no reference lowers it (issue 11).
		ref.Approval = ApprovalRequired
	}
	return &tool{ref: ref, index: i, info: info, name: name}, nil
}

// allowedStatuses is what the turn may report (E2, E3).
func allowedStatuses(req *turns.Request) []string {
	switch {
	case req.Final:
		return []string{statusCompleted}
	case req.EndsAt != nil:
		return []string{statusOpen}
	default:
		return []string{statusOpen, statusCompleted, statusFailed}
	}
}

func reportOutcomeSpec(allowed []string) provider.ToolSpec {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"status": map[string]any{"type": "string", "enum": allowed, "description": "The session's status after this turn."},
			"reason": map[string]any{"type": "string", "description": "Why; required for COMPLETED and FAILED, at most 1000 bytes."},
			"state":  map[string]any{"description": "The session's next state, any JSON value. Omit it to keep the current state."},
		},
		"required":             []string{"status"},
		"additionalProperties": false,
	}
	return provider.ToolSpec{
		Name: toolReportOutcome,
		Description: "End this turn and report its outcome: the session's status (" + strings.Join(allowed, ", ") +
			"), a reason and, optionally, the session's next state. Call it once you have the results you need; calls after it in the same message are ignored.",
		InputSchema: json.RawMessage(jsonvalue.MustEncode(schema)),
	}
}

// run runs the turn from its start or from where an earlier turn paused.
func (l *loop) run(ctx context.Context) (*turns.Outcome, error) {
	if resuming(l.req.Resume) {
		if out, err := l.resume(ctx); out != nil || err != nil {
			return out, err
		}
	} else {
		text := l.render()
		l.rec.Add("input", map[string]any{"text": text})
		l.msgs = []provider.Message{{Role: provider.RoleUser, Text: text}}
	}
	for {
		cfg := l.h.cfg
		if l.steps >= cfg.MaxSteps {
			return nil, l.unfinished(fmt.Sprintf("the model made %d calls (maxSteps) without reporting an outcome", l.steps))
		}
		if used := l.usage.InputTokens + l.usage.OutputTokens; cfg.MaxTotalTokens > 0 && used >= cfg.MaxTotalTokens {
			return nil, l.unfinished(fmt.Sprintf("the turn used %d tokens (maxTotalTokens %d) without reporting an outcome", used, cfg.MaxTotalTokens))
		}
		if err := l.req.Meter.Allow(cfg.Provider, cfg.Model); err != nil {
			// G8: the session's spend cap: the turn is held before the call.
			l.rec.Add("note", map[string]any{"budget": err.Error()})
			return nil, err
		}
		reply, err := l.complete(ctx)
		if err != nil {
			return nil, err
		}
		if out, err := l.handle(ctx, reply); out != nil || err != nil {
			return out, err
		}
	}
}

func resuming(v jsonvalue.Value) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && string(v) != "null"
}

func (l *loop) unfinished(msg string) error {
	l.rec.Add("note", map[string]any{"unfinished": msg})
	return turns.Unfinished(msg)
}

// complete makes one model call, a span "model.call" under the turn's
// (issue 12).
func (l *loop) complete(ctx context.Context) (reply *provider.Reply, err error) {
	l.steps++
	cfg := l.h.cfg
	ctx, span := observe.Child(ctx, "model.call", observe.Provider.String(cfg.Provider), observe.Model.String(cfg.Model),
		observe.Step.Int(l.steps))
	defer func() {
		if reply != nil {
			span.SetAttributes(observe.InputTokens.Int64(int64(reply.Usage.InputTokens)), observe.OutputTokens.Int64(int64(reply.Usage.OutputTokens)))
		}
		observe.End(span, err)
	}()
	if recorded, ok := turns.RecordedReplies(ctx); ok {
		reply, err = l.recordedReply(recorded)
	} else {
		reply, err = l.h.provider.Complete(ctx, &provider.Request{
			Model: cfg.Model, System: cfg.System, Messages: l.msgs, Tools: l.specs, MaxTokens: cfg.MaxTokens,
		})
	}
	if err != nil {
		err = fmt.Errorf("model call %d: %w", l.steps, err)
		l.rec.Add("note", map[string]any{"error": err.Error()})
		if provider.IsPermanent(err) {
			return nil, turns.Permanent(err)
		}
		return nil, err
	}
	if reply == nil {
		return nil, fmt.Errorf("model call %d: the provider returned no reply", l.steps)
	}
	l.usage.InputTokens += reply.Usage.InputTokens
	l.usage.OutputTokens += reply.Usage.OutputTokens
	if _, replayed := turns.RecordedReplies(ctx); !replayed {
		l.req.Meter.Charge(cfg.Provider, cfg.Model, reply.Usage.InputTokens, reply.Usage.OutputTokens)
	}
	return reply, nil
}

// recordedReply is the next model reply of the original run, in a replay
// with recorded replies (T9): each model_message entry it recorded, in
// order. A replay that asks for more than the original had fails.
func (l *loop) recordedReply(recorded []jsonvalue.Value) (*provider.Reply, error) {
	if l.replayed >= len(recorded) {
		return nil, provider.Permanent(fmt.Errorf("the original run recorded %d model replies and the replay asks for more", len(recorded)))
	}
	var r provider.Reply
	if err := json.Unmarshal(recorded[l.replayed], &r); err != nil {
		return nil, provider.Permanent(fmt.Errorf("recorded model reply %d: %w", l.replayed+1, err))
	}
	l.replayed++
	return &r, nil
}

// reportStatus shows what the model is doing as the session's ambient
// status while the turn runs (G8): the first line of what it said, else
// the tools it is calling.
func (l *loop) reportStatus(msg provider.Message) {
	if l.req.ReportStatus == nil {
		return
	}
	if line := firstLine(msg.Text); line != "" {
		l.req.ReportStatus(line)
		return
	}
	var names []string
	for _, c := range msg.ToolCalls {
		if c.Name != toolReportOutcome {
			names = append(names, c.Name)
		}
	}
	if len(names) > 0 {
		l.req.ReportStatus("calling " + strings.Join(names, ", "))
	}
}

// handle takes a reply: an outcome ends the turn, gated calls pause it,
// anything else continues the conversation.
func (l *loop) handle(ctx context.Context, reply *provider.Reply) (*turns.Outcome, error) {
	msg, inputErrs := l.assistant(reply)
	l.rec.Add("model_message", map[string]any{"text": msg.Text, "tool_calls": msg.ToolCalls, "stop_reason": reply.StopReason, "usage": reply.Usage})
	if reply.Refusal != nil || reply.StopReason == provider.StopRefusal {
		var r provider.Refusal
		if reply.Refusal != nil {
			r = *reply.Refusal
		}
		text := msg.Text
		if text == "" {
			text = "the model declined to continue"
		}
		l.rec.Add("refusal", map[string]any{"category": r.Category, "explanation": r.Explanation, "text": text})
		return nil, turns.Refused(clean(r.Category), clean(r.Explanation), text)
	}
	l.msgs = append(l.msgs, msg)
	if msg.Text != "" {
		l.text = msg.Text
	}
	l.reportStatus(msg)
	if len(msg.ToolCalls) == 0 {
		if l.nudged {
			return nil, l.unfinished("the model ended its message without calling report_outcome")
		}
		l.nudged = true
		nudge := "You ended your message without calling report_outcome. Call report_outcome now to finish this turn (status: " + strings.Join(l.allowed, ", ") + ")."
		l.rec.Add("note", map[string]any{"text": nudge})
		l.msgs = append(l.msgs, provider.Message{Role: provider.RoleUser, Text: nudge})
		return nil, nil
	}
	results := make([]*provider.ToolResult, len(msg.ToolCalls))
	var pending []pendingCall
	for i, c := range msg.ToolCalls {
		if inputErrs[i] != nil {
			results[i] = l.result(c.ID, c.Name, "your input is not a usable JSON object: "+inputErrs[i].Error(), true)
			continue
		}
		switch {
		case c.Name == toolReportOutcome:
			if len(pending) > 0 {
				results[i] = l.result(c.ID, c.Name, "not reported: earlier calls in this message wait for approval; report the outcome once you have their results", true)
				continue
			}
			out, problem := l.outcome(c)
			if out != nil {
				if rest := msg.ToolCalls[i+1:]; len(rest) > 0 {
					l.rec.Add("note", map[string]any{"ignored_calls": rest, "why": "they came after report_outcome in the same message"})
				}
				return out, nil
			}
			results[i] = l.result(c.ID, c.Name, problem, true)
		case c.Name == toolRunCode && l.h.cfg.Programmatic:
			r, err := l.runCode(ctx, c)
			if err != nil {
				return nil, err
			}
			results[i] = r
		case l.remote[c.Name] != nil:
			rt := l.remote[c.Name]
			input, err := overlay(c.Input, nil)
			switch {
			case err != nil:
				results[i] = l.result(c.ID, c.Name, err.Error(), true)
			case rt.cfg(l).Gated() && l.req.Final:
				l.rec.Add("note", map[string]any{"call_id": c.ID, "tool": c.Name, "text": "gated call refused in the final turn"})
				results[i] = l.result(c.ID, c.Name, fmt.Sprintf("the session has ended: %s requires approval and this final turn cannot wait for one; finish without it", c.Name), true)
			case rt.cfg(l).Gated():
				// The approval names the agent itself as the tool action: the
				// tool is no action of this service (docs/mcp.md).
				a := turns.Approval{
					InterruptID: turns.InterruptIDFor(l.req.ExecutionID, c.ID), ExecutionID: l.req.ExecutionID,
					ToolActionID: l.req.ActionID, ToolVersion: l.req.Version, ToolName: c.Name, Input: input, CallID: c.ID,
				}
				l.rec.Add("approval_request", map[string]any{"interrupt_id": a.InterruptID, "call_id": c.ID, "tool": c.Name, "mcp_server": rt.cfg(l).Name, "input": input})
				pending = append(pending, pendingCall{Approval: a, Index: i, ModelInput: c.Input, Remote: rt.cfg(l).Name})
			default:
				r, err := l.callRemote(ctx, c.ID, rt, input, false)
				if err != nil {
					return nil, err
				}
				results[i] = r
			}
		case l.tools[c.Name] == nil:
			results[i] = l.result(c.ID, c.Name, fmt.Sprintf("there is no tool named %q; the tools are: %s", c.Name, strings.Join(l.offered(), ", ")), true)
		default:
			t := l.tools[c.Name]
			input, err := overlay(c.Input, t.ref.Input)
			switch {
			case err != nil:
				results[i] = l.result(c.ID, c.Name, err.Error(), true)
			case t.ref.Gated() && l.req.Final:
				l.rec.Add("note", map[string]any{"call_id": c.ID, "tool": c.Name, "text": "gated call refused in the final turn"})
				results[i] = l.result(c.ID, c.Name, fmt.Sprintf("the session has ended: %s requires approval and this final turn cannot wait for one; finish without it", c.Name), true)
			case t.ref.Gated():
				a := turns.Approval{
					InterruptID: turns.InterruptIDFor(l.req.ExecutionID, c.ID), ExecutionID: l.req.ExecutionID,
					ToolActionID: t.ref.Action, ToolVersion: t.info.Version, ToolName: t.name, Input: input, CallID: c.ID,
				}
				l.rec.Add("approval_request", map[string]any{"interrupt_id": a.InterruptID, "call_id": c.ID, "tool": t.name, "tool_action": t.ref.Action, "tool_version": a.ToolVersion, "input": input})
				pending = append(pending, pendingCall{Approval: a, Index: i, ModelInput: c.Input, Fixed: t.ref.Input})
			default:
				r, err := l.callTool(ctx, c.ID, t.ref.Action, t.name, input, false)
				if err != nil {
					return nil, err
				}
				results[i] = r
			}
		}
	}
	if len(pending) > 0 {
		return l.wait(&resumeState{Version: resumeVersion, Messages: l.msgs, Results: results, Pending: pending})
	}
	l.msgs = append(l.msgs, provider.Message{Role: provider.RoleUser, ToolResults: deref(results)})
	return nil, nil
}

// assistant is the reply as the conversation keeps it: storable text, an
// id for every call, and inputs that are storable JSON objects (an input
// that is not is kept as {} and its error returned by position).
func (l *loop) assistant(reply *provider.Reply) (provider.Message, []error) {
	msg := provider.Message{Role: provider.RoleAssistant, Text: clean(reply.Text)}
	errs := make([]error, len(reply.ToolCalls))
	seen := map[string]bool{}
	for i, c := range reply.ToolCalls {
		c.ID, c.Name = clean(c.ID), clean(c.Name)
		if c.ID == "" || seen[c.ID] {
			// Interrupt ids derive from call ids: they must be unique.
			c.ID = fmt.Sprintf("call_%d_%d", l.steps, i)
		}
		seen[c.ID] = true
		if err := objectInput(c.Input); err != nil {
			errs[i], c.Input = err, json.RawMessage("{}")
		}
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	return msg, errs
}

func objectInput(raw json.RawMessage) error {
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
		return errors.New("a tool call's input is a JSON object")
	}
	return jsonvalue.Check(raw, "input")
}

// offered lists the tool names the model has, for error messages.
func (l *loop) offered() []string {
	out := append([]string(nil), l.names...)
	out = append(out, l.remoteNames...)
	out = append(out, toolReportOutcome)
	if l.h.cfg.Programmatic {
		out = append(out, toolRunCode)
	}
	return out
}

// outcome reads a report_outcome call; problem says what is wrong when it
// is not a valid outcome for this turn (E2, T5).
func (l *loop) outcome(c provider.ToolCall) (out *turns.Outcome, problem string) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, "report_outcome takes {status, reason, state}"
	}
	var status, reason string
	for k, v := range in {
		switch k {
		case "status", "reason":
			dst := &status
			if k == "reason" {
				dst = &reason
			}
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, k + " must be a string"
			}
		case "state":
		default:
			return nil, fmt.Sprintf("unknown key %q: report_outcome takes status, reason and state", k)
		}
	}
	ok := false
	for _, s := range l.allowed {
		ok = ok || s == status
	}
	switch {
	case !ok && l.req.Final:
		return nil, fmt.Sprintf("status %q is not allowed: this is the session's final turn, which must report COMPLETED with a reason", status)
	case !ok && l.req.EndsAt != nil:
		return nil, fmt.Sprintf("status %q is not allowed: the session has an end (%s) and this turn comes before it, so it keeps the session OPEN", status, l.req.EndsAt.UTC().Format(time.RFC3339))
	case !ok:
		return nil, fmt.Sprintf("status %q is not one of %s", status, strings.Join(l.allowed, ", "))
	case status != statusOpen && strings.TrimSpace(reason) == "":
		return nil, fmt.Sprintf("status %s needs a reason", status)
	case len(reason) > maxReason:
		return nil, fmt.Sprintf("the reason is %d bytes; at most %d", len(reason), maxReason)
	}
	state := l.req.State
	if raw, ok := in["state"]; ok {
		if err := jsonvalue.Check(raw, "state"); err != nil {
			return nil, err.Error()
		}
		state = jsonvalue.Value(raw)
	}
	// G8: the session's one-line status is the agent's last words, or its reason.
	ambient := firstLine(l.text)
	if ambient == "" {
		ambient = reason
	}
	o := &turns.Outcome{State: state, Status: status, Reason: reason, Output: l.output(nil), AmbientStatus: ambient}
	l.rec.Add("outcome", map[string]any{"status": o.Status, "reason": o.Reason, "state": o.State})
	return o, ""
}

// output is a turn's output: the model's latest text and counts.
func (l *loop) output(extra map[string]any) jsonvalue.Value {
	m := map[string]any{"text": clipResult(l.text), "tool_calls": l.calls, "steps": l.steps, "usage": l.usage}
	for k, v := range extra {
		m[k] = v
	}
	return jsonvalue.MustEncode(m)
}

// callTool runs a call of a non-gated tool, or of a gated one a person
// approved (approved), and returns the result for the model. A tool's error
// (*fault.Error) is an error result; any other error fails the attempt.
func (l *loop) callTool(ctx context.Context, callID string, actionID uuid.UUID, name string, input jsonvalue.Value, approved bool) (*provider.ToolResult, error) {
	out, toolErr, err := l.invoke(ctx, callID, actionID, name, input, "", approved)
	switch {
	case err != nil:
		return nil, err
	case toolErr != nil:
		return l.result(callID, name, toolErr.Error(), true), nil
	}
	return l.result(callID, name, string(out), false), nil
}

// invoke calls a tool through the turn's Env, recording the call. toolErr
// is the tool's own failure; err any other.
func (l *loop) invoke(ctx context.Context, callID string, actionID uuid.UUID, name string, input jsonvalue.Value, via string, approved bool) (out jsonvalue.Value, toolErr, err error) {
	entry := map[string]any{"call_id": callID, "tool": name, "tool_action": actionID, "input": input}
	if via != "" {
		entry["via"] = via
	}
	l.rec.Add("tool_call", entry)
	if l.req.Env == nil {
		return nil, nil, turns.Permanent(errors.New("this server runs agents without tool access"))
	}
	l.calls++
	if approved {
		out, err = l.req.Env.CallApprovedTool(ctx, actionID.String(), input)
	} else {
		out, err = l.req.Env.CallTool(ctx, actionID.String(), input)
	}
	if err != nil {
		if fault.As(err) != nil && ctx.Err() == nil {
			return nil, err, nil
		}
		return nil, nil, fmt.Errorf("calling tool %s (%s): %w", name, actionID, err)
	}
	return out, nil, nil
}

// result is a tool result for the model, cut at MaxResult, and recorded.
func (l *loop) result(callID, name, content string, isError bool) *provider.ToolResult {
	r := &provider.ToolResult{CallID: callID, Content: clipResult(clean(content)), IsError: isError}
	l.rec.Add("tool_result", map[string]any{"call_id": callID, "tool": name, "content": r.Content, "is_error": isError})
	return r
}

// clipResult cuts a tool result or model text to MaxResult bytes, saying so.
func clipResult(s string) string {
	if len(s) <= MaxResult {
		return s
	}
	return text.Prefix(s, MaxResult) + fmt.Sprintf("\n[truncated: the full text is %d bytes]", len(s))
}

// clean makes s storable: valid UTF-8 without NUL (jsonb refuses both).
func clean(s string) string { return text.Clean(s) }

func deref(rs []*provider.ToolResult) []provider.ToolResult {
	out := make([]provider.ToolResult, len(rs))
	for i, r := range rs {
		out[i] = *r
	}
	return out
}

// overlay lays fixed (an object or empty) over base (an object, empty or
// null), key by key at the top level, and checks the result is storable.
func overlay(base, fixed json.RawMessage) (jsonvalue.Value, error) {
	m := map[string]json.RawMessage{}
	if b := bytes.TrimSpace(base); len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			return nil, errors.New("the input must be a JSON object")
		}
	}
	if len(fixed) > 0 {
		var f map[string]json.RawMessage
		if err := json.Unmarshal(fixed, &f); err != nil {
			return nil, fmt.Errorf("the fixed input is not a JSON object: %w", err)
		}
		for k, v := range f {
			m[k] = v
		}
	}
	raw, err := jsonvalue.Encode(m)
	if err != nil {
		return nil, fmt.Errorf("the input is not valid JSON: %w", err)
	}
	if err := jsonvalue.Check(raw, "input"); err != nil {
		return nil, err
	}
	return raw, nil
}

// Rendering the turn's inputs.

// render is the turn's first user message: the session, its inputs
// (replayed ones first, counted as listed) and then the notes of the hold
// answers among them (H3).
func (l *loop) render() string {
	req := l.req
	var b strings.Builder
	if req.SessionID == "" {
		// An action without a session block (issue 15): one event, no
		// session, nothing kept for a next turn.
		b.WriteString("An event to handle; there is no session, so nothing is kept for later but what you write to the ledger.\n")
		for _, in := range req.Inputs {
			b.WriteString(renderInput(in) + "\n")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "Session %s, turn %d.\n", quoteJSON(req.SessionID), req.Turn)
	switch {
	case req.Final:
		b.WriteString("This is the session's final turn: it has ended, and this turn must report COMPLETED with a reason.\n")
	case req.EndsAt != nil:
		fmt.Fprintf(&b, "The session ends at %s; until then a turn keeps it OPEN.\n", req.EndsAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "Session input: %s\n", orNull(req.Input))
	fmt.Fprintf(&b, "Session state: %s\n", orNull(req.State))
	// A hold's answer (H3) is no input to work on: its note follows the
	// list, which counts only what it shows.
	var listed, notes []string
	requests := 0
	for _, in := range append(append([]turns.InputView(nil), req.Replayed...), req.Inputs...) {
		if in.Request != nil {
			requests++
		}
		if c := in.Command; c != nil && c.Kind == commandHold {
			notes = append(notes, renderInput(in))
		} else {
			listed = append(listed, renderInput(in))
		}
	}
	if len(listed) == 0 {
		b.WriteString("This turn has no inputs.\n")
	} else {
		fmt.Fprintf(&b, "Inputs of this turn (%d, oldest first):\n", len(listed))
	}
	for _, line := range append(listed, notes...) {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if requests > 0 {
		// I4: the turn's output (its latest text) answers the request.
		b.WriteString("The REQUEST input is a question from an MCP client, who waits for this turn: the text of your last message is the answer it gets, so write the answer as text before you report the outcome.\n")
	}
	fmt.Fprintf(&b, "When you are done, call report_outcome (status %s).", strings.Join(l.allowed, " or "))
	return clean(b.String())
}

// renderInput is one input on one line: compact JSON, or the responder's
// note for a hold's RETRY answer.
func renderInput(in turns.InputView) string {
	if c := in.Command; c != nil && c.Kind == commandHold {
		if c.Note == "" {
			return "The responder asked to run this turn again."
		}
		return "Note from the responder: " + c.Note
	}
	if m := in.Message; m != nil {
		// G1, G5: a person's (or another session's) message, or the note
		// the session before this one handed over.
		if m.Command == session.CommandHandoff {
			return "Handoff note from the session this one continues: " + m.Message
		}
		return fmt.Sprintf("Message from %s %s: %s", strings.ToLower(string(m.Sender.Kind)), quoteJSON(m.Sender.ID), m.Message)
	}
	type event struct {
		Type       string          `json:"type"`
		Data       jsonvalue.Value `json:"data"`
		CommitTime time.Time       `json:"commit_time"`
	}
	line := struct {
		Kind     string         `json:"kind"`
		Identity string         `json:"identity"`
		Triggers []string       `json:"triggers,omitempty"`
		Event    *event         `json:"event,omitempty"`
		Command  *turns.Command `json:"command,omitempty"`
	}{Kind: string(in.Kind), Identity: in.Identity, Triggers: in.Triggers, Command: in.Command}
	if e := in.Event; e != nil {
		line.Event = &event{Type: e.Type, Data: orNull(e.Data), CommitTime: e.CommitTime.UTC()}
	}
	raw, err := jsonvalue.Encode(line)
	if err != nil {
		return fmt.Sprintf(`{"kind":%s,"identity":%s}`, quoteJSON(string(in.Kind)), quoteJSON(in.Identity))
	}
	return string(raw)
}

func quoteJSON(s string) string { return string(jsonvalue.MustEncode(s)) }

func orNull(v jsonvalue.Value) jsonvalue.Value {
	if len(bytes.TrimSpace(v)) == 0 {
		return jsonvalue.Value("null")
	}
	return v
}

// Pausing and resuming (P1-P5, H3).

const resumeVersion = 1

// resumeState is Outcome.Resume: the conversation up to the paused
// assistant message (the last of Messages), the results known for its
// calls (null while a call waits) and the gated calls waiting.
type resumeState struct {
	Version  int                    `json:"version"`
	Messages []provider.Message     `json:"messages"`
	Results  []*provider.ToolResult `json:"results"`
	Pending  []pendingCall          `json:"pending"`
	// Text is what to show the model with the results: responders' notes
	// and inputs taken by a turn that paused again.
	Text string `json:"text,omitempty"`
}

// pendingCall is a gated call waiting for its answer.
type pendingCall struct {
	Approval   turns.Approval  `json:"approval"`
	Index      int             `json:"index"`       // of the call in the paused message
	ModelInput json.RawMessage `json:"model_input"` // the model's input
	Fixed      json.RawMessage `json:"fixed,omitempty"`
	// Remote names the MCP server of a call of one of its tools (issue 17).
	Remote string `json:"remote,omitempty"`
}

// wait ends the turn WAITING on r's pending calls (P1, P2).
func (l *loop) wait(r *resumeState) (*turns.Outcome, error) {
	raw, err := jsonvalue.Encode(r)
	if err == nil {
		err = jsonvalue.Check(raw, "resume")
	}
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("the conversation cannot be kept to wait for approval: %w", err))
	}
	approvals := make([]turns.Approval, len(r.Pending))
	ids := make([]uuid.UUID, len(r.Pending))
	for i, p := range r.Pending {
		approvals[i], ids[i] = p.Approval, p.Approval.InterruptID
	}
	out := &turns.Outcome{
		State: l.req.State, Status: statusWaiting, Approvals: approvals, Resume: raw,
		Reason:        fmt.Sprintf("waiting for approval of %d tool call(s)", len(approvals)),
		Output:        l.output(map[string]any{"waiting_for": ids}),
		AmbientStatus: fmt.Sprintf("waiting for approval of %d tool call(s)", len(approvals)),
	}
	l.rec.Add("outcome", map[string]any{"status": out.Status, "reason": out.Reason, "interrupt_ids": ids})
	return out, nil
}

// resume restores the paused conversation and applies the responses. It
// returns an outcome when the turn waits again; otherwise the conversation
// goes on with the paused message's results.
func (l *loop) resume(ctx context.Context) (*turns.Outcome, error) {
	r, err := decodeResume(l.req.Resume)
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("the turn's continuation cannot be read: %w", err))
	}
	l.msgs = r.Messages
	l.text = r.Messages[len(r.Messages)-1].Text
	l.rec.Add("note", map[string]any{"resumed": true, "waiting_for": len(r.Pending)})
	var texts, others []string
	if r.Text != "" {
		texts = append(texts, r.Text)
	}
	for _, in := range append(append([]turns.InputView(nil), l.req.Replayed...), l.req.Inputs...) {
		switch c := in.Command; {
		case c != nil && c.Kind == commandApproval:
			if err := l.answer(ctx, r, c); err != nil {
				return nil, err
			}
		case c != nil && c.Kind == commandHold:
			if c.Decision == decisionRetry {
				texts = append(texts, renderInput(in))
			}
		default:
			others = append(others, renderInput(in))
		}
	}
	if len(others) > 0 {
		texts = append(texts, "New inputs (oldest first):\n"+strings.Join(others, "\n"))
	}
	text := clean(strings.Join(texts, "\n\n"))
	if len(r.Pending) > 0 && !l.req.Final {
		r.Text = text
		return l.wait(r)
	}
	for _, p := range r.Pending {
		l.rec.Add("note", map[string]any{"interrupt_id": p.Approval.InterruptID, "text": "not answered before the session ended"})
		r.Results[p.Index] = l.result(p.Approval.CallID, p.Approval.ToolName, "not answered: the session ended before anyone answered the approval request for this call; it did not run", true)
	}
	if text != "" {
		l.rec.Add("input", map[string]any{"text": text})
	}
	l.msgs = append(l.msgs, provider.Message{Role: provider.RoleUser, Text: text, ToolResults: deref(r.Results)})
	return nil, nil
}

func decodeResume(raw jsonvalue.Value) (*resumeState, error) {
	r := &resumeState{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, err
	}
	if r.Version != resumeVersion {
		return nil, fmt.Errorf("version %d, want %d", r.Version, resumeVersion)
	}
	if len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Role != provider.RoleAssistant {
		return nil, errors.New("it does not end with the paused assistant message")
	}
	calls := r.Messages[len(r.Messages)-1].ToolCalls
	if len(r.Results) != len(calls) {
		return nil, fmt.Errorf("%d results for %d calls", len(r.Results), len(calls))
	}
	waiting := map[int]bool{}
	for _, p := range r.Pending {
		if p.Index < 0 || p.Index >= len(calls) || r.Results[p.Index] != nil || waiting[p.Index] {
			return nil, fmt.Errorf("pending call %d does not match the paused message", p.Index)
		}
		waiting[p.Index] = true
	}
	for i, res := range r.Results {
		if res == nil && !waiting[i] {
			return nil, fmt.Errorf("call %d has neither a result nor a pending approval", i)
		}
	}
	return r, nil
}

// answer applies one approval response to r (P5): an approved call runs,
// a denied one gets the denial as its result.
func (l *loop) answer(ctx context.Context, r *resumeState, c *turns.Command) error {
	id, err := uuid.Parse(c.InterruptID)
	i := -1
	for j, p := range r.Pending {
		if err == nil && p.Approval.InterruptID == id {
			i = j
		}
	}
	entry := map[string]any{"interrupt_id": c.InterruptID, "decision": c.Decision, "reason": c.Reason, "responder": c.Responder}
	if resuming(c.Input) {
		entry["input"] = c.Input
	}
	if i < 0 {
		entry["ignored"] = "no call waits on this interrupt"
		l.rec.Add("approval_response", entry)
		return nil
	}
	p := r.Pending[i]
	entry["call_id"], entry["tool"] = p.Approval.CallID, p.Approval.ToolName
	l.rec.Add("approval_response", entry)
	var res *provider.ToolResult
	switch c.Decision {
	case decisionApprove:
		base := p.ModelInput
		if resuming(c.Input) {
			base = json.RawMessage(c.Input)
		}
		input, err := overlay(base, p.Fixed)
		if err != nil {
			res = l.result(p.Approval.CallID, p.Approval.ToolName, "approved, but the approved input is not usable: "+err.Error(), true)
			break
		}
		if p.Remote != "" {
			rt := l.remote[p.Approval.ToolName]
			if rt == nil {
				res = l.result(p.Approval.CallID, p.Approval.ToolName, fmt.Sprintf("approved, but the MCP server %s no longer offers this tool; it did not run", p.Remote), true)
				break
			}
			if res, err = l.callRemote(ctx, p.Approval.CallID, rt, input, true); err != nil {
				return err
			}
			break
		}
		if res, err = l.callTool(ctx, p.Approval.CallID, p.Approval.ToolActionID, p.Approval.ToolName, input, true); err != nil {
			return err
		}
	case decisionDeny:
		who := c.Responder
		if who == "" {
			who = "the responder"
		}
		msg := "denied by " + who
		if c.Reason != "" {
			msg += ": " + c.Reason
		}
		res = l.result(p.Approval.CallID, p.Approval.ToolName, msg, true)
	default:
		l.rec.Add("note", map[string]any{"interrupt_id": c.InterruptID, "text": fmt.Sprintf("decision %q is neither APPROVE nor DENY; the call still waits", c.Decision)})
		return nil
	}
	r.Results[p.Index] = res
	r.Pending = append(r.Pending[:i:i], r.Pending[i+1:]...)
	return nil
}

// firstLine is the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

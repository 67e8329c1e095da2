// Package script is the starlark handler kind: an action whose source is a
// Starlark program. As a turn handler it defines turn(event); as a tool it
// defines call(event). Both run in the sandbox of package starlarkrt, with
// the ledger, sessions and tools reached through the turn's (or call's)
// transaction (T5, T6, X1-X6).
//
// turn(event) receives
//
//	{"session": {"id", "input"}, "state", "inputs": [...], "turn", "final",
//	 "ends_at", "action_id", "execution_id"}
//
// and returns {"state", "status", "output", "reason"} (status OPEN,
// COMPLETED or FAILED; reason required for the last two). For an action
// without a session block (issue 15) "session" and "state" are None, the
// one input is the execution's event, "turn" is 0, and the result may
// leave out status (FAILED fails the execution; state is ignored). call(event)
// receives {"input", "session": {"id", "input", "status", "inputs" (the
// latest 100 calls, oldest first), "input_count"} or None, "action_id",
// "execution_id"} and returns the call's output.
//
// Config (optional): {"max_steps": int, "timeout_ms": int, "memory_mb":
// int} within the sandbox's caps: max_steps at most 100,000,000 (default
// 10,000,000), timeout_ms at most 60,000 (default 5,000), memory_mb 1-1024
// (default 64; issue 10 item 2), 0 or absent meaning the default.
//
// A script that passes a limit fails for good: a turn with a permanent
// failure (not retried: the same inputs fail the same way) whose reason
// carries the sandbox's message (for memory, "the script exceeded its
// memory budget of N MiB ..."), a tool call with TOOL_CALL_FAILED and that
// message. Only host failures and timeouts are retried.
package script

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
	"github.com/actionsledger/actionsledger/turns"
)

// KindName is the kind actions name.
const KindName = "starlark"

// Caps on config.
const (
	MaxSteps   = 100_000_000
	MaxTimeout = 60 * time.Second
	// MaxMemoryMB caps memory_mb: the sandbox's ceiling, in MiB.
	MaxMemoryMB = starlarkrt.MaxMemoryCeiling >> 20
)

// Config is the kind's configuration. Zero fields take the sandbox's
// defaults.
type Config struct {
	MaxSteps  uint64 `json:"max_steps"`
	TimeoutMS int64  `json:"timeout_ms"`
	// MemoryMB is the memory budget of each call or turn, in MiB (1-1024,
	// default 64): see starlarkrt.Limits.MaxMemory (issue 10 item 2).
	MemoryMB int64 `json:"memory_mb"`
}

const filename = "action.star"

// Kind returns the kind for a turns.Registry.
func Kind() turns.Kind {
	return turns.Kind{
		Name: KindName,
		New: func(spec turns.Spec) (turns.Handler, error) {
			src, lim, err := prepare(spec, "turn")
			if err != nil {
				return nil, err
			}
			return &turnHandler{src: src, lim: lim}, nil
		},
		NewTool: func(spec turns.Spec) (turns.ToolHandler, error) {
			src, lim, err := prepare(spec, "call")
			if err != nil {
				return nil, err
			}
			return &toolHandler{src: src, lim: lim}, nil
		},
	}
}

func prepare(spec turns.Spec, entry string) (string, starlarkrt.Limits, error) {
	var lim starlarkrt.Limits
	if spec.Source == nil || *spec.Source == "" {
		return "", lim, fault.New(fault.InvalidConfig, "source", "a starlark action needs source defining %s(event)", entry)
	}
	var cfg Config
	if len(spec.Config) > 0 && string(spec.Config) != "null" {
		dec := json.NewDecoder(bytes.NewReader(spec.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return "", lim, fault.New(fault.InvalidConfig, "config", "starlark takes {max_steps: integer, timeout_ms: integer, memory_mb: integer} and nothing else")
		}
	}
	if cfg.MaxSteps > MaxSteps {
		return "", lim, fault.New(fault.InvalidConfig, "config.max_steps", "max_steps is at most %d", MaxSteps)
	}
	if cfg.TimeoutMS < 0 || time.Duration(cfg.TimeoutMS)*time.Millisecond > MaxTimeout {
		return "", lim, fault.New(fault.InvalidConfig, "config.timeout_ms", "timeout_ms is 0-%d", MaxTimeout.Milliseconds())
	}
	if cfg.MemoryMB < 0 || cfg.MemoryMB > MaxMemoryMB {
		return "", lim, fault.New(fault.InvalidConfig, "config.memory_mb", "memory_mb is 1-%d (MiB; 0 or absent for the default %d)", MaxMemoryMB, starlarkrt.DefaultMaxMemory>>20)
	}
	lim.MaxSteps, lim.Timeout = cfg.MaxSteps, time.Duration(cfg.TimeoutMS)*time.Millisecond
	lim.MaxMemory = cfg.MemoryMB << 20
	if err := starlarkrt.Check(filename, *spec.Source, entry); err != nil {
		return "", lim, fault.WithField(err, "source")
	}
	return *spec.Source, lim, nil
}

type turnHandler struct {
	src string
	lim starlarkrt.Limits
}

type turnEvent struct {
	// Session is None for an execution of an action without a session
	// block (issue 15), whose one input is its event.
	Session     *sessionArg       `json:"session"`
	State       jsonvalue.Value   `json:"state"`
	Inputs      []turns.InputView `json:"inputs"`
	Turn        int               `json:"turn"`
	Final       bool              `json:"final"`
	EndsAt      *time.Time        `json:"ends_at"`
	ActionID    string            `json:"action_id"`
	ExecutionID string            `json:"execution_id"`
}

// sessionArg is event["session"] of a turn.
type sessionArg struct {
	ID    string          `json:"id"`
	Input jsonvalue.Value `json:"input"`
}

// toolSessionArg is event["session"] of a call: the tool session with its
// earlier calls (X6).
type toolSessionArg struct {
	ID         string            `json:"id"`
	Input      jsonvalue.Value   `json:"input"`
	Status     string            `json:"status"`
	Inputs     []jsonvalue.Value `json:"inputs"`      // the latest 100
	InputCount int               `json:"input_count"` // all of them
}

// Run calls turn(event) and reads its outcome (T5). Script failures are not
// retried (the same inputs fail the same way); a malformed outcome fails the
// turn with action_output_invalid.
func (h *turnHandler) Run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	var sess *sessionArg
	if req.SessionID != "" {
		sess = &sessionArg{ID: req.SessionID, Input: req.Input}
	}
	ev, err := jsonvalue.Encode(turnEvent{
		Session: sess, State: orNull(req.State), Inputs: req.Inputs,
		Turn: req.Turn, Final: req.Final, EndsAt: req.EndsAt, ActionID: req.ActionID.String(), ExecutionID: req.ExecutionID.String(),
	})
	if err != nil {
		return nil, turns.Permanent(err)
	}
	out, err := starlarkrt.Call(ctx, filename, h.src, "turn", ev, host{req.Env}, h.lim)
	if err != nil {
		req.Transcript.Add("error", scriptError(err))
		if retryable(err) {
			return nil, err
		}
		return nil, turns.Permanent(err)
	}
	o, err := outcome(out, sess != nil)
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("action_output_invalid: %w", err))
	}
	return o, nil
}

// outcome reads turn()'s result: an object with status and optional state,
// output, reason, scope (G10) and ambient_status (G8), nothing else. Without a session (issue 15) status is
// optional too.
func outcome(raw jsonvalue.Value, needStatus bool) (*turns.Outcome, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("turn() must return a dict with status and optionally state, output, reason, scope and ambient_status")
	}
	o := &turns.Outcome{}
	for k, v := range m {
		switch k {
		case "status", "reason", "scope", "ambient_status":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("%s must be a string", k)
			}
			switch k {
			case "status":
				o.Status = s
			case "reason":
				o.Reason = s
			case "ambient_status":
				o.AmbientStatus = s // G8: the session's one-line status
			default:
				o.Scope = s // G10: TURN fails only the turn
			}
		case "state":
			o.State = jsonvalue.Value(v)
		case "output":
			o.Output = jsonvalue.Value(v)
		default:
			return nil, fmt.Errorf("unknown key %q in turn()'s result (allowed: status, state, output, reason, scope, ambient_status)", k)
		}
	}
	if o.Status == "" && needStatus {
		return nil, errors.New("turn()'s result has no status")
	}
	return o, nil
}

type toolHandler struct {
	src string
	lim starlarkrt.Limits
}

type callEvent struct {
	Input       jsonvalue.Value `json:"input"`
	Session     *toolSessionArg `json:"session"`
	ActionID    string          `json:"action_id"`
	ExecutionID string          `json:"execution_id"`
}

// Call calls call(event) and returns its result as the call's output.
func (h *toolHandler) Call(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
	ev := callEvent{Input: req.Input, ActionID: req.ActionID.String(), ExecutionID: req.ExecutionID.String()}
	if s := req.Session; s != nil {
		ev.Session = &toolSessionArg{ID: s.ID, Input: s.Input, Status: s.Status, Inputs: s.Inputs, InputCount: s.InputCount}
		if ev.Session.Inputs == nil {
			ev.Session.Inputs = []jsonvalue.Value{}
		}
	}
	raw, err := jsonvalue.Encode(ev)
	if err != nil {
		return nil, err
	}
	out, err := starlarkrt.Call(ctx, filename, h.src, "call", raw, host{req.Env}, h.lim)
	if err != nil {
		return nil, &fault.Error{Code: fault.CallFailed, Message: scriptError(err)["message"].(string), Err: err}
	}
	return out, nil
}

// retryable reports whether a script failure may pass on a retry: a host
// (database, tool) failure or a timeout may; the script's own errors and
// exhausted budgets will not.
func retryable(err error) bool {
	var se *starlarkrt.ScriptError
	if !errors.As(err, &se) {
		return true
	}
	switch se.Kind {
	case starlarkrt.KindHost, starlarkrt.KindTimeout:
		return fault.As(err) == nil // a host *fault.Error (bad input, closed session) is final
	}
	return false
}

func scriptError(err error) map[string]any {
	var se *starlarkrt.ScriptError
	if errors.As(err, &se) {
		return map[string]any{"message": se.Error(), "kind": se.Kind, "backtrace": se.Backtrace}
	}
	return map[string]any{"message": err.Error()}
}

func orNull(v jsonvalue.Value) jsonvalue.Value {
	if len(v) == 0 {
		return jsonvalue.Value("null")
	}
	return v
}

// host adapts a turns.Env to the sandbox's Host.
type host struct{ env turns.Env }

var errNoEnv = errors.New("this handler runs without ledger or tool access")

func (h host) LedgerGet(ctx context.Context, ns, key string) (jsonvalue.Value, bool, error) {
	if h.env == nil {
		return nil, false, errNoEnv
	}
	return h.env.LedgerGet(ctx, ns, key)
}

func (h host) LedgerPut(ctx context.Context, ns, key string, value jsonvalue.Value) (int64, error) {
	if h.env == nil {
		return 0, errNoEnv
	}
	return h.env.LedgerPut(ctx, ns, key, value)
}

func (h host) Session(ctx context.Context, actionID, id string) (*starlarkrt.SessionView, error) {
	if h.env == nil {
		return nil, errNoEnv
	}
	v, err := h.env.Session(ctx, actionID, id)
	if err != nil || v == nil {
		return nil, err
	}
	return &starlarkrt.SessionView{ID: v.ID, Input: v.Input, Status: v.Status, Inputs: v.Inputs, InputCount: v.InputCount}, nil
}

func (h host) CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	if h.env == nil {
		return nil, errNoEnv
	}
	return h.env.CallTool(ctx, actionID, input)
}

// SendToSession sends a message to another session (starlarkrt.MessageSender, G1).
func (h host) SendToSession(ctx context.Context, actionID, id, message, key string) (int64, error) {
	m, ok := h.env.(turns.Messenger)
	if !ok {
		return 0, errors.New("this handler cannot message other sessions")
	}
	return m.SendToSession(ctx, actionID, id, message, key)
}

func (h host) Now() time.Time {
	if h.env == nil {
		return time.Now().UTC()
	}
	return h.env.Now()
}

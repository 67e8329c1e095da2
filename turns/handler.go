package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// Handler runs one turn of a session. It must not keep state between calls:
// everything it needs is in the Request, and every retry of a turn's
// execution receives the same Request (T7).
type Handler interface {
	// Run returns the turn's outcome. An error fails this attempt; it is
	// retried unless it is Permanent.
	Run(ctx context.Context, req *Request) (*Outcome, error)
}

// Request is what a handler receives for one turn (T5, T9).
type Request struct {
	ActionID    uuid.UUID       `json:"action_id"`
	Version     int             `json:"version"`
	SessionID   string          `json:"session_id"`
	Input       jsonvalue.Value `json:"input"`
	State       jsonvalue.Value `json:"state"`
	Inputs      []InputView     `json:"inputs"`
	Turn        int             `json:"turn"`
	Final       bool            `json:"final"`
	EndsAt      *time.Time      `json:"ends_at"`
	ExecutionID uuid.UUID       `json:"execution_id"`
	Attempt     int             `json:"attempt"`
	// Credential is a bearer token that reads this session (its turns and
	// inputs) over GraphQL and nothing else, good while the turn runs (T10);
	// empty unless the kind asks for one (Kind.Credential). Handlers that call back out pass
	// it on; it is never recorded.
	Credential string `json:"-"`
	Spec       Spec   `json:"-"`
	// Env reaches the ledger and tools inside the turn's transaction; nil
	// when the executor was built without tools.
	Env Env `json:"-"`
	// Transcript collects the execution's transcript entries. It is reset
	// before each attempt so a retry starts clean.
	Transcript *Transcript `json:"-"`
	// Meter counts the turn's model use and guards its session's spend
	// cap (G8): handlers that call models Allow and Charge each call. Nil
	// outside turns (a nil Meter allows everything).
	Meter *Meter `json:"-"`
	// ReportStatus, when set, shows line as the session's ambient status
	// while the turn runs (G8): one line, cut to MaxAmbientStatus, written
	// at most once a second (the newest wins) and replaced by the
	// outcome's AmbientStatus when the turn commits. Nil outside turns.
	ReportStatus func(line string) `json:"-"`
	// Resume is the continuation the handler left when a turn ended WAITING
	// for approvals (Outcome.Resume, P1): set for the turn that takes the
	// responses and for a retry of such a turn (H3); nil otherwise. Opaque
	// to the executor.
	Resume jsonvalue.Value `json:"resume,omitempty"`
	// Replayed is set for a retry of a held turn (H3): the inputs the held
	// turn took (and, when it was itself a retry, the inputs it ran again),
	// oldest first. They are run again before Inputs, which then hold only
	// the RETRY answer.
	Replayed []InputView `json:"replayed,omitempty"`
}

// InputView is one input as a handler sees it.
type InputView struct {
	Identity string            `json:"identity"`
	Kind     session.InputKind `json:"kind"`
	Sequence int64             `json:"sequence"`
	Triggers []string          `json:"triggers,omitempty"`
	Event    *EventView        `json:"event,omitempty"`
	// Command is set for a COMMAND input that answers an interrupt (P5, H3).
	Command *Command `json:"command,omitempty"`
	// Message is set for a COMMAND input that carries a message or a
	// handoff note (G1, G5): its command, text (as last edited, G2) and
	// sender.
	Message *session.Commanded `json:"message,omitempty"`
	// Request is set for a REQUEST input: an MCP client's request, which
	// the turn's output answers (I4).
	Request *session.Requested `json:"request,omitempty"`
}

// Command is a response to one of the session's interrupts, as
// respondToSession recorded it (the input's action_session.responded
// event); its wire form is session.Command's.
type Command = session.Command

// EventView is an input's event.
type EventView struct {
	ID         uuid.UUID       `json:"id"`
	Type       string          `json:"type"`
	Data       jsonvalue.Value `json:"data"`
	CommitTime time.Time       `json:"commit_time"`
	Position   int64           `json:"position"`
}

// Outcome is what a turn reports (T5): the session's next state and status,
// a reason (required for COMPLETED and FAILED) and the turn's output.
//
// Status WAITING is for a turn that pauses before gated tool calls (P1): it
// lists every call the session now waits on in Approvals (at least one;
// calls still waiting from an earlier pause keep their InterruptID and
// ExecutionID, P2) and leaves its continuation in Resume, which the turn
// taking the responses receives as Request.Resume.
type Outcome struct {
	State  jsonvalue.Value `json:"state"`
	Status string          `json:"status"`
	Reason string          `json:"reason,omitempty"`
	// Scope, with Status FAILED, is ScopeSession (the default) or
	// ScopeTurn: the turn fails, the session survives WAITING (G10).
	Scope string `json:"scope,omitempty"`
	// AmbientStatus, when set, becomes the session's one-line status
	// (G8), cut to MaxAmbientStatus characters, with the turn's commit.
	AmbientStatus string          `json:"ambient_status,omitempty"`
	Output        jsonvalue.Value `json:"output"`
	Approvals     []Approval      `json:"approvals,omitempty"`
	Resume        jsonvalue.Value `json:"resume,omitempty"`
}

// Approval is a gated tool call a turn paused before (P1).
type Approval struct {
	// InterruptID answers the request; stable while it waits (P2). Use
	// InterruptIDFor to derive it from the execution and the call.
	InterruptID uuid.UUID `json:"interrupt_id"`
	// ExecutionID is the execution that first paused before the call.
	ExecutionID  uuid.UUID `json:"execution_id"`
	ToolActionID uuid.UUID `json:"tool_action_id"`
	// ToolVersion is the tool action's version the call would run.
	ToolVersion int    `json:"tool_version"`
	ToolName    string `json:"tool_name"`
	// Input is the call's effective input (fixed input applied).
	Input jsonvalue.Value `json:"input"`
	// CallID is the model's id for the call.
	CallID string `json:"call_id"`
}

// InterruptIDFor derives a stable interrupt id for a call made by an
// execution, so a retried attempt pausing before the same call names the
// same interrupt.
func InterruptIDFor(executionID uuid.UUID, callID string) uuid.UUID {
	return uuid.NewSHA1(executionID, []byte(callID))
}

// HoldError is returned by a handler whose turn is to be held rather than
// failed (H1): the model refused (Cause REFUSED, not retried) or the turn
// ended without an outcome (Cause UNFINISHED, retried like any error, then
// held). Nothing the attempt did commits; its transcript is kept.
type HoldError struct {
	Cause       session.HoldCause
	Category    string // the provider's refusal category, if any
	Explanation string // the provider's explanation, if any
	Message     string
}

func (h *HoldError) Error() string {
	return string(h.Code()) + ": " + h.Message
}

// Code is the failure code of a held execution's error.
func (h *HoldError) Code() FailureCode {
	switch h.Cause {
	case CauseRefused:
		return FailRefused
	case CauseBudget:
		return FailBudget
	}
	return FailUnfinished
}

// Retried reports whether an attempt held for this cause is tried again
// while attempts remain: only UNFINISHED is (H1; a refusal or a spent
// budget would hold again).
func (h *HoldError) Retried() bool { return h.Cause == CauseUnfinished }

// Refused returns the HoldError for a provider refusal.
func Refused(category, explanation, message string) error {
	return &HoldError{Cause: CauseRefused, Category: category, Explanation: explanation, Message: message}
}

// Unfinished returns the HoldError for a turn that ended with no outcome.
func Unfinished(message string) error {
	return &HoldError{Cause: CauseUnfinished, Message: message}
}

// AsHold returns err's HoldError, or nil.
func AsHold(err error) *HoldError {
	var h *HoldError
	if errors.As(err, &h) {
		return h
	}
	return nil
}

// AttemptsPolicy is implemented by handlers with a retry policy of their
// own: MaxAttempts is how many attempts a turn's execution gets (T7).
type AttemptsPolicy interface {
	MaxAttempts() int
}

// Transcript collects an execution's entries (kind + JSON data) in order.
// Safe for concurrent use.
type Transcript struct {
	mu      sync.Mutex
	entries []Entry
	now     func() time.Time
	// publish, when set, is handed each entry as it is added, in order,
	// with the attempt that added it (issue 12: live transcripts).
	publish func(attempt int, e Entry)
	attempt int
}

// NewTranscript returns an empty transcript whose entries are stamped by
// now (for handlers' tests; the executor makes the real ones).
func NewTranscript(now func() time.Time) *Transcript { return &Transcript{now: now} }

// Entry is one transcript entry.
type Entry struct {
	Seq  int
	Kind string
	Data jsonvalue.Value
	At   time.Time
}

// Add appends an entry; data is encoded as JSON (an error is recorded as
// the entry's data instead).
func (t *Transcript) Add(kind string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	// A handler's text may hold NUL, which jsonb refuses: the entry would
	// make the whole outcome uncommittable (issue 10 item 4).
	raw = jsonvalue.Clean(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := Entry{Seq: len(t.entries) + 1, Kind: kind, Data: raw, At: t.now()}
	t.entries = append(t.entries, e)
	if t.publish != nil {
		t.publish(t.attempt, e)
	}
}

// Entries returns a copy of the entries so far.
func (t *Transcript) Entries() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Entry(nil), t.entries...)
}

// reset empties the transcript for attempt (its entries start again at 1).
func (t *Transcript) reset(attempt int) {
	t.mu.Lock()
	t.entries, t.attempt = nil, attempt
	t.mu.Unlock()
}

// permanentError marks an error that is not retried (T7).
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the turn fails at once.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// MaxAmbientStatus is the longest ambient status kept, in characters (G8).
const MaxAmbientStatus = 200

// Failure scopes (G10): how far a failed turn reaches. A SESSION failure
// (the default, T7) fails the session; a TURN failure fails only the turn:
// nothing it did commits, its inputs stay pending and the session waits
// WAITING with the reason until a new input arrives or an operator
// resumes it.
const (
	ScopeSession = "SESSION"
	ScopeTurn    = "TURN"
)

// turnScoped marks an error that fails the turn only (G10).
type turnScoped struct{ err error }

func (t turnScoped) Error() string { return t.err.Error() }
func (t turnScoped) Unwrap() error { return t.err }

// TurnScoped marks err as failing the turn only, not its session (G10);
// it is not retried.
func TurnScoped(err error) error { return Permanent(turnScoped{err}) }

// IsTurnScoped reports whether err was marked TurnScoped, or is an
// outcome FAILED with scope TURN turned into an error.
func IsTurnScoped(err error) bool {
	var t turnScoped
	return errors.As(err, &t)
}

// Spec is an action's handler settings: its config and, for kinds that
// run code, its source.
type Spec struct {
	Config jsonvalue.Value
	Source *string
}

// Env is what a handler or tool may do beyond computing, inside the
// transaction its turn (or call) commits in (T6, X4): read and write ledger
// records, find sessions and call tools. Record writes and calls commit with
// the turn or roll back with it.
type Env interface {
	// LedgerGet reads a record as the transaction sees it.
	LedgerGet(ctx context.Context, namespace, key string) (jsonvalue.Value, bool, error)
	// LedgerPut writes a record (its event is appended at commit) and returns its version.
	LedgerPut(ctx context.Context, namespace, key string, value jsonvalue.Value) (int64, error)
	// Session finds a session by action id and session id; nil when there is none (X6).
	Session(ctx context.Context, actionID, id string) (*SessionView, error)
	// CallTool calls a tool action with input and returns its output. A
	// tool whose owner requires approval is refused (fault.ApprovalRequired):
	// only a call a person approved reaches it (CallApprovedTool).
	CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error)
	// CallApprovedTool is CallTool for a call a person approved (P5): the
	// one way a handler reaches a tool that requires approval.
	CallApprovedTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error)
	// MayCall reports whether the running version may call tool action
	// actionID (issue 11: its grants and its author's policies), without
	// calling it or saying whether it exists: an agent offers its model
	// only tools it may call.
	MayCall(ctx context.Context, actionID string) (bool, error)
	// Now reads the service's clock.
	Now() time.Time
}

// Messenger is implemented by an Env whose code may message other
// sessions (G1): SendToSession delivers message to session id of action
// actionID as a COMMAND input MESSAGE sent by the running session (sender
// AGENT), in the turn's transaction, so it is delivered once, with the
// turn's commit. key is the message's idempotency key on the target; ""
// derives one from the execution. It returns the input's sequence.
type Messenger interface {
	SendToSession(ctx context.Context, actionID, id, message, key string) (int64, error)
}

// Run is what an Env acts for: the running execution, the action version
// whose code runs, and for a turn its session (SID 0 for a tool call). The
// Env's reach follows from it (T10, issue 11).
type Run struct {
	ExecutionID uuid.UUID
	Action      *action.Compiled
	SID         int64
	SessionID   string
}

// SessionView is a session as a handler reads it.
type SessionView struct {
	ID     string
	Input  jsonvalue.Value
	Status string
	// Inputs are the session's latest inputs (at most 100) in listing order,
	// each a JSON object; for a tool session, its calls (the transaction's own
	// uncommitted ones included).
	Inputs []jsonvalue.Value
	// InputCount is how many inputs the session has in all.
	InputCount int
}

// ToolHandler serves calls of a tool action (X1-X6).
type ToolHandler interface {
	// Call returns the call's output. Errors fail the call (and, for a call
	// made by a handler, that handler's attempt).
	Call(ctx context.Context, req *CallRequest) (jsonvalue.Value, error)
}

// CallRequest is one tool call.
type CallRequest struct {
	ActionID    uuid.UUID
	Version     int
	ExecutionID uuid.UUID
	Input       jsonvalue.Value
	// Session is the tool session the call records in; nil for a tool without one.
	Session *SessionView
	Env     Env
}

// Kind is a registered handler kind.
type Kind struct {
	// Name is the kind as actions name it, e.g. agent.echo.
	Name string
	// New validates the spec and returns the kind's turn handler. Errors
	// should be *fault.Error with code fault.InvalidConfig, naming the field
	// ("config..." or "source").
	New func(spec Spec) (Handler, error)
	// NewTool, when set, returns the kind's handler for tool calls.
	NewTool func(spec Spec) (ToolHandler, error)
	// Credential: the kind's handlers call back into the service, so each
	// turn gets a handler credential (Request.Credential, T10). Kinds that
	// run in-process need none.
	Credential bool
	// ToolRefs, when set, lists the tool actions a config refers to (an
	// agent's tool references): a version may call those without declaring
	// them in its permissions (issue 11). It reads configs leniently; a
	// config New refuses may list what it can.
	ToolRefs func(config jsonvalue.Value) []uuid.UUID
	// Secrets are top-level config keys holding secrets (the http kind's
	// signing secret): write-only, never returned by queries (Redact), and
	// kept from the previous version when an update sends Redacted for
	// them (KeepSecrets). Issue 10 item 9.
	Secrets []string
	// Model, when set, names the model a config's handler calls
	// ("provider", "model"), read leniently (ok false when the config names
	// none): what a spend cap prices (G8). Kinds without it call no model.
	Model func(config jsonvalue.Value) (provider, model string, ok bool)
}

// Redacted stands for a secret in a config read back through queries; sent
// in an update, it keeps the secret the current version has.
const Redacted = "(redacted)"

// Registry holds the handler kinds a server offers.
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry returns a registry with the given kinds.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{kinds: map[string]Kind{}}
	for _, k := range kinds {
		r.kinds[k.Name] = k
	}
	return r
}

// Names returns the registered kind names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.kinds))
	for n := range r.kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Check validates a kind with its config and source, and that it can serve
// tool calls when tool is set (an action.KindChecker). Errors:
// fault.UnknownKind (field kind), fault.InvalidConfig.
func (r *Registry) Check(kind string, config jsonvalue.Value, source *string, tool bool) error {
	spec := Spec{Config: config, Source: source}
	if tool {
		_, err := r.Tool(kind, spec)
		return err
	}
	_, err := r.Handler(kind, spec)
	return err
}

// ToolRefs lists the tool actions kind's config refers to (an
// action.Kinds); nil for kinds that refer to none or are unknown.
func (r *Registry) ToolRefs(kind string, config jsonvalue.Value) []uuid.UUID {
	if k, ok := r.kinds[kind]; ok && k.ToolRefs != nil {
		return k.ToolRefs(config)
	}
	return nil
}

// Redact returns config with the values of kind's secret keys replaced by
// Redacted (config itself when it has none or is not an object).
func (r *Registry) Redact(kind string, config jsonvalue.Value) jsonvalue.Value {
	return r.mapSecrets(kind, config, func(string, any) any { return Redacted })
}

// KeepSecrets returns config with each secret key whose value is Redacted
// set to that key's value in previous (the version being replaced); a key
// previous lacks keeps Redacted, which the kind then refuses.
func (r *Registry) KeepSecrets(kind string, config, previous jsonvalue.Value) jsonvalue.Value {
	var prev map[string]any
	if p, err := previous.Decode(); err == nil {
		prev, _ = p.(map[string]any)
	}
	return r.mapSecrets(kind, config, func(key string, v any) any {
		if s, ok := v.(string); ok && s == Redacted {
			if old, ok := prev[key]; ok {
				return old
			}
		}
		return v
	})
}

// mapSecrets rewrites the values of kind's secret keys in config with f.
func (r *Registry) mapSecrets(kind string, config jsonvalue.Value, f func(key string, v any) any) jsonvalue.Value {
	k, ok := r.kinds[kind]
	if !ok || len(k.Secrets) == 0 || len(config) == 0 {
		return config
	}
	v, err := config.Decode()
	m, isObject := v.(map[string]any)
	if err != nil || !isObject {
		return config
	}
	changed := false
	for _, key := range k.Secrets {
		if old, ok := m[key]; ok {
			m[key] = f(key, old)
			changed = true
		}
	}
	if !changed {
		return config
	}
	out, err := jsonvalue.Encode(m)
	if err != nil {
		return config
	}
	return out
}

// Model names the model a kind's config calls (Kind.Model); ok false for
// a kind that calls none or a config that names none.
func (r *Registry) Model(kind string, config jsonvalue.Value) (provider, model string, ok bool) {
	k, found := r.kinds[kind]
	if !found || k.Model == nil {
		return "", "", false
	}
	return k.Model(config)
}

// Credential reports whether kind's turns get a handler credential (T10).
func (r *Registry) Credential(kind string) bool { return r.kinds[kind].Credential }

// Handler returns the turn handler for kind configured with spec.
func (r *Registry) Handler(kind string, spec Spec) (Handler, error) {
	k, ok := r.kinds[kind]
	if !ok {
		return nil, fault.New(fault.UnknownKind, "kind", "unknown handler kind %q; known kinds: %v", kind, r.Names())
	}
	h, err := k.New(spec)
	return h, configError(err)
}

// Tool returns the tool handler for kind configured with spec.
func (r *Registry) Tool(kind string, spec Spec) (ToolHandler, error) {
	k, ok := r.kinds[kind]
	if !ok {
		return nil, fault.New(fault.UnknownKind, "kind", "unknown handler kind %q; known kinds: %v", kind, r.Names())
	}
	if k.NewTool == nil {
		return nil, fault.New(fault.InvalidConfig, "kind", "kind %q cannot serve tool calls", kind)
	}
	h, err := k.NewTool(spec)
	return h, configError(err)
}

func configError(err error) error {
	if err != nil && fault.As(err) == nil {
		return fault.New(fault.InvalidConfig, "config", "%v", err)
	}
	return err
}

// validate checks an outcome's shape (T5) and what a session with an end
// allows (E2, E3): final is the turn's final flag, ends whether the session
// has an end. The error message says what is wrong.
//
// Before the end no turn completes the session: COMPLETED is invalid (an
// ordinary turn of a session with an end keeps it OPEN). The final turn
// must complete it: OPEN is invalid. FAILED is a handler's to report in any
// turn; the end limits only OPEN and COMPLETED.
func (o *Outcome) validate(final, ends bool) error {
	if o == nil {
		return errors.New("the handler returned no outcome")
	}
	switch o.Status {
	case "OPEN":
		if final {
			return errors.New("this is the session's final turn: it must report COMPLETED with a reason, not OPEN")
		}
	case "COMPLETED", "FAILED":
		if o.Reason == "" {
			return fmt.Errorf("status %s needs a reason", o.Status)
		}
		if o.Status == "COMPLETED" && ends && !final {
			return errors.New("the session has an end and this is not its final turn: a turn before the end may keep the session OPEN, not complete it")
		}
	case "WAITING":
		if len(o.Approvals) == 0 {
			return errors.New("status WAITING is reported only by a turn that waits for an approval: list the gated calls in approvals")
		}
		if final {
			return errors.New("this is the session's final turn: it must report COMPLETED with a reason, not wait for an approval")
		}
	default:
		return fmt.Errorf("status %q is not one of OPEN, COMPLETED, FAILED", o.Status)
	}
	if len(o.Reason) > 1000 {
		return errors.New("reason is longer than 1000 bytes")
	}
	switch {
	case o.Scope == "" || o.Scope == ScopeSession:
	case o.Scope != ScopeTurn:
		return fmt.Errorf("scope %q is not one of SESSION, TURN", o.Scope)
	case o.Status != "FAILED":
		return errors.New("scope is given only with status FAILED")
	case final:
		return errors.New("this is the session's final turn: it must complete the session, not fail only the turn")
	}
	if len(o.Approvals) > 0 && o.Status != "WAITING" {
		return errors.New("approvals are listed only by a turn that reports WAITING")
	}
	seen := map[uuid.UUID]bool{}
	for i, a := range o.Approvals {
		if a.InterruptID == uuid.Nil || a.ExecutionID == uuid.Nil || a.ToolActionID == uuid.Nil || a.ToolVersion < 1 || seen[a.InterruptID] {
			return fmt.Errorf("approvals[%d] needs a distinct interrupt id, the execution that paused, the tool action and its version", i)
		}
		seen[a.InterruptID] = true
		if err := jsonvalue.Check(a.Input, fmt.Sprintf("approvals[%d].input", i)); err != nil {
			return err
		}
	}
	if len(o.Resume) > 0 {
		if err := jsonvalue.Check(o.Resume, "resume"); err != nil {
			return err
		}
	}
	for name, v := range map[string]jsonvalue.Value{"state": o.State, "output": o.Output} {
		if len(v) == 0 {
			continue
		}
		if err := jsonvalue.Check(v, name); err != nil {
			return err
		}
	}
	return nil
}

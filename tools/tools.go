// Package tools calls tool actions (SPEC X1-X6): directly, by an operator
// through GraphQL, or from a handler or another tool inside the caller's
// transaction. A tool with a session records each committed call as a CALL
// input of that session.
//
// How the X rules are met:
//   - X2 a call finds or creates its session in a short transaction of its
//     own before the call runs (INSERT ... ON CONFLICT DO NOTHING), so
//     concurrent first calls all succeed and a session whose first call rolls
//     back exists with no history; calls never lock the session row, and
//     CALL inputs take their sequence from a database sequence, so calls
//     never wait for one another.
//   - X3 the session's input must equal the call's mapped input; its status
//     is read when the call starts (a closed session fails the call with
//     SESSION_CLOSED before anything runs or is written).
//   - X4 the execution and the CALL input are written in the caller's
//     transaction: they commit or roll back with it.
//   - X5 a CALL input's order key is (transaction begin time, transaction
//     id, call number within the transaction); a transaction reads its own
//     uncommitted calls.
//   - X6 session lookups run in the caller's transaction at READ COMMITTED,
//     so they see a session created after the transaction began.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// MaxDepth is how deeply tool calls may nest (a tool calling a tool ...).
const MaxDepth = 8

// Service calls tools.
type Service struct {
	pool *pgxpool.Pool
	// sessionPool creates tool sessions in transactions of their own (X2).
	// It is separate from pool so that a call holding locks in its caller's
	// transaction can always get a connection for that, even when every
	// connection of pool is taken by callers waiting on those locks.
	sessionPool *pgxpool.Pool
	actions     *action.Store
	kinds       *turns.Registry
	clock       clock.Clock
	log         *slog.Logger

	// Authorities resolves what the action versions whose code runs may
	// reach (issue 11); nil: every version is unrestricted (as in dev mode).
	Authorities *auth.Authorities
	// Sessions, when set, lets turns message other sessions (G1,
	// turns.Messenger); nil: they cannot.
	Sessions *session.Store
}

// NewService returns a Service.
// It opens a small pool of its own (SessionPoolConns connections) on pool's
// database; Close releases it.
func NewService(pool *pgxpool.Pool, actions *action.Store, kinds *turns.Registry, c clock.Clock, log *slog.Logger) *Service {
	cfg := pool.Config()
	cfg.MaxConns, cfg.MinConns = SessionPoolConns, 0
	sp, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		// Only a malformed config fails here, and pool was built from it.
		panic(fmt.Sprintf("tools: session pool: %v", err))
	}
	// Lookups outside the caller's transaction (actions, versions, sessions)
	// go through the session pool too, for the same reason.
	lookups := action.NewStore(sp, c, kinds)
	return &Service{pool: pool, sessionPool: sp, actions: lookups, kinds: kinds, clock: c, log: log}
}

// SessionPoolConns is the size of the pool that creates tool sessions.
const SessionPoolConns = 4

// Close releases the service's own pool.
func (s *Service) Close() { s.sessionPool.Close() }

// SessionPool returns the service's own pool (see SessionPoolConns), for
// its statistics (/metrics, issue 12).
func (s *Service) SessionPool() *pgxpool.Pool { return s.sessionPool }

// Result is a committed (or, inside a caller's transaction, pending) call.
type Result struct {
	ExecutionID uuid.UUID
	ActionID    uuid.UUID
	Output      jsonvalue.Value
	// SID is the tool session's key; 0 for a tool without a session.
	SID       int64
	SessionID string
}

// Call makes a direct call (an operator's, through GraphQL or MCP) in a
// transaction of its own and commits it. Errors: fault.NotFound,
// fault.ActionInactive (the tool is disabled or archived), fault.NotATool,
// fault.BadInput (input fails the tool's inputSchema, field input),
// fault.SessionInputConflict, fault.SessionClosed, fault.CallFailed. When
// the principal on ctx may not READ the tool action (it holds CALL only),
// an unknown action, one that is not a tool and an inactive tool all
// answer NotFound with one message (issue 11: a refusal reveals nothing
// the caller may not read).
func (s *Service) Call(ctx context.Context, actionID uuid.UUID, input jsonvalue.Value) (*Result, error) {
	if err := jsonvalue.Check(input, "input"); err != nil {
		return nil, err
	}
	w := ledger.NewWriter(s.pool, s.clock.Now)
	defer w.Rollback(context.WithoutCancel(ctx))
	res, err := s.call(ctx, w, nil, 0, actionID, input, false)
	if err != nil {
		return nil, unusable(ctx, actionID, err)
	}
	if err := w.Commit(ctx); err != nil {
		return nil, fmt.Errorf("tools: commit call: %w", err)
	}
	return res, nil
}

// errTarget marks the refusals of a direct call's own target: unknown,
// inactive, not a tool (not those of the calls its code makes).
var errTarget = errors.New("the called action cannot be called")

// unusable is err as a direct caller who may not read tool action id sees
// it: whether id is unknown, not a tool or inactive is not said.
func unusable(ctx context.Context, id uuid.UUID, err error) error {
	if !errors.Is(err, errTarget) {
		return err
	}
	if p, ok := auth.From(ctx); !ok || p.Allows(auth.Read, auth.ActionResource(id)) {
		return err
	}
	return fault.New(fault.NotFound, "actionId", "no active tool action with this id (you may not read it to learn more)")
}

// Env returns the Env of the turn run describes: ledger reads and writes
// through w, session lookups, and tool calls recorded in w's transaction
// with run's execution as their parent. What it reaches is the version's
// authority (issue 11) and, for sessions, T10's rule: see env.
func (s *Service) Env(w *ledger.Writer, run turns.Run) turns.Env {
	return &env{s: s, w: w, caller: run.ExecutionID, run: run}
}

// call runs one tool call inside w's transaction. gate: refuse a tool whose
// owner requires approval (a handler's call no person approved).
// Each call is a span "tool.call" under the caller's span (issue 12).
func (s *Service) call(ctx context.Context, w *ledger.Writer, caller *uuid.UUID, depth int, actionID uuid.UUID, input jsonvalue.Value, gate bool) (res *Result, err error) {
	ctx, span := observe.Child(ctx, "tool.call", observe.ActionID.String(actionID.String()), observe.CallDepth.Int(depth))
	defer func() {
		if res != nil {
			span.SetAttributes(observe.ExecutionID.String(res.ExecutionID.String()))
		}
		if err != nil {
			span.SetAttributes(observe.ErrorCode.String(fault.CodeOf(err)))
		}
		observe.End(span, err)
	}()
	if depth > MaxDepth {
		return nil, fault.New(fault.CallFailed, "", "tool calls nest deeper than %d", MaxDepth)
	}
	a, err := s.actions.Get(ctx, actionID)
	if err != nil {
		return nil, err
	}
	// The target's own refusals are marked at depth 0 (see unusable).
	refuse := func(code, format string, args ...any) error {
		fe := fault.New(code, "actionId", format, args...)
		if depth == 0 {
			fe.Err = errTarget
		}
		return fe
	}
	if a == nil {
		return nil, refuse(fault.NotFound, "no action with this id")
	}
	if a.Status != action.StatusActive {
		return nil, refuse(fault.ActionInactive, "the tool action is %s", a.Status)
	}
	comp, err := s.actions.Compiled(ctx, a.ID, a.CurrentVersion)
	if err != nil {
		return nil, err
	}
	if comp.Tool == nil {
		return nil, refuse(fault.NotATool, "the action is not a tool")
	}
	if gate && comp.Tool.Approval {
		return nil, fault.New(fault.ApprovalRequired, "actionId",
			"the tool's owner requires a person's approval for every call: only an agent's direct call to it can wait for one")
	}
	decoded, err := input.Decode()
	if err != nil {
		return nil, fault.New(fault.InvalidJSON, "input", "%v", err)
	}
	var key *sessionKey
	var keyErr error
	if comp.Tool.Session != nil {
		key, keyErr = s.sessionKey(ctx, comp, decoded)
		if keyErr == nil {
			// A2: a call into an existing session runs the version the
			// session started with (its inputSchema and its code); the
			// current version only finds the session.
			if comp, err = s.pinned(ctx, comp, key.id); err != nil {
				return nil, err
			}
		}
	}
	if err := checkInput(comp, decoded); err != nil {
		return nil, err
	}
	if keyErr != nil {
		return nil, keyErr
	}
	var sess *session.Session
	if key != nil {
		sess, err = s.ensureSession(ctx, comp, key)
		if err != nil {
			return nil, err
		}
	}
	h, err := s.kinds.Tool(comp.Def.Kind, turns.Spec{Config: comp.Def.Config, Source: comp.Def.Source})
	if err != nil {
		return nil, err
	}
	// A failed call leaves nothing behind in the caller's transaction: its
	// execution row, its writes and its own calls are undone, so a caller
	// that goes on (an agent told of the failure) commits none of it.
	mark, err := w.Mark(ctx)
	if err != nil {
		return nil, err
	}
	res, err = s.run1(ctx, w, caller, depth, comp, h, sess, input)
	if err != nil {
		if rerr := w.RollbackTo(context.WithoutCancel(ctx), mark); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	return res, nil
}

// run1 runs one call once its tool, session and handler are known.
func (s *Service) run1(ctx context.Context, w *ledger.Writer, caller *uuid.UUID, depth int, comp *action.Compiled,
	h turns.ToolHandler, sess *session.Session, input jsonvalue.Value) (*Result, error) {
	var view *turns.SessionView
	tx, err := w.Tx(ctx)
	if err != nil {
		return nil, err
	}
	if sess != nil {
		// X3: the status as the call starts decides.
		status, err := session.StatusOf(ctx, tx, sess.SID)
		if err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		if status.Final() {
			return nil, fault.New(fault.SessionClosed, "", "the tool session %q is %s", sess.ID, status)
		}
		view, err = sessionView(ctx, tx, sess)
		if err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	execID := ledger.NewID() // time-ordered: children list oldest first by id
	var sid *int64
	if sess != nil {
		sid = &sess.SID
	}
	trace.SpanFromContext(ctx).SetAttributes(observe.ToolName.String(comp.Def.Name))
	var traceID *string
	if id := observe.TraceID(ctx); id != "" {
		traceID = &id
	}
	if err := turns.StartCall(ctx, tx, turns.CallExecution{ID: execID, ActionID: comp.ActionID, Version: comp.Version, SID: sid,
		ParentID: caller, Input: input, StartedAt: now, TraceID: traceID}); err != nil {
		return nil, err
	}
	out, err := s.run(ctx, h, &turns.CallRequest{ActionID: comp.ActionID, Version: comp.Version, ExecutionID: execID,
		Input: input, Session: view, Env: &env{s: s, w: w, caller: execID, depth: depth + 1,
			run: turns.Run{ExecutionID: execID, Action: comp}}})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		out = jsonvalue.Value("null")
	}
	if err := jsonvalue.Check(out, "output"); err != nil {
		return nil, fault.New(fault.CallFailed, "", "the tool's output cannot be stored: %s", messageOf(err))
	}
	if err := turns.FinishCall(ctx, tx, execID, out, s.clock.Now()); err != nil {
		return nil, err
	}
	res := &Result{ExecutionID: execID, ActionID: comp.ActionID, Output: out}
	if sess != nil {
		res.SID, res.SessionID = sess.SID, sess.ID
		// X4, X5: one CALL input, ordered by the transaction's begin time,
		// its id and the call's number within it.
		err := session.RecordCall(ctx, tx, session.Call{SID: sess.SID, ExecutionID: execID, Caller: caller, Number: w.NextCall(),
			InputSize: len(input), At: now})
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkInput validates a call's input against the version's tool inputSchema.
func checkInput(comp *action.Compiled, decoded any) error {
	if comp.Tool == nil || comp.Tool.Schema == nil {
		return nil
	}
	if err := comp.Tool.Schema.Validate(decoded); err != nil {
		return fault.New(fault.BadInput, "input", "the input does not match the tool's inputSchema: %s", messageOf(err))
	}
	return nil
}

// run calls the tool handler, turning a panic into an error.
func (s *Service) run(ctx context.Context, h turns.ToolHandler, req *turns.CallRequest) (out jsonvalue.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fault.New(fault.CallFailed, "", "the tool panicked: %v", r)
		}
	}()
	out, err = h.Call(ctx, req)
	if err != nil && fault.As(err) == nil {
		err = &fault.Error{Code: fault.CallFailed, Message: err.Error(), Err: err}
	}
	return out, err
}

// sessionKey is a call's tool session: its id and mapped input.
type sessionKey struct {
	id  string
	raw jsonvalue.Value
}

// sessionKey maps a call's input to its tool session (X1). Errors:
// fault.CallFailed (the mapping or id fails), fault.BadInput (the mapped
// input fails the session schema).
func (s *Service) sessionKey(ctx context.Context, comp *action.Compiled, toolInput any) (*sessionKey, error) {
	mapped, err := comp.Tool.Session.Eval(ctx, expr.Vars{ToolInput: toolInput})
	if err != nil {
		return nil, fault.New(fault.CallFailed, "input", "the tool session mapping failed: %v", err)
	}
	raw, err := jsonvalue.Encode(mapped)
	if err != nil {
		return nil, fault.New(fault.CallFailed, "input", "the tool session input is not JSON: %v", err)
	}
	sessInput, err := raw.Decode()
	if err != nil {
		return nil, err
	}
	if comp.Session.Schema != nil {
		if err := comp.Session.Schema.Validate(sessInput); err != nil {
			return nil, fault.New(fault.BadInput, "input", "the tool session input does not match inputSchema: %s", messageOf(err))
		}
	}
	v, err := comp.Session.ID.Eval(ctx, expr.Vars{Session: &expr.Session{Input: sessInput}})
	if err != nil {
		return nil, fault.New(fault.CallFailed, "input", "the session id expression failed: %v", err)
	}
	id, ok := v.(string)
	if !ok || id == "" || len(id) > session.MaxIDLen || strings.IndexByte(id, 0) >= 0 {
		return nil, fault.New(fault.CallFailed, "input", "the session id must be 1-%d bytes of text", session.MaxIDLen)
	}
	return &sessionKey{id: id, raw: raw}, nil
}

// pinned returns the compiled version an existing tool session id started
// with, or comp (the current version) when there is no such session yet.
func (s *Service) pinned(ctx context.Context, comp *action.Compiled, id string) (*action.Compiled, error) {
	var version int
	err := s.sessionPool.QueryRow(ctx, `SELECT version FROM sessions WHERE action_id = $1 AND id = $2`, comp.ActionID, id).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && version == comp.Version) {
		return comp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tools: session version: %w", err)
	}
	old, err := s.actions.Compiled(ctx, comp.ActionID, version)
	if err != nil {
		return nil, err
	}
	if old.Tool == nil || old.Tool.Session == nil {
		return comp, nil // not a tool session of an earlier version
	}
	return old, nil
}

// ensureSession finds the call's tool session or creates it (at comp's
// version), committed at once in its own transaction (X2). Errors:
// fault.SessionInputConflict, fault.SessionClosed.
func (s *Service) ensureSession(ctx context.Context, comp *action.Compiled, key *sessionKey) (*session.Session, error) {
	id, raw := key.id, key.raw
	now := s.clock.Now()
	if err := session.EnsureToolSession(ctx, s.sessionPool, comp.ActionID, id, comp.Version, raw, now); err != nil {
		return nil, err
	}
	sess, err := session.NewStore(s.sessionPool, s.clock).Get(ctx, comp.ActionID, id)
	if err != nil {
		return nil, err
	}
	if sess == nil {
		return nil, fmt.Errorf("tools: session %q vanished", id)
	}
	if sess.Status.Final() {
		return nil, fault.New(fault.SessionClosed, "", "the tool session %q is %s", id, sess.Status)
	}
	if !jsonvalue.Equal(sess.Input, raw) {
		return nil, fault.New(fault.SessionInputConflict, "input", "the tool session %q exists with a different input", id)
	}
	return sess, nil
}

// ViewInputs is how many of a session's latest inputs a script sees in
// session["inputs"]; session["input_count"] gives the total.
const ViewInputs = 100

// sessionView reads a session and its latest inputs as tx sees them.
func sessionView(ctx context.Context, tx pgx.Tx, sess *session.Session) (*turns.SessionView, error) {
	ins, total, err := session.LatestInputs(ctx, tx, sess.SID, ViewInputs)
	if err != nil {
		return nil, err
	}
	v := &turns.SessionView{ID: sess.ID, Input: sess.Input, Status: string(sess.Status), InputCount: total}
	if len(ins) == 0 {
		return v, nil
	}
	var calls []uuid.UUID
	for _, in := range ins {
		if in.ExecutionID != nil {
			calls = append(calls, *in.ExecutionID)
		}
	}
	execs := map[uuid.UUID][2][]byte{}
	rows, err := tx.Query(ctx, `SELECT id, input, output FROM executions WHERE id = ANY($1)`, calls)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id uuid.UUID
		var in, out []byte
		if err := rows.Scan(&id, &in, &out); err != nil {
			rows.Close()
			return nil, err
		}
		execs[id] = [2][]byte{in, out}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, in := range ins {
		item := map[string]any{"identity": in.Identity, "kind": in.Kind, "delivered_at": in.DeliveredAt.Format(time.RFC3339Nano)}
		if in.ExecutionID != nil {
			x := execs[*in.ExecutionID]
			item["execution_id"] = in.ExecutionID.String()
			item["input"], item["output"] = json.RawMessage(orNull(x[0])), json.RawMessage(orNull(x[1]))
		}
		if in.CallerExecutionID != nil {
			item["caller_execution_id"] = in.CallerExecutionID.String()
		}
		raw, err := jsonvalue.Encode(item)
		if err != nil {
			return nil, err
		}
		v.Inputs = append(v.Inputs, raw)
	}
	return v, nil
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

func messageOf(err error) string {
	if fe := fault.As(err); fe != nil {
		return fe.Message
	}
	return err.Error()
}

// env is a handler's or tool's Env. What it reaches (issue 11, T10):
//   - ledger namespaces its version's authority may read or write;
//   - tools its authority may call (a tool that requires approval only
//     through CallApprovedTool);
//   - with session(): a turn's own session, a tool's own tool sessions (not
//     the turn sessions of its action), the tool sessions of tools it may
//     call, and the sessions of the actions its definition names in
//     permissions.sessions. Anything else is refused with one message,
//     whether or not it exists; a session outside that reach of an action
//     it may reach reads as none.
type env struct {
	s      *Service
	w      *ledger.Writer
	caller uuid.UUID
	depth  int
	run    turns.Run

	auth *auth.Authority // resolved on first use
	sent int             // messages sent, for their derived keys
}

// authority is the running version's authority, resolved once per Env in
// its transaction (a policy shrunk since the last turn applies now).
func (e *env) authority(ctx context.Context) (*auth.Authority, error) {
	if e.auth != nil {
		return e.auth, nil
	}
	if e.run.Action == nil {
		return nil, nil // acts for nobody: nothing is allowed
	}
	tx, err := e.w.Tx(ctx)
	if err != nil {
		return nil, err
	}
	a, err := e.s.Authorities.For(ctx, tx, e.run.Action.Author, e.run.Action.Grants)
	if err != nil {
		return nil, err
	}
	e.auth = a
	return a, nil
}

// refused is the one refusal of the reach checks: it names what the code
// asked for (its own words) and nothing about whether it exists.
func refused(what string) error {
	return fault.New(fault.Forbidden, "", "not allowed: this action may not %s (see its permissions)", what)
}

func (e *env) LedgerGet(ctx context.Context, ns, key string) (jsonvalue.Value, bool, error) {
	a, err := e.authority(ctx)
	if err != nil {
		return nil, false, err
	}
	if !a.MayRead(ns) {
		return nil, false, refused(fmt.Sprintf("read ledger namespace %q", ns))
	}
	return e.w.Get(ctx, ns, key)
}

func (e *env) LedgerPut(ctx context.Context, ns, key string, value jsonvalue.Value) (int64, error) {
	a, err := e.authority(ctx)
	if err != nil {
		return 0, err
	}
	if !a.MayWrite(ns) {
		return 0, refused(fmt.Sprintf("write ledger namespace %q", ns))
	}
	return e.w.Put(ctx, ns, key, value)
}

func (e *env) Now() time.Time { return e.s.clock.Now() }

// SendToSession sends a message to another session as the running turn's
// session (turns.Messenger, G1): sender AGENT "<action id>/<session id>",
// in the turn's transaction. It needs the target action in
// permissions.sessions and, outside dev mode, the author's RESPOND on it.
// Errors: BAD_USER_INPUT (action_id, message, key), FORBIDDEN, and Send's.
func (e *env) SendToSession(ctx context.Context, actionID, id, message, key string) (int64, error) {
	if e.s.Sessions == nil || e.run.SID == 0 || e.run.Action == nil {
		return 0, turns.Permanent(errors.New("only a turn of a session can message other sessions"))
	}
	aid, err := uuid.Parse(actionID)
	if err != nil {
		return 0, fault.New(fault.BadInput, "action_id", "%q is not a UUID", actionID)
	}
	if aid == e.run.Action.ActionID && id == e.run.SessionID {
		return 0, fault.New(fault.BadInput, "id", "a turn does not message its own session: its outcome is its state")
	}
	a, err := e.authority(ctx)
	if err != nil {
		return 0, err
	}
	if !a.MayMessage(aid) {
		return 0, refused("message that session: it needs the action in permissions.sessions and its author's RESPOND on it")
	}
	e.sent++
	if key == "" {
		key = fmt.Sprintf("%s/%d", e.run.ExecutionID, e.sent)
	}
	tx, err := e.w.Tx(ctx)
	if err != nil {
		return 0, err
	}
	sender := session.Sender{Kind: session.SenderAgent, ID: e.run.Action.ActionID.String() + "/" + e.run.SessionID}
	in, err := e.s.Sessions.SendTx(ctx, tx, aid, id, session.SendRequest{Message: &message, IdempotencyKey: key}, sender)
	if err != nil {
		return 0, err
	}
	return in.Seq, nil
}

func (e *env) Session(ctx context.Context, actionID, id string) (*turns.SessionView, error) {
	aid, err := uuid.Parse(actionID)
	if err != nil {
		return nil, fault.New(fault.BadInput, "action_id", "%q is not a UUID", actionID)
	}
	own := e.run.Action != nil && aid == e.run.Action.ActionID
	toolOnly := false
	switch {
	case own && e.run.SID != 0 && id == e.run.SessionID: // a turn's own session (T10)
	case own && e.run.SID == 0: // a tool's own tool sessions (X6)
		// Only those: an action that is a tool and has turns too must not
		// let a turn read its other sessions by calling itself (T10).
		toolOnly = true
	default:
		a, err := e.authority(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case !own && a.MayReadSessions(aid):
		case !own && a.MayCall(aid) && e.s.isTool(ctx, aid):
			toolOnly = true // the call history of a tool it may call
		default:
			return nil, refused("read that session: a turn reads its own session, the tool sessions of tools it may call and the sessions of actions in permissions.sessions")
		}
	}
	tx, err := e.w.Tx(ctx)
	if err != nil {
		return nil, err
	}
	sid, kind, ok, err := session.Lookup(ctx, tx, aid, id)
	if err != nil || !ok {
		return nil, err
	}
	if toolOnly && kind != session.KindTool {
		return nil, nil // not a tool session: as if there were none
	}
	sess, err := session.BySID(ctx, tx, sid)
	if err != nil || sess == nil {
		return nil, err
	}
	return sessionView(ctx, tx, sess)
}

// isTool reports whether action id's current version is a tool (false
// when it does not exist or cannot be read).
func (s *Service) isTool(ctx context.Context, id uuid.UUID) bool {
	a, err := s.actions.Get(ctx, id)
	if err != nil || a == nil {
		return false
	}
	comp, err := s.actions.Compiled(ctx, a.ID, a.CurrentVersion)
	return err == nil && comp.Tool != nil
}

// MayCall reads the authority outside the turn's transaction (it begins
// none: a turn that calls nothing still commits with others, issue 14);
// the calls themselves check it again in the transaction.
func (e *env) MayCall(ctx context.Context, actionID string) (bool, error) {
	aid, err := uuid.Parse(actionID)
	if err != nil || e.run.Action == nil {
		return false, nil
	}
	a := e.auth
	if a == nil {
		if a, err = e.s.Authorities.For(ctx, nil, e.run.Action.Author, e.run.Action.Grants); err != nil {
			return false, err
		}
	}
	return a.MayCall(aid), nil
}

func (e *env) CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	return e.callTool(ctx, actionID, input, true)
}

func (e *env) CallApprovedTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	return e.callTool(ctx, actionID, input, false)
}

func (e *env) callTool(ctx context.Context, actionID string, input jsonvalue.Value, gate bool) (jsonvalue.Value, error) {
	aid, err := uuid.Parse(actionID)
	if err != nil {
		return nil, fault.New(fault.BadInput, "action_id", "%q is not a UUID", actionID)
	}
	a, err := e.authority(ctx)
	if err != nil {
		return nil, err
	}
	if !a.MayCall(aid) {
		return nil, refused("call tool action " + aid.String())
	}
	var caller *uuid.UUID
	if e.caller != uuid.Nil {
		c := e.caller
		caller = &c
	}
	res, err := e.s.call(ctx, e.w, caller, e.depth, aid, input, gate)
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Requests to an action served over MCP (issue 17, SPEC I4). A request is
// delivered to a session of the action as a REQUEST input, through
// DeliverRequest: the action's mcp block maps it to a session with the
// rules of a trigger's role (a start creates the session, or reaches it
// when it is open with the same input; a resume reaches an open session),
// and it runs in a turn of its own. The executor answers it when a turn of
// the session finishes its work (QueueSettle): the input's execution is
// then that turn's, whose output is the answer. A turn that pauses for an
// approval, or is held, leaves it waiting; a responder's SKIP of the held
// turn that took it answers it without an execution (Respond).

// RequestedType is the type of the event that records a request (I4).
const RequestedType = ledger.RequestedType

// MaxRequestKeyLen is the longest request key, in bytes.
const MaxRequestKeyLen = 128

var requestKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// Request is a client's request to an action served over MCP.
type Request struct {
	// Key names the request in its session: the input's identity is
	// request/<Key>. Delivering a request with a key the session has
	// already is not a second delivery: DeliverRequest returns the first,
	// so a client that lost its connection can wait for the same answer.
	// 1-128 letters, digits, _ . : or -.
	Key string
	// Tool is the MCP tool the client called (the mcp block's name).
	Tool string
	// Arguments are the call's arguments, a JSON object.
	Arguments jsonvalue.Value
	// Principal is the authenticated caller (never client input).
	Principal string
	// MCPSession is the client's Mcp-Session-Id, "" when it sent none.
	MCPSession string
}

// Requested is the data of a request's action_session.requested event:
// what the handler sees of the REQUEST input (turns.InputView.Event).
type Requested struct {
	ActionID   uuid.UUID       `json:"action_id"`
	SessionID  string          `json:"session_id"`
	Key        string          `json:"key"`
	Tool       string          `json:"tool"`
	Arguments  jsonvalue.Value `json:"arguments"`
	Principal  string          `json:"principal"`
	MCPSession string          `json:"mcp_session,omitempty"`
}

// Delivered is a request's REQUEST input and its session.
type Delivered struct {
	SID       int64
	SessionID string
	Input     Input
	// Again: the session had the request already (same key); nothing was
	// delivered now.
	Again bool
}

// DeliverRequest delivers req to a session of comp, the current version of
// an action with an mcp block (I4), and returns its REQUEST input. In one
// transaction it finds or creates the session (a start mapping) or finds
// the open one (a resume id), appends the action_session.requested event
// recording the request and delivers it as a pending REQUEST input that
// starts a turn at once (no window: a client waits). A session it creates
// starts at the event's commit time (S3) with its end computed then (E1);
// an open session of an older version keeps its version. req.Arguments
// must match the mcp block's inputSchema.
//
// Errors (a request that fails records nothing): fault.BadInput (key,
// arguments; the mapping, the session id or the session's end cannot be
// computed from them, or the mapped input fails the session's
// inputSchema), fault.SessionInputConflict (a start naming an open session
// with another input), fault.SessionClosed (the session is closed: a
// closed session never starts again), fault.NotFound (a resume naming no
// session).
func (st *Store) DeliverRequest(ctx context.Context, comp *action.Compiled, req Request) (*Delivered, error) {
	if comp.MCP == nil || comp.Session == nil {
		return nil, fault.New(fault.NotFound, "", "this action is not served over MCP")
	}
	if !requestKeyPattern.MatchString(req.Key) {
		return nil, fault.New(fault.BadInput, "key", "a request key is 1-%d letters, digits, _ . : or -", MaxRequestKeyLen)
	}
	if err := jsonvalue.Check(req.Arguments, "arguments"); err != nil {
		return nil, err
	}
	args, err := req.Arguments.Decode()
	if err != nil {
		return nil, fault.New(fault.BadInput, "arguments", "the arguments are not JSON: %v", err)
	}
	if _, ok := args.(map[string]any); !ok {
		return nil, fault.New(fault.BadInput, "arguments", "the arguments are a JSON object")
	}
	if comp.MCP.Schema != nil {
		if err := comp.MCP.Schema.Validate(args); err != nil {
			return nil, fault.WithField(err, "arguments")
		}
	}
	vars := expr.Vars{Request: &expr.Request{Arguments: args, Principal: req.Principal, MCPSession: req.MCPSession}}
	target, err := mapRequest(ctx, comp, vars)
	if err != nil {
		return nil, err
	}
	var out *Delivered
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var err error
		out, err = st.deliverRequest(ctx, tx, comp, req, target)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// requestTarget is the session a request names: with a start mapping its
// input too.
type requestTarget struct {
	id    string
	start bool
	input jsonvalue.Value
	value any // input decoded
}

// mapRequest evaluates the mcp block's session role for a request.
func mapRequest(ctx context.Context, comp *action.Compiled, vars expr.Vars) (requestTarget, error) {
	bad := func(field string, err error) error {
		return fault.New(fault.BadInput, "arguments", "%s could not be computed from this request: %v", field, err)
	}
	m := comp.MCP
	if m.ResumeID != nil {
		id, err := evalID(ctx, m.ResumeID, vars)
		if err != nil {
			return requestTarget{}, bad("mcp.session.resume.id", err)
		}
		return requestTarget{id: id}, nil
	}
	mapped, err := m.Start.Eval(ctx, vars)
	if err != nil {
		return requestTarget{}, bad("mcp.session.start.input", err)
	}
	raw, err := jsonvalue.Encode(mapped)
	if err == nil {
		err = jsonvalue.Check(raw, "")
	}
	if err != nil {
		return requestTarget{}, bad("mcp.session.start.input", err)
	}
	input, err := raw.Decode()
	if err != nil {
		return requestTarget{}, err
	}
	if comp.Session.Schema != nil {
		if err := comp.Session.Schema.Validate(input); err != nil {
			return requestTarget{}, fault.New(fault.BadInput, "arguments", "the session input mapped from this request does not match session.inputSchema: %v", err)
		}
	}
	id, err := evalID(ctx, comp.Session.ID, expr.Vars{Session: &expr.Session{Input: input}})
	if err != nil {
		return requestTarget{}, bad("session.id", err)
	}
	return requestTarget{id: id, start: true, input: raw, value: input}, nil
}

func (st *Store) deliverRequest(ctx context.Context, tx pgx.Tx, comp *action.Compiled, req Request, tg requestTarget) (*Delivered, error) {
	now := st.clock.Now()
	identity := "request/" + req.Key
	s, err := lockSession(ctx, tx, comp.ActionID, tg.id)
	if err != nil {
		return nil, err
	}
	created := false
	if s == nil && tg.start {
		ends, err := evalEnd(ctx, comp.Session, tg.value, now)
		if err != nil {
			return nil, fault.New(fault.BadInput, "arguments", "session.ends could not be computed for the session this request starts: %v", err)
		}
		// G7: a singleton's slot is taken as a start trigger takes it; a
		// request finding it held is refused, naming the holder.
		slot, err := freeSlot(ctx, tx, comp, tg.id, tg.value, "arguments")
		if err != nil {
			return nil, err
		}
		// The origin is set once the event is appended (startedBy).
		s, err = scanSession(tx.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, ends_at, created_at, updated_at,
				display_title, max_usd, slot)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $6, $8, $9, $10) ON CONFLICT (action_id, id) DO NOTHING RETURNING `+sessionColumns,
			comp.ActionID, tg.id, comp.Version, []byte(tg.input), Open, now, ends, titleOf(ctx, comp.Session, tg.value), capOf(comp.Session), slot))
		switch {
		case err == nil:
			created = true
		case errors.Is(err, pgx.ErrNoRows):
			// Created meanwhile by a concurrent first request: go on with it.
			if s, err = lockSession(ctx, tx, comp.ActionID, tg.id); err != nil {
				return nil, err
			}
		case isSlotRace(err):
			return nil, slotRaced("arguments")
		default:
			return nil, fmt.Errorf("session: deliver request: create session: %w", err)
		}
	}
	if s == nil {
		return nil, fault.New(fault.NotFound, "arguments", "no session %q of this action to resume (mcp.session.resume names an open session)", tg.id)
	}
	if !created {
		// The same request again (a client that lost its connection): the
		// input it has, whatever became of the session since.
		rows, err := tx.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND identity = $2`, s.SID, identity)
		if err != nil {
			return nil, fmt.Errorf("session: deliver request: %w", err)
		}
		in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
		if err == nil {
			return st.again(ctx, tx, s, in, req)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("session: deliver request: %w", err)
		}
		switch {
		case s.Status.Final():
			return nil, fault.New(fault.SessionClosed, "arguments", "the session %q is %s: it takes no requests (a closed session never starts again)", s.ID, s.Status)
		case tg.start && !jsonvalue.Equal(s.Input, tg.input):
			return nil, fault.New(fault.SessionInputConflict, "arguments", "the open session %q has a different input than this request maps to", s.ID)
		}
	}
	eventID := ledger.NewID()
	data, err := json.Marshal(Requested{ActionID: comp.ActionID, SessionID: s.ID, Key: req.Key, Tool: req.Tool,
		Arguments: req.Arguments, Principal: req.Principal, MCPSession: req.MCPSession})
	if err != nil {
		return nil, err
	}
	// A request starts a turn at once when the session is OPEN (a turn that
	// is running takes it up when it settles); a WAITING session keeps it
	// pending until it is OPEN again (P3), unless it waits after a failed
	// turn (G10).
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE sessions SET `+WakeOnInput("$2")+`
		WHERE sid = $1 RETURNING input_count`, s.SID, now).Scan(&seq); err != nil {
		return nil, fmt.Errorf("session: deliver request: %w", err)
	}
	rows, err := tx.Query(ctx, `INSERT INTO session_inputs (sid, seq, identity, kind, event_id, triggers, starts_turn, status,
			byte_size, delivered_at, order_key)
		VALUES ($1, $2::bigint, $3, $4, $5, '{}', true, $6, $7, $8, lpad($2::bigint::text, 20, '0'))
		RETURNING `+InputColumns, s.SID, seq, identity, KindRequest, eventID, InputPending, len(data), now)
	if err != nil {
		return nil, fmt.Errorf("session: deliver request: %w", err)
	}
	in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
	if err != nil {
		return nil, fmt.Errorf("session: deliver request: %w", err)
	}
	timers := created && comp.Session.Timed()
	if err := (Notice{SIDs: []int64{s.SID}, Turns: true, Timers: timers}).Send(ctx, tx); err != nil {
		return nil, err
	}
	evs, err := ledger.Append(ctx, tx, now, ledger.NewEvent{ID: eventID, Type: RequestedType, Data: data})
	if err != nil {
		return nil, err
	}
	if created {
		if err := startedBy(ctx, tx, comp.Session, s, tg.value, evs[0]); err != nil {
			return nil, err
		}
	}
	return &Delivered{SID: s.SID, SessionID: s.ID, Input: in}, nil
}

// again is a request whose key the session has already: the same request
// (same caller and arguments) gets the input it has; anything else is a
// conflict, so a key learnt from elsewhere reads nobody else's answer.
func (st *Store) again(ctx context.Context, tx pgx.Tx, s *Session, in Input, req Request) (*Delivered, error) {
	var first Requested
	if in.EventID != nil {
		var raw []byte
		if err := tx.QueryRow(ctx, `SELECT data FROM events WHERE id = $1`, *in.EventID).Scan(&raw); err != nil {
			return nil, fmt.Errorf("session: deliver request: %w", err)
		}
		if err := json.Unmarshal(raw, &first); err != nil {
			return nil, fmt.Errorf("session: deliver request: %w", err)
		}
	}
	if first.Principal != req.Principal || !jsonvalue.Equal(first.Arguments, req.Arguments) {
		return nil, fault.New(fault.IdempotencyConflict, "key", "this session had a request with this key from another caller or with other arguments: use a new key")
	}
	return &Delivered{SID: s.SID, SessionID: s.ID, Input: in, Again: true}, nil
}

// lockSession reads and row-locks the session of actionID named id, or
// returns nil.
func lockSession(ctx context.Context, tx pgx.Tx, actionID uuid.UUID, id string) (*Session, error) {
	s, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: deliver request: %w", err)
	}
	return s, nil
}

// startedBy finishes the start of a session a request created: its origin
// is the request's event, and its start that event's commit time (S3),
// which the ledger may have put after the clock's reading; its end moves
// with it (E1) and a timed version's session gets its timer.
func startedBy(ctx context.Context, tx pgx.Tx, cs *action.CompiledSession, s *Session, input any, origin ledger.Event) error {
	c := Clock{StartedAt: s.StartedAt, EndsAt: s.EndsAt}
	if !origin.CommitTime.Equal(s.StartedAt) {
		ends, err := evalEnd(ctx, cs, input, origin.CommitTime)
		if err != nil {
			return fault.New(fault.BadInput, "arguments", "session.ends could not be computed for the session this request starts: %v", err)
		}
		c = Clock{StartedAt: origin.CommitTime, EndsAt: ends}
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET origin_event_id = $2, started_at = $3, ends_at = $4 WHERE sid = $1`,
		s.SID, origin.ID, c.StartedAt, c.EndsAt); err != nil {
		return fmt.Errorf("session: deliver request: %w", err)
	}
	if !cs.Timed() {
		return nil
	}
	due := c.WakeAfter(cs, c.StartedAt, true)
	if due.IsZero() {
		return nil
	}
	return setTimer(ctx, tx, s.SID, due)
}

// RequestState is where a request stands, as one snapshot read it.
type RequestState struct {
	Session *Session
	Input   Input
	// Waiting are the session's pending interrupts (approvals and holds), in
	// the order they were raised.
	Waiting []Interrupt
}

// Answered reports whether the request has its answer (Input.AnsweredAt).
func (r *RequestState) Answered() bool { return r.Input.AnsweredAt != nil }

// ReadRequest reads a REQUEST input (session sid, sequence seq), its session
// and the session's pending interrupts in one snapshot; nil when there is
// no such input.
func (st *Store) ReadRequest(ctx context.Context, sid, seq int64) (*RequestState, error) {
	var out *RequestState
	err := st.ReadConsistent(ctx, func(q ledger.Querier) error {
		s, err := BySID(ctx, q, sid)
		if err != nil || s == nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND seq = $2 AND kind = $3`, sid, seq, KindRequest)
		if err != nil {
			return err
		}
		in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		rows, err = q.Query(ctx, `SELECT `+interruptColumns+` FROM session_interrupts WHERE sid = $1 AND status = $2 ORDER BY ord`, sid, InterruptPending)
		if err != nil {
			return err
		}
		waiting, err := pgx.CollectRows(rows, scanInterrupt)
		if err != nil {
			return err
		}
		out = &RequestState{Session: s, Input: in, Waiting: waiting}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("session: read request: %w", err)
	}
	return out, nil
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// MaxNoteLen is the longest note of a hold answer, in bytes (H3).
const MaxNoteLen = 1024

// Interrupt is something a WAITING session waits on: a gated tool call a
// turn paused before (APPROVAL, P1) or a held turn (HOLD, H2).
type Interrupt struct {
	ID   uuid.UUID
	SID  int64
	Kind InterruptKind
	// Turn is the turn that first paused before the call (APPROVAL) or the
	// held turn (HOLD); ExecutionID that turn's execution.
	Turn        int
	ExecutionID uuid.UUID
	// APPROVAL: the tool action and version the call would run, its name,
	// the model's call id and the effective input.
	ToolActionID *uuid.UUID
	ToolVersion  *int
	ToolName     *string
	CallID       *string
	Input        jsonvalue.Value
	// HOLD: REFUSED or UNFINISHED, with the provider's category and
	// explanation of a refusal when it gave them.
	Cause       *HoldCause
	Category    *string
	Explanation *string
	Status      InterruptStatus
	Decision    *string
	Response    jsonvalue.Value
	Responder   *string
	AnsweredAt  *time.Time
	// CommandSeq is the sequence of the COMMAND input the answer created.
	CommandSeq *int64
	CreatedAt  time.Time
	// TurnResumed reports whether Turn resumed from approval responses
	// (turns.Turn.Resumed; a held one cannot be skipped), when the read
	// brought it along (the inbox's reads do); nil otherwise.
	TurnResumed *bool
}

const interruptColumns = `id, sid, kind, turn, execution_id, tool_action_id, tool_version, tool_name, call_id, input,
	cause, category, explanation, status, decision, response, responder, answered_at, command_seq, created_at`

func scanInterrupt(row pgx.CollectableRow) (Interrupt, error) {
	var in Interrupt
	err := row.Scan(&in.ID, &in.SID, &in.Kind, &in.Turn, &in.ExecutionID, &in.ToolActionID, &in.ToolVersion, &in.ToolName,
		&in.CallID, &in.Input, &in.Cause, &in.Category, &in.Explanation, &in.Status, &in.Decision, &in.Response,
		&in.Responder, &in.AnsweredAt, &in.CommandSeq, &in.CreatedAt)
	in.CreatedAt = in.CreatedAt.UTC()
	if in.AnsweredAt != nil {
		t := in.AnsweredAt.UTC()
		in.AnsweredAt = &t
	}
	return in, err
}

// Response answers one interrupt: exactly one of Approval and Hold.
type Response struct {
	Approval *ApprovalResponse `json:"approval"`
	Hold     *HoldResponse     `json:"hold"`
}

// ApprovalResponse answers a gated call (P5). Decision is APPROVE or DENY;
// Input, when set, replaces the call's input (the tool reference's fixed
// input still applies over it); it is not allowed with DENY.
type ApprovalResponse struct {
	Decision string          `json:"decision"`
	Reason   string          `json:"reason"`
	Input    jsonvalue.Value `json:"input"`
}

// HoldResponse answers a held turn (H3, H4). Decision is RETRY or SKIP;
// Note (at most MaxNoteLen bytes) is shown to the agent with a retry.
type HoldResponse struct {
	Decision string `json:"decision"`
	Note     string `json:"note"`
}

// Command is an answer to one of a session's interrupts as it travels:
// the data of the action_session.responded event that records it (P5,
// H5), stored with the interrupt, and what a handler reads of the COMMAND
// input that delivers it (turns.InputView.Command). Declared once, here.
type Command struct {
	ActionID  uuid.UUID `json:"action_id"`
	SessionID string    `json:"session_id"`
	// InterruptID is the interrupt answered (a UUID).
	InterruptID string        `json:"interrupt_id"`
	Kind        InterruptKind `json:"kind"`
	Decision    Decision      `json:"decision"`
	// Reason is an approval's reason; Note a hold answer's note (<= MaxNoteLen).
	Reason string `json:"reason,omitempty"`
	Note   string `json:"note,omitempty"`
	// Input replaces the gated call's input (approval, optional); the tool
	// reference's fixed input still applies over it.
	Input     jsonvalue.Value `json:"input,omitempty"`
	Responder string          `json:"responder"`
}

// AnswerCheck decides whether the responder may give resp to in (issue 11,
// docs/security.md "Who may answer"). Respond calls it inside its
// transaction, once the interrupt is known to wait for resp and before
// anything is written; an error refuses the answer as it is.
type AnswerCheck func(ctx context.Context, in *Interrupt, resp Response) error

// Respond answers one of a session's interrupts for responder (the
// authenticated principal, never client input) and returns the COMMAND
// input it delivered (P5, H3-H5). may, when not nil, is asked first
// whether responder may give this answer. In one transaction it appends an
// action_session.responded event recording the decision, replacement input,
// reason or note and responder, delivers it as a COMMAND input, marks the
// interrupt ANSWERED and opens the session so a turn of its own takes the
// answer. SKIP delivers the input already consumed and runs no turn: the
// session goes on without the held turn's inputs.
//
// Errors: fault.BadInput (response, response.approval.*, response.hold.*),
// fault.NotFound (actionId, id, interruptId), fault.SessionClosed (the
// session is final; closing ends its interrupts), fault.AlreadyAnswered,
// fault.InterruptStale, fault.SessionHeld, fault.SkipNotAllowed, and
// whatever may refuses with.
func (st *Store) Respond(ctx context.Context, actionID uuid.UUID, id, interruptID string, resp Response, responder string, may AnswerCheck) (*Input, error) {
	data, err := checkResponse(resp)
	if err != nil {
		return nil, err
	}
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	iid, perr := uuid.Parse(interruptID)
	var out *Input
	var kind InterruptKind
	repeated := false
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		now := st.clock.Now()
		s, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: respond: %w", err)
		}
		if perr != nil {
			return fault.New(fault.NotFound, "interruptId", "the session has no interrupt with this id")
		}
		rows, err := tx.Query(ctx, `SELECT `+interruptColumns+` FROM session_interrupts WHERE id = $1 AND sid = $2 FOR UPDATE`, iid, s.SID)
		if err != nil {
			return fmt.Errorf("session: respond: %w", err)
		}
		in, err := pgx.CollectExactlyOneRow(rows, scanInterrupt)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "interruptId", "the session has no interrupt with this id")
		}
		if err != nil {
			return fmt.Errorf("session: respond: %w", err)
		}
		if s.Status.Final() {
			return fault.New(fault.SessionClosed, "id", "the session is %s; its interrupts ended with it", s.Status)
		}
		switch in.Status {
		case InterruptAnswered:
			// G1: the same answer again by the same responder (a client
			// retrying) gets the first one's input.
			if same, err := sameAnswer(&in, data, responder); err != nil {
				return err
			} else if same && in.CommandSeq != nil {
				rows, err := tx.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND seq = $2`, s.SID, *in.CommandSeq)
				if err != nil {
					return err
				}
				first, err := pgx.CollectExactlyOneRow(rows, ScanInput)
				if err != nil {
					return fmt.Errorf("session: respond: %w", err)
				}
				out, kind = &first, in.Kind
				repeated = true
				return nil
			}
			return fault.New(fault.AlreadyAnswered, "interruptId", "this interrupt was answered already (%s by %s)", deref(in.Decision), deref(in.Responder))
		case InterruptClosed:
			return fault.New(fault.InterruptStale, "interruptId", "the session no longer waits on this interrupt")
		}
		if err := checkKind(ctx, tx, s, &in, resp); err != nil {
			return err
		}
		if may != nil {
			if err := may(ctx, &in, resp); err != nil {
				return err
			}
		}
		data.ActionID, data.SessionID, data.InterruptID, data.Kind, data.Responder = actionID, s.ID, in.ID.String(), in.Kind, responder
		raw, err := json.Marshal(data)
		if err != nil {
			return err
		}
		// The input refers to the event, which is appended last (taking the
		// ledger head); the reference is checked at commit.
		eventID := ledger.NewID()
		skip := resp.Hold != nil && Decision(resp.Hold.Decision) == Skip
		status := InputPending
		if skip {
			status = InputConsumed
		}
		var seq int64
		if err := tx.QueryRow(ctx, `UPDATE sessions SET input_count = input_count + 1, status = $4, reason = NULL, archived_at = NULL,
				resume = CASE WHEN $3 THEN NULL ELSE resume END, next_turn_at = $2, updated_at = $2
			WHERE sid = $1 RETURNING input_count`, s.SID, now, skip, Open).Scan(&seq); err != nil {
			return fmt.Errorf("session: respond: %w", err)
		}
		rows, err = tx.Query(ctx, `INSERT INTO session_inputs (sid, seq, identity, kind, event_id, triggers, starts_turn, status,
				byte_size, delivered_at, order_key, command, sender_kind, sender_id)
			VALUES ($1, $2::bigint, $3, $8, $4, '{}', true, $5, $6, $7, lpad($2::bigint::text, 20, '0'), $9, $10, $11)
			RETURNING `+InputColumns, s.SID, seq, "command/"+in.ID.String(), eventID, status, len(raw), now, KindCommand,
			CommandAnswer, SenderOperator, responder)
		if err != nil {
			return fmt.Errorf("session: respond: command: %w", err)
		}
		cmd, err := pgx.CollectExactlyOneRow(rows, ScanInput)
		if err != nil {
			return fmt.Errorf("session: respond: command: %w", err)
		}
		out = &cmd
		kind = in.Kind
		if _, err := tx.Exec(ctx, `UPDATE session_interrupts SET status = $7, decision = $2, response = $3, responder = $4,
			answered_at = $5, command_seq = $6 WHERE id = $1`, in.ID, data.Decision, raw, responder, now, seq, InterruptAnswered); err != nil {
			return fmt.Errorf("session: respond: %w", err)
		}
		if skip {
			// I4: the requests the skipped turn took get no answer but this.
			if _, err := tx.Exec(ctx, `UPDATE session_inputs SET answered_at = $2
				WHERE sid = $1 AND kind = 'REQUEST' AND answered_at IS NULL AND status <> 'PENDING'`, s.SID, now); err != nil {
				return fmt.Errorf("session: respond: %w", err)
			}
		}
		if err := (Notice{SIDs: []int64{s.SID}, Interrupts: true, Turns: true}).Send(ctx, tx); err != nil {
			return err
		}
		_, err = ledger.Append(ctx, tx, now, ledger.NewEvent{ID: eventID, Type: ledger.RespondedType, Data: raw})
		return err
	})
	if err != nil {
		return nil, err
	}
	if repeated {
		return out, nil
	}
	st.Metrics.Interrupt(string(kind), "answered")
	if st.Log != nil {
		st.Log.Info("interrupt answered", "interrupt", iid, "kind", kind, "decision", data.Decision,
			"action", actionID, "session", id, "responder", responder)
	}
	return out, nil
}

// sameAnswer reports whether an answered interrupt was answered with d (its
// decision, reason, note and input) by responder.
func sameAnswer(in *Interrupt, d Command, responder string) (bool, error) {
	if deref(in.Responder) != responder || len(in.Response) == 0 {
		return false, nil
	}
	var had Command
	if err := json.Unmarshal(in.Response, &had); err != nil {
		return false, fmt.Errorf("session: response of %s: %w", in.ID, err)
	}
	return had.Decision == d.Decision && had.Reason == d.Reason && had.Note == d.Note &&
		jsonvalue.Equal(orNull(had.Input), orNull(d.Input)), nil
}

func orNull(v jsonvalue.Value) jsonvalue.Value {
	if len(v) == 0 {
		return jsonvalue.Value("null")
	}
	return v
}

// missing explains a respond to a session that does not exist.
func (st *Store) missing(ctx context.Context, q ledger.Querier, actionID uuid.UUID) error {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM actions WHERE id = $1)`, actionID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fault.New(fault.NotFound, "actionId", "no action with this id")
	}
	return fault.New(fault.NotFound, "id", "this action has no session with this id")
}

// checkResponse validates a response's shape and returns its event data
// (decision, reason, note, input).
func checkResponse(resp Response) (Command, error) {
	var d Command
	switch {
	case (resp.Approval == nil) == (resp.Hold == nil):
		return d, fault.New(fault.BadInput, "response", "give exactly one of response.approval and response.hold")
	case resp.Approval != nil:
		a := resp.Approval
		if dec := Decision(a.Decision); dec != Approve && dec != Deny {
			return d, fault.New(fault.BadInput, "response.approval.decision", "decision is APPROVE or DENY")
		}
		if err := checkText(a.Reason, MaxReasonLen, "response.approval.reason"); err != nil {
			return d, err
		}
		if len(a.Input) > 0 && string(a.Input) != "null" {
			if Decision(a.Decision) == Deny {
				return d, fault.New(fault.BadInput, "response.approval.input", "a denied call runs no input: leave input out")
			}
			if err := jsonvalue.Check(a.Input, "response.approval.input"); err != nil {
				return d, err
			}
			if !strings.HasPrefix(strings.TrimSpace(string(a.Input)), "{") {
				return d, fault.New(fault.BadInput, "response.approval.input", "the replacement input is a JSON object")
			}
			d.Input = a.Input
		}
		d.Decision, d.Reason = Decision(a.Decision), a.Reason
	default:
		h := resp.Hold
		if dec := Decision(h.Decision); dec != Retry && dec != Skip {
			return d, fault.New(fault.BadInput, "response.hold.decision", "decision is RETRY or SKIP")
		}
		if err := checkText(h.Note, MaxNoteLen, "response.hold.note"); err != nil {
			return d, err
		}
		d.Decision, d.Note = Decision(h.Decision), h.Note
	}
	return d, nil
}

func checkText(s string, max int, field string) error {
	if len(s) > max || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fault.New(fault.BadInput, field, "at most %d bytes of text", max)
	}
	return nil
}

// checkKind checks that the response fits the interrupt: an approval answer
// for an approval request while no turn is held, a hold answer for a hold,
// and no SKIP for a turn that resumed from approval responses (H4).
func checkKind(ctx context.Context, tx pgx.Tx, s *Session, in *Interrupt, resp Response) error {
	if in.Kind == InterruptApproval {
		if resp.Approval == nil {
			return fault.New(fault.BadInput, "response.hold", "this interrupt is an approval request: answer it with response.approval")
		}
		var held *int
		if err := tx.QueryRow(ctx, `SELECT turn FROM session_interrupts WHERE sid = $1 AND kind = $2 AND status = 'PENDING'`,
			s.SID, InterruptHold).Scan(&held); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if held != nil {
			return fault.New(fault.SessionHeld, "interruptId", "the session holds turn %d: answer its hold first", *held)
		}
		return nil
	}
	if resp.Hold == nil {
		return fault.New(fault.BadInput, "response.approval", "this interrupt is a held turn: answer it with response.hold")
	}
	if Decision(resp.Hold.Decision) == Skip {
		var resumed bool
		if err := tx.QueryRow(ctx, `SELECT resume IS NOT NULL FROM session_turns WHERE sid = $1 AND number = $2`,
			s.SID, in.Turn).Scan(&resumed); err != nil {
			return err
		}
		if resumed {
			return fault.New(fault.SkipNotAllowed, "response.hold.decision", "%s", SkipRefusal(in.Turn))
		}
	}
	return nil
}

// SkipRefusal is why SKIP cannot answer the hold of turn, a turn that
// resumed from approval responses (H4): the text of SKIP_NOT_ALLOWED, and
// of Hold.skipRefusal before anyone tries.
func SkipRefusal(turn int) string {
	return fmt.Sprintf("turn %d resumed from approval responses, which cannot be given again: retry it or close the session", turn)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// InterruptsByID reads interrupts by id, in the order of ids (missing ones
// are left out).
func (st *Store) InterruptsByID(ctx context.Context, ids []uuid.UUID) ([]Interrupt, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := st.pool.Query(ctx, `SELECT `+interruptColumns+` FROM session_interrupts i
		JOIN unnest($1::uuid[]) WITH ORDINALITY AS x(id, n) USING (id) ORDER BY x.n`, ids)
	if err != nil {
		return nil, fmt.Errorf("session: interrupts: %w", err)
	}
	return pgx.CollectRows(rows, scanInterrupt)
}

// Interrupts lists a session's interrupts of one kind (InterruptApproval or
// InterruptHold) in the order they were raised, optionally of one status.
func (st *Store) Interrupts(ctx context.Context, sid int64, kind InterruptKind, status *InterruptStatus) ([]Interrupt, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+interruptColumns+` FROM session_interrupts
		WHERE sid = $1 AND kind = $2 AND ($3::text IS NULL OR status = $3) ORDER BY ord`, sid, kind, status)
	if err != nil {
		return nil, fmt.Errorf("session: interrupts: %w", err)
	}
	return pgx.CollectRows(rows, scanInterrupt)
}

// InputBySeq reads one input of a session; nil when there is none.
func (st *Store) InputBySeq(ctx context.Context, sid, seq int64) (*Input, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND seq = $2`, sid, seq)
	if err != nil {
		return nil, fmt.Errorf("session: input: %w", err)
	}
	in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &in, nil
}

// ResponseOf decodes an answered interrupt's response (the event data of
// its answer); nil when it is not answered.
func ResponseOf(in *Interrupt) (*Answer, error) {
	if in.Status != InterruptAnswered || len(in.Response) == 0 {
		return nil, nil
	}
	var d Command
	if err := json.Unmarshal(in.Response, &d); err != nil {
		return nil, fmt.Errorf("session: response of %s: %w", in.ID, err)
	}
	a := &Answer{Decision: d.Decision, Reason: d.Reason, Note: d.Note, Input: d.Input, Responder: d.Responder, CommandSeq: in.CommandSeq}
	if in.AnsweredAt != nil {
		a.At = *in.AnsweredAt
	}
	return a, nil
}

// Answer is how an interrupt was answered.
type Answer struct {
	Decision   Decision
	Reason     string
	Note       string
	Input      jsonvalue.Value
	Responder  string
	At         time.Time
	CommandSeq *int64
}

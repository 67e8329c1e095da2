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
	"github.com/actionsledger/actionsledger/ledger"
)

// CommandKind says what a COMMAND input carries (G1).
type CommandKind string

const (
	// CommandAnswer answers an interrupt (respondToSession, P5, H3).
	CommandAnswer CommandKind = "ANSWER"
	// CommandMessage is a message for the session's next turn.
	CommandMessage CommandKind = "MESSAGE"
	// CommandHandoff is a predecessor's handoff note, the first input of
	// its successor (G5).
	CommandHandoff CommandKind = "HANDOFF"
	// CommandInterrupt ends the running turn early (G9); applied at once.
	CommandInterrupt CommandKind = "INTERRUPT"
	// CommandResume wakes a session waiting after a failed turn or parked
	// (G4, G10); applied at once.
	CommandResume CommandKind = "RESUME"
)

// SenderKind is who sent a command, as the server saw it (G1).
type SenderKind string

const (
	SenderOperator SenderKind = "OPERATOR" // a person or client, by its principal
	SenderAgent    SenderKind = "AGENT"    // another session's turn
	SenderSystem   SenderKind = "SYSTEM"   // the service itself
)

// Sender is who sent a command: stamped by the server, never taken from
// the client (G1).
type Sender struct {
	Kind SenderKind `json:"kind"`
	ID   string     `json:"id"`
}

// Limits of a command (G1, G5).
const (
	MaxMessageLen        = 20000 // bytes of a message or handoff note
	MaxIdempotencyKeyLen = 200   // bytes of an idempotency key
)

// Commanded is the data of the action_session.commanded event that records
// a message or control sent to a session (G1), and what a handler reads of
// a MESSAGE or HANDOFF input (turns.InputView.Message).
type Commanded struct {
	ActionID       uuid.UUID   `json:"action_id"`
	SessionID      string      `json:"session_id"`
	Command        CommandKind `json:"command"`
	Message        string      `json:"message,omitempty"`
	Sender         Sender      `json:"sender"`
	IdempotencyKey string      `json:"idempotency_key,omitempty"`
	// Turn is the turn an INTERRUPT ended.
	Turn int `json:"turn,omitempty"`
}

// SendRequest is what a client sends to a session: a message, or a
// control (CommandInterrupt, CommandResume), with its idempotency key.
type SendRequest struct {
	Message        *string
	Command        *CommandKind
	IdempotencyKey string
}

// Send delivers a message or a control to a session as a COMMAND input,
// recorded by an action_session.commanded event, for sender (G1). A
// MESSAGE waits PENDING for a turn: the next one when the session is
// OPEN, or once it is woken (a session waiting on interrupts keeps it
// pending, P3, G9). An INTERRUPT (G9) or RESUME (G4, G10) applies at once
// in the same transaction and is delivered CONSUMED. The idempotency key
// is the input's identity: repeating a request with the same key returns
// the first input, whatever happened since; the same key with another
// request is IDEMPOTENCY_CONFLICT.
//
// Errors: fault.BadInput (message, command, idempotencyKey, id),
// fault.NotFound (actionId, id), fault.IdempotencyConflict,
// fault.SessionClosed, and the controls' own (TURN_NOT_RUNNING,
// SESSION_NOT_RESUMABLE).
func (st *Store) Send(ctx context.Context, actionID uuid.UUID, id string, req SendRequest, sender Sender) (*Input, error) {
	var out *Input
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var err error
		out, err = st.SendTx(ctx, tx, actionID, id, req, sender)
		return err
	})
	if err != nil {
		return nil, err
	}
	if st.Log != nil {
		st.Log.Info("command sent", "action", actionID, "session", id, "command", deref((*string)(out.Command)), "sender", sender.ID, "input", out.Seq)
	}
	return out, nil
}

// SendTx is Send in tx, the caller's transaction: a turn that messages
// another session (G1, sender AGENT) delivers with its own commit, once.
// Same errors as Send.
func (st *Store) SendTx(ctx context.Context, tx pgx.Tx, actionID uuid.UUID, id string, req SendRequest, sender Sender) (*Input, error) {
	kind, err := checkSend(req)
	if err != nil {
		return nil, err
	}
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	identity := "sent/" + req.IdempotencyKey
	var out *Input
	err = func() error {
		now := st.clock.Now()
		s, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: send: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND identity = $2`, s.SID, identity)
		if err != nil {
			return err
		}
		had, err := pgx.CollectRows(rows, ScanInput)
		if err != nil {
			return err
		}
		if len(had) == 1 {
			h := had[0]
			if h.Command == nil || *h.Command != kind || deref(h.Message) != deref(req.Message) {
				return fault.New(fault.IdempotencyConflict, "idempotencyKey", "this key was used for another command to the session (input %d)", h.Seq)
			}
			out = &h
			return nil
		}
		if s.Status.Final() {
			return fault.New(fault.SessionClosed, "id", "the session is %s: it takes no more commands", s.Status)
		}
		c := Commanded{ActionID: actionID, SessionID: s.ID, Command: kind, Message: deref(req.Message), Sender: sender,
			IdempotencyKey: req.IdempotencyKey}
		status := InputConsumed
		switch kind {
		case CommandMessage:
			status = InputPending
		case CommandInterrupt:
			if c.Turn, err = interruptTx(ctx, tx, s, sender.ID, now); err != nil {
				return err
			}
		case CommandResume:
			if err := resumeTx(ctx, tx, s, sender.ID, now); err != nil {
				return err
			}
		}
		out, err = deliverCommand(ctx, tx, s, c, identity, status, now)
		return err
	}()
	return out, err
}

// checkSend validates a SendRequest and returns its command kind.
func checkSend(req SendRequest) (CommandKind, error) {
	k := req.IdempotencyKey
	if k == "" || len(k) > MaxIdempotencyKeyLen || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
		return "", fault.New(fault.BadInput, "idempotencyKey", "an idempotency key is 1-%d bytes of text", MaxIdempotencyKeyLen)
	}
	switch {
	case (req.Message == nil) == (req.Command == nil):
		return "", fault.New(fault.BadInput, "message", "give exactly one of message and command")
	case req.Message != nil:
		if strings.TrimSpace(*req.Message) == "" {
			return "", fault.New(fault.BadInput, "message", "a message has some text")
		}
		if err := checkText(*req.Message, MaxMessageLen, "message"); err != nil {
			return "", err
		}
		return CommandMessage, nil
	case *req.Command == CommandInterrupt || *req.Command == CommandResume:
		return *req.Command, nil
	default:
		return "", fault.New(fault.BadInput, "command", "command is INTERRUPT or RESUME (send text as message)")
	}
}

// deliverCommand appends c's action_session.commanded event and delivers
// it to s (whose row tx holds) as a COMMAND input with identity and
// status: a PENDING one wakes the session as any input does (WakeOnInput).
func deliverCommand(ctx context.Context, tx pgx.Tx, s *Session, c Commanded, identity string, status InputStatus, now time.Time) (*Input, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	eventID := ledger.NewID()
	set := `input_count = input_count + 1, updated_at = $2`
	if status == InputPending {
		set = WakeOnInput("$2")
	}
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE sessions SET `+set+` WHERE sid = $1 RETURNING input_count`, s.SID, now).Scan(&seq); err != nil {
		return nil, fmt.Errorf("session: deliver command: %w", err)
	}
	var key *string
	if c.IdempotencyKey != "" {
		key = &c.IdempotencyKey
	}
	var msg *string
	if c.Message != "" {
		msg = &c.Message
	}
	rows, err := tx.Query(ctx, `INSERT INTO session_inputs (sid, seq, identity, kind, event_id, triggers, starts_turn, status,
			byte_size, delivered_at, order_key, command, message, sender_kind, sender_id, idempotency_key)
		VALUES ($1, $2::bigint, $3, $4, $5, '{}', true, $6, $7, $8, lpad($2::bigint::text, 20, '0'), $9, $10, $11, $12, $13)
		RETURNING `+InputColumns, s.SID, seq, identity, KindCommand, eventID, status, len(raw), now,
		c.Command, msg, c.Sender.Kind, c.Sender.ID, key)
	if err != nil {
		return nil, fmt.Errorf("session: deliver command: %w", err)
	}
	in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
	if err != nil {
		return nil, fmt.Errorf("session: deliver command: %w", err)
	}
	if err := (Notice{SIDs: []int64{s.SID}, Turns: status == InputPending}).Send(ctx, tx); err != nil {
		return nil, err
	}
	if _, err := ledger.Append(ctx, tx, now, ledger.NewEvent{ID: eventID, Type: ledger.CommandedType, Data: raw}); err != nil {
		return nil, err
	}
	return &in, nil
}

// CommandStatus is where a command stands (G1), derived from its input,
// the turn that took it and its session: PENDING until a turn takes it,
// DELIVERED while a turn that took it runs or is held, ACCEPTED once a
// committed turn took it (a control: once applied), FAILED when its
// session failed with it untaken, CANCELLED when it was deleted or its
// session closed or completed with it untaken.
type CommandStatus string

const (
	CommandPending   CommandStatus = "PENDING"
	CommandDelivered CommandStatus = "DELIVERED"
	CommandAccepted  CommandStatus = "ACCEPTED"
	CommandFailed    CommandStatus = "FAILED"
	CommandCancelled CommandStatus = "CANCELLED"
)

// CommandStatusOf derives the status of a COMMAND input (see
// CommandStatus); "" for other inputs.
func (st *Store) CommandStatusOf(ctx context.Context, in *Input) (CommandStatus, error) {
	if in.Kind != KindCommand {
		return "", nil
	}
	switch in.Status {
	case InputConsumed:
		return CommandAccepted, nil
	case InputReceived:
		return CommandDelivered, nil
	case InputCancelled:
		return CommandCancelled, nil
	}
	var status Status
	var running bool
	if err := st.pool.QueryRow(ctx, `SELECT s.status, EXISTS (SELECT 1 FROM turn_inputs ti JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn
			WHERE ti.sid = $1 AND ti.seq = $2 AND t.status = 'RUNNING') FROM sessions s WHERE s.sid = $1`, in.SID, in.Seq).Scan(&status, &running); err != nil {
		return "", fmt.Errorf("session: command status: %w", err)
	}
	switch {
	case status == Failed:
		return CommandFailed, nil
	case status.Final():
		return CommandCancelled, nil
	case running:
		return CommandDelivered, nil
	}
	return CommandPending, nil
}

// InputChange is one change of a pending message (G2).
type InputChange struct {
	N      int
	Change string // EDIT, DELETE or PROMOTE
	Before *string
	After  *string
	By     Sender
	At     time.Time
}

// Input changes (G2).
const (
	ChangeEdit    = "EDIT"
	ChangeDelete  = "DELETE"
	ChangePromote = "PROMOTE"
)

// EditInput replaces the text of a pending message (G2); DeleteInput
// cancels it (CANCELLED: no turn takes it); PromoteInput puts it before the
// other pending messages, so the next turn takes it ("run this next").
// Each is allowed only while the message is PENDING and no running turn
// took it, and is recorded as an InputChange by by. They return the input
// as changed.
//
// Errors: fault.BadInput (sequence: not a message; message), fault.NotFound
// (actionId, id, sequence), fault.SessionClosed, fault.InputNotPending (a
// turn took it, or it was deleted).
func (st *Store) EditInput(ctx context.Context, actionID uuid.UUID, id string, seq int64, message string, by Sender) (*Input, error) {
	if strings.TrimSpace(message) == "" {
		return nil, fault.New(fault.BadInput, "message", "a message has some text")
	}
	if err := checkText(message, MaxMessageLen, "message"); err != nil {
		return nil, err
	}
	return st.changeInput(ctx, actionID, id, seq, ChangeEdit, &message, by)
}

// DeleteInput: see EditInput.
func (st *Store) DeleteInput(ctx context.Context, actionID uuid.UUID, id string, seq int64, by Sender) (*Input, error) {
	return st.changeInput(ctx, actionID, id, seq, ChangeDelete, nil, by)
}

// PromoteInput: see EditInput.
func (st *Store) PromoteInput(ctx context.Context, actionID uuid.UUID, id string, seq int64, by Sender) (*Input, error) {
	return st.changeInput(ctx, actionID, id, seq, ChangePromote, nil, by)
}

func (st *Store) changeInput(ctx context.Context, actionID uuid.UUID, id string, seq int64, change string, text *string, by Sender) (*Input, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	var out *Input
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		now := st.clock.Now()
		// The session's row first, as a claim locks it: an edit and a
		// claim that takes the message cannot both win.
		s, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: change input: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 AND seq = $2`, s.SID, seq)
		if err != nil {
			return err
		}
		in, err := pgx.CollectExactlyOneRow(rows, ScanInput)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "sequence", "the session has no input %d", seq)
		}
		if err != nil {
			return err
		}
		if in.Kind != KindCommand || in.Command == nil || *in.Command != CommandMessage {
			return fault.New(fault.BadInput, "sequence", "input %d is not a message: only messages sent with sendToSession can be changed", seq)
		}
		if s.Status.Final() {
			return fault.New(fault.SessionClosed, "id", "the session is %s", s.Status)
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turn_inputs ti JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn
			WHERE ti.sid = $1 AND ti.seq = $2 AND t.status = 'RUNNING')`, s.SID, seq).Scan(&taken); err != nil {
			return err
		}
		if in.Status != InputPending || taken {
			what := "a turn took it"
			if in.Status == InputCancelled {
				what = "it was deleted"
			}
			return fault.New(fault.InputNotPending, "sequence", "input %d can no longer be changed: %s", seq, what)
		}
		// The same change again (a client retrying after losing the answer)
		// changes nothing and records nothing: applied once (G2).
		if (change == ChangeEdit && in.Message != nil && *in.Message == *text) || (change == ChangePromote && in.PromotedAt != nil) {
			out = &in
			return nil
		}
		var set string
		args := []any{s.SID, seq, now}
		switch change {
		case ChangeEdit:
			set, args = `message = $4, byte_size = octet_length($4)`, append(args, *text)
		case ChangeDelete:
			set = `status = 'CANCELLED'`
		case ChangePromote:
			set = `promoted_at = $3`
		}
		rows, err = tx.Query(ctx, `UPDATE session_inputs SET `+set+` WHERE sid = $1 AND seq = $2 AND $3::timestamptz IS NOT NULL RETURNING `+InputColumns, args...)
		if err != nil {
			return err
		}
		changed, err := pgx.CollectExactlyOneRow(rows, ScanInput)
		if err != nil {
			return fmt.Errorf("session: change input: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_input_changes (sid, seq, n, change, before, after, by_kind, by_id, at)
			SELECT $1, $2, coalesce(max(n), 0) + 1, $3, $4, $5, $6, $7, $8 FROM session_input_changes WHERE sid = $1 AND seq = $2`,
			s.SID, seq, change, in.Message, text, by.Kind, by.ID, now); err != nil {
			return fmt.Errorf("session: change input: %w", err)
		}
		if change == ChangeDelete {
			// Nothing else pending may start a turn now.
			if _, err := tx.Exec(ctx, `UPDATE sessions s SET next_turn_at = NULL WHERE sid = $1 AND NOT EXISTS (
				SELECT 1 FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'PENDING' AND i.starts_turn)`, s.SID); err != nil {
				return err
			}
		}
		out = &changed
		return Notice{SIDs: []int64{s.SID}}.Send(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InputChanges reads the changes of a session's input, oldest first (G2).
func (st *Store) InputChanges(ctx context.Context, sid, seq int64) ([]InputChange, error) {
	rows, err := st.pool.Query(ctx, `SELECT n, change, before, after, by_kind, by_id, at FROM session_input_changes
		WHERE sid = $1 AND seq = $2 ORDER BY n`, sid, seq)
	if err != nil {
		return nil, fmt.Errorf("session: input changes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (InputChange, error) {
		var c InputChange
		err := r.Scan(&c.N, &c.Change, &c.Before, &c.After, &c.By.Kind, &c.By.ID, &c.At)
		c.At = c.At.UTC()
		return c, err
	})
}

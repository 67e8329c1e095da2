package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/actionsledger/actionsledger/action"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// TurnsChannel is the NOTIFY channel that wakes the turn executor.
const TurnsChannel = "actionsledger_turns"

// Session is one session of an action (S1: action id + session id address it).
type Session struct {
	SID           int64 // internal key
	ActionID      uuid.UUID
	ID            string
	Version       int
	Input         jsonvalue.Value
	State         jsonvalue.Value
	Status        Status
	Reason        *string
	OriginEventID *uuid.UUID // the earliest-committed start event (S3); the one that creates a session is not also its input (S2)
	StartedAt     time.Time  // commit time of the origin (S3)
	EndsAt        *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ClosedAt      *time.Time
	TurnCount     int
	LeaseExpires  *time.Time
	// Wait says what wakes a session WAITING after a turn that failed with
	// scope TURN or was interrupted (WaitInput), or parked (WaitPark);
	// nil otherwise (G4, G10).
	Wait *Wait
	// InterruptTurn is the running turn an interrupt asked to end (G9);
	// nil when none did.
	InterruptTurn *int
	// Handoff is the note kept when the session was closed (G5).
	Handoff *string
	// PredecessorSID and SuccessorSID link a chain of sessions (G5): a
	// successor continues a session closed with successor: true, or
	// retries a FAILED one.
	PredecessorSID *int64
	SuccessorSID   *int64
	// ArchivedAt hides the session from lists (G6); nil: shown.
	ArchivedAt *time.Time
	// Slot is the singleton slot the session holds while not final (G7).
	Slot *string
	// DisplayTitle (G8) is rendered from session.displayTitle at creation;
	// AmbientStatus is the one-line status its turns last reported.
	DisplayTitle  *string
	AmbientStatus *string
	// MaxUSD is the session's spend cap in US dollars (G8), copied from
	// session.maxPerSessionUsd at creation; nil: no cap. Spent is what its
	// turns' model calls used (Unpriced is not counted there).
	MaxUSD *float64
	Spent  Usage
}

// Running reports whether a worker holds the session's lease at now.
func (s *Session) Running(now time.Time) bool {
	return s.LeaseExpires != nil && s.LeaseExpires.After(now)
}

// Input is one input delivered to a session, in delivery order Seq.
type Input struct {
	SID         int64
	Seq         int64
	Identity    string
	Kind        InputKind
	EventID     *uuid.UUID
	Triggers    []string
	StartsTurn  bool
	Status      InputStatus
	Turn        *int
	ByteSize    int
	DeliveredAt time.Time
	// CALL inputs: the call's execution and the execution that made the call.
	ExecutionID       *uuid.UUID
	CallerExecutionID *uuid.UUID
	// OrderKey sorts a session's inputs in listing order (X5 for CALLs).
	OrderKey string
	// AnsweredAt is when a REQUEST input was answered (issue 17, I4): by
	// ExecutionID, the execution of the turn that finished its work, or,
	// with ExecutionID nil, by a responder who skipped the held turn that
	// took it. Nil while the request waits, and for other kinds.
	AnsweredAt *time.Time
	// COMMAND inputs (G1): which command, the message's text (MESSAGE,
	// HANDOFF), who sent it (stamped by the server), the client's
	// idempotency key, and when it was promoted to run next (G2).
	Command        *CommandKind
	Message        *string
	SenderKind     *SenderKind
	SenderID       *string
	IdempotencyKey *string
	PromotedAt     *time.Time
}

// IntakeRecord is an event that matched a trigger but could not start or
// resume a session (S5). Reason is a stable code (see the Reason* constants).
type IntakeRecord struct {
	ID        int64
	ActionID  uuid.UUID
	Version   int
	EventID   uuid.UUID
	Trigger   string
	SessionID *string
	Reason    string
	Message   string
	CreatedAt time.Time
}

// Intake reasons.
const (
	ReasonInputConflict   = "input_conflict"    // S2: open session with a different input
	ReasonInputInvalid    = "input_invalid"     // the mapped input fails inputSchema
	ReasonMappingFailed   = "mapping_failed"    // a start mapping expression failed
	ReasonIDFailed        = "id_failed"         // the session id expression failed
	ReasonSessionClosed   = "session_closed"    // S2: a closed session id never starts again
	ReasonSessionNotFound = "session_not_found" // a resume named no session
	ReasonEndsFailed      = "ends_failed"       // E1: session.ends failed for the input or did not give a timestamp
	ReasonSlotTaken       = "slot_taken"        // G7: a singleton's live session holds the slot
	ReasonSlotKeyFailed   = "slot_key_failed"   // G7: session.concurrencyKey failed for the input
)

// Diagnostic counts a trigger predicate's evaluation failures (each a non-match).
type Diagnostic struct {
	Version     int
	Trigger     string
	Count       int64
	LastEventID uuid.UUID
	LastMessage string
	LastAt      time.Time
}

// Store reads sessions and closes them.
type Store struct {
	pool  *pgxpool.Pool
	clock clock.Clock

	// Actions, when set, gives successors (G5) the action's current
	// version and their own end; without it they keep their predecessor's.
	Actions *action.Store

	// Log, when set, gets a line per interrupt answered (issue 12);
	// Metrics, when set, counts them.
	Log     *slog.Logger
	Metrics *observe.Metrics
}

// NewStore returns a Store.
func NewStore(pool *pgxpool.Pool, c clock.Clock) *Store { return &Store{pool: pool, clock: c} }

const sessionColumns = `sid, action_id, id, version, input, state, status, reason, origin_event_id,
	started_at, ends_at, created_at, updated_at, closed_at, turn_count, lease_expires_at, wait, interrupt_turn,
	handoff, predecessor_sid, successor_sid, archived_at, slot, display_title, ambient_status,
	max_usd::float8, spent_usd::float8, model_calls, input_tokens, output_tokens`

func scanSession(row pgx.Row) (*Session, error) {
	var s Session
	if err := row.Scan(s.dests()...); err != nil {
		return nil, err
	}
	s.utc()
	return &s, nil
}

// dests are the scan destinations of sessionColumns, in its order.
func (s *Session) dests() []any {
	return []any{&s.SID, &s.ActionID, &s.ID, &s.Version, &s.Input, &s.State, &s.Status, &s.Reason,
		&s.OriginEventID, &s.StartedAt, &s.EndsAt, &s.CreatedAt, &s.UpdatedAt, &s.ClosedAt, &s.TurnCount, &s.LeaseExpires,
		&s.Wait, &s.InterruptTurn, &s.Handoff, &s.PredecessorSID, &s.SuccessorSID, &s.ArchivedAt, &s.Slot, &s.DisplayTitle, &s.AmbientStatus,
		&s.MaxUSD, &s.Spent.CostUSD, &s.Spent.ModelCalls, &s.Spent.InputTokens, &s.Spent.OutputTokens}
}

// utc puts a scanned session's times in UTC.
func (s *Session) utc() {
	s.StartedAt, s.CreatedAt, s.UpdatedAt = s.StartedAt.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	s.EndsAt, s.ClosedAt, s.ArchivedAt = utcPtr(s.EndsAt), utcPtr(s.ClosedAt), utcPtr(s.ArchivedAt)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Get returns the session addressed by action id and session id, or nil.
func (st *Store) Get(ctx context.Context, actionID uuid.UUID, id string) (*Session, error) {
	s, err := scanSession(st.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2`, actionID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: get: %w", err)
	}
	return s, nil
}

// BySID returns the session with internal key sid, or nil.
func (st *Store) BySID(ctx context.Context, sid int64) (*Session, error) {
	return BySID(ctx, st.pool, sid)
}

// BySID reads the session with internal key sid through q, or returns nil.
func BySID(ctx context.Context, q ledger.Querier, sid int64) (*Session, error) {
	s, err := scanSession(q.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = $1`, sid))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: get: %w", err)
	}
	return s, nil
}

// List pages an action's sessions, newest first, before internal key
// beforeSID (0 for the start), optionally of one status, and archived or
// not (G6; nil: both).
func (st *Store) List(ctx context.Context, actionID uuid.UUID, beforeSID int64, first int, status *Status, archived *bool) ([]*Session, error) {
	if beforeSID <= 0 {
		beforeSID = 1<<63 - 1
	}
	rows, err := st.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE action_id = $1 AND sid < $2 AND ($4::text IS NULL OR status = $4)
		  AND ($5::boolean IS NULL OR (archived_at IS NOT NULL) = $5) ORDER BY sid DESC LIMIT $3`,
		actionID, beforeSID, first, status, archived)
	if err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// InputColumns lists the session_inputs columns ScanInput reads, in order.
const InputColumns = `sid, seq, identity, kind, event_id, triggers, starts_turn, status, turn, byte_size, delivered_at,
	execution_id, caller_execution_id, order_key, answered_at, command, message, sender_kind, sender_id, idempotency_key, promoted_at`

// ScanInput scans a row of InputColumns.
func ScanInput(row pgx.CollectableRow) (Input, error) {
	var in Input
	err := row.Scan(in.dests()...)
	in.utc()
	return in, err
}

// dests are the scan destinations of InputColumns, in its order.
func (in *Input) dests() []any {
	return []any{&in.SID, &in.Seq, &in.Identity, &in.Kind, &in.EventID, &in.Triggers, &in.StartsTurn,
		&in.Status, &in.Turn, &in.ByteSize, &in.DeliveredAt, &in.ExecutionID, &in.CallerExecutionID, &in.OrderKey, &in.AnsweredAt,
		&in.Command, &in.Message, &in.SenderKind, &in.SenderID, &in.IdempotencyKey, &in.PromotedAt}
}

func (in *Input) utc() {
	in.DeliveredAt, in.AnsweredAt, in.PromotedAt = in.DeliveredAt.UTC(), utcPtr(in.AnsweredAt), utcPtr(in.PromotedAt)
}

// Inputs pages a session's inputs in listing order (delivery order; for a
// tool session's calls, the order their transactions began, X5) after the
// order key afterKey ("" for the start), optionally of one status. q is a
// pool or a transaction (a transaction sees its own uncommitted calls).
func Inputs(ctx context.Context, q ledger.Querier, sid int64, afterKey string, first int, status *string) ([]Input, error) {
	rows, err := q.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs
		WHERE sid = $1 AND order_key > $2 AND ($4::text IS NULL OR status = $4) ORDER BY order_key LIMIT $3`, sid, afterKey, first, status)
	if err != nil {
		return nil, fmt.Errorf("session: inputs: %w", err)
	}
	return pgx.CollectRows(rows, ScanInput)
}

// LatestInputs returns a session's last n inputs in listing order, and how
// many it has in all, as q sees them (a transaction sees its own calls).
func LatestInputs(ctx context.Context, q ledger.Querier, sid int64, n int) ([]Input, int, error) {
	rows, err := q.Query(ctx, `SELECT `+InputColumns+` FROM session_inputs WHERE sid = $1 ORDER BY order_key DESC LIMIT $2`, sid, n)
	if err != nil {
		return nil, 0, fmt.Errorf("session: inputs: %w", err)
	}
	ins, err := pgx.CollectRows(rows, ScanInput)
	if err != nil {
		return nil, 0, err
	}
	for i, j := 0, len(ins)-1; i < j; i, j = i+1, j-1 {
		ins[i], ins[j] = ins[j], ins[i]
	}
	total := len(ins)
	if total == n {
		if err := q.QueryRow(ctx, `SELECT count(*) FROM session_inputs WHERE sid = $1`, sid).Scan(&total); err != nil {
			return nil, 0, err
		}
	}
	return ins, total, nil
}

// Inputs pages a session's inputs; see the package function Inputs.
func (st *Store) Inputs(ctx context.Context, sid int64, afterKey string, first int, status *string) ([]Input, error) {
	return Inputs(ctx, st.pool, sid, afterKey, first, status)
}

// TurnInputs returns the inputs a turn took, in the order it had them.
func (st *Store) TurnInputs(ctx context.Context, sid int64, turn int) ([]Input, error) {
	return TurnInputs(ctx, st.pool, sid, turn)
}

// TurnInputs reads the inputs a turn took through q, in the order the turn
// had them: delivery order, with firings placed by time (C6).
func TurnInputs(ctx context.Context, q ledger.Querier, sid int64, turn int) ([]Input, error) {
	rows, err := q.Query(ctx, `SELECT `+prefixed("i", InputColumns)+`
		FROM turn_inputs t JOIN session_inputs i ON i.sid = t.sid AND i.seq = t.seq
		WHERE t.sid = $1 AND t.turn = $2 ORDER BY i.order_key, i.seq`, sid, turn)
	if err != nil {
		return nil, fmt.Errorf("session: turn inputs: %w", err)
	}
	return pgx.CollectRows(rows, ScanInput)
}

// IntakeRecords pages an action's intake records, newest first, before id beforeID (0: start).
func (st *Store) IntakeRecords(ctx context.Context, actionID uuid.UUID, beforeID int64, first int) ([]IntakeRecord, error) {
	return intakeRecords(ctx, st.pool, actionID, beforeID, first, false)
}

// intakeRecords reads action actionID's intake records through q, newest
// first below beforeID (0: from the newest), or oldest first with oldest.
func intakeRecords(ctx context.Context, q ledger.Querier, actionID uuid.UUID, beforeID int64, first int, oldest bool) ([]IntakeRecord, error) {
	if beforeID <= 0 {
		beforeID = 1<<63 - 1
	}
	order := "DESC"
	if oldest {
		order = "ASC"
	}
	rows, err := q.Query(ctx, `SELECT id, action_id, version, event_id, trigger, session_id, reason, message, created_at
		FROM intake_records WHERE action_id = $1 AND id < $2 ORDER BY id `+order+` LIMIT $3`, actionID, beforeID, first)
	if err != nil {
		return nil, fmt.Errorf("session: intake records: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (IntakeRecord, error) {
		var ir IntakeRecord
		err := r.Scan(&ir.ID, &ir.ActionID, &ir.Version, &ir.EventID, &ir.Trigger, &ir.SessionID, &ir.Reason, &ir.Message, &ir.CreatedAt)
		ir.CreatedAt = ir.CreatedAt.UTC()
		return ir, err
	})
}

// Diagnostics returns an action's trigger diagnostics.
func (st *Store) Diagnostics(ctx context.Context, actionID uuid.UUID) ([]Diagnostic, error) {
	return diagnostics(ctx, st.pool, actionID)
}

func diagnostics(ctx context.Context, q ledger.Querier, actionID uuid.UUID) ([]Diagnostic, error) {
	rows, err := q.Query(ctx, `SELECT version, trigger, count, last_event_id, last_message, last_at
		FROM trigger_diagnostics WHERE action_id = $1 ORDER BY version, trigger`, actionID)
	if err != nil {
		return nil, fmt.Errorf("session: diagnostics: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Diagnostic, error) {
		var d Diagnostic
		err := r.Scan(&d.Version, &d.Trigger, &d.Count, &d.LastEventID, &d.LastMessage, &d.LastAt)
		d.LastAt = d.LastAt.UTC()
		return d, err
	})
}

// MaxReasonLen is the longest closing reason accepted, in bytes.
const MaxReasonLen = 1000

// Close ends an open or waiting session by an operator (I3): status
// CANCELLED with the reason, no further inputs (T8). A turn running at the
// time finishes as CANCELLED without committing. Pending approval requests
// and holds end with it (H5): answering them fails with SESSION_CLOSED. Errors: fault.BadInput
// (reason), fault.NotFound, fault.SessionClosed.
func (st *Store) Close(ctx context.Context, actionID uuid.UUID, id, reason string) (*Session, error) {
	return st.CloseWith(ctx, actionID, id, CloseRequest{Reason: reason})
}

// CloseRequest is how an operator closes a session (I3, G5): the reason,
// an optional handoff note (at most MaxMessageLen bytes) kept on the
// session, and whether a successor takes over. By is who closes it (the
// sender of the successor's HANDOFF input is SYSTEM, on its behalf).
type CloseRequest struct {
	Reason    string
	Handoff   *string
	Successor bool
	By        string
}

// CloseWith closes a session as Close does, in the same transaction
// keeping req.Handoff on it and, with req.Successor, starting its successor
// (see startSuccessor): the key routes to it from then on. It returns the
// closed session. Errors: Close's, and fault.BadInput (handoff).
func (st *Store) CloseWith(ctx context.Context, actionID uuid.UUID, id string, req CloseRequest) (*Session, error) {
	reason := req.Reason
	if strings.TrimSpace(reason) == "" || len(reason) > MaxReasonLen || !utf8.ValidString(reason) || strings.IndexByte(reason, 0) >= 0 {
		return nil, fault.New(fault.BadInput, "reason", "a reason is 1-%d bytes of text", MaxReasonLen)
	}
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	if req.Handoff != nil {
		if err := checkText(*req.Handoff, 4*MaxHandoffChars, "handoff"); err != nil {
			return nil, err
		}
		if len([]rune(*req.Handoff)) > MaxHandoffChars {
			return nil, fault.New(fault.BadInput, "handoff", "a handoff note is at most %d characters", MaxHandoffChars)
		}
	}
	now := st.clock.Now()
	var s *Session
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var err error
		s, err = scanSession(tx.QueryRow(ctx, `UPDATE sessions SET status = $5, reason = $3, closed_at = $4,
			updated_at = $4, next_turn_at = NULL, resume = NULL, wait = NULL, wake_on = NULL, handoff = $8
			WHERE action_id = $1 AND id = $2 AND status IN ($6, $7) RETURNING `+sessionColumns, actionID, id, reason, now,
			Cancelled, Open, Waiting, req.Handoff))
		if err != nil {
			return err
		}
		if req.Successor {
			succ, err := st.startSuccessor(ctx, tx, s, req.Handoff, now)
			if err != nil {
				return err
			}
			s.SuccessorSID = &succ.SID
		}
		// H5: closing ends what the session waited on instead of an answer.
		tag, err := tx.Exec(ctx, `UPDATE session_interrupts SET status = $2 WHERE sid = $1 AND status = 'PENDING'`, s.SID, InterruptClosed)
		if err != nil {
			return err
		}
		// G4: a park ends with the session.
		if _, err := tx.Exec(ctx, `UPDATE session_parks SET status = $2, resolved_at = $3 WHERE sid = $1 AND status = 'PARKED'`,
			s.SID, ParkCancelled, now); err != nil {
			return err
		}
		return Notice{SIDs: []int64{s.SID}, Interrupts: tag.RowsAffected() > 0}.Send(ctx, tx)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := st.Get(ctx, actionID, id)
		if gerr != nil {
			return nil, gerr
		}
		if cur == nil {
			var exists bool
			if err := st.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM actions WHERE id = $1)`, actionID).Scan(&exists); err != nil {
				return nil, err
			}
			if !exists {
				return nil, fault.New(fault.NotFound, "actionId", "no action with this id")
			}
			return nil, fault.New(fault.NotFound, "id", "this action has no session with this id")
		}
		return nil, fault.New(fault.SessionClosed, "id", "the session is already %s", cur.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("session: close: %w", err)
	}
	return s, nil
}

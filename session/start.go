package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// StartedType is the type of the event that records a session started by
// hand (Store.Start); it is the session's origin.
const StartedType = ledger.StartedType

// Started is the data of a StartedType event.
type Started struct {
	ActionID  uuid.UUID       `json:"action_id"`
	SessionID string          `json:"session_id"`
	Input     jsonvalue.Value `json:"input"`
	// Principal is who started it, as the server authenticated them.
	Principal string `json:"principal"`
}

// Start starts a session of comp (the action's current version) by hand,
// with input as its session input, as a start trigger would (S1, E1, G7,
// G8): the input is checked against session.inputSchema, the id is
// session.id over it, the end, title and spend cap are computed, and an
// event StartedType (the session's origin) is appended in the same
// transaction. Like a trigger's start it delivers no input: the session
// waits for one. A session that exists, is live and has the same input is
// returned with created false (a start is idempotent by its input).
//
// Errors: BAD_USER_INPUT (field input: not an object, inputSchema,
// session.id or session.ends failed), INVALID_ACTION (actionId: no
// session block), SESSION_CLOSED (the session exists and is final),
// SESSION_INPUT_CONFLICT (it is live with another input),
// SESSION_SLOT_TAKEN (a singleton whose slot another live session holds;
// the message names it).
func (st *Store) Start(ctx context.Context, comp *action.Compiled, input jsonvalue.Value, principal string) (s *Session, created bool, err error) {
	cs := comp.Session
	if cs == nil {
		return nil, false, fault.New(fault.InvalidAction, "actionId", "the action has no session block: its executions start from events, not by hand")
	}
	if err := jsonvalue.Check(input, "input"); err != nil {
		return nil, false, err
	}
	value, err := input.Decode()
	if err != nil {
		return nil, false, fault.New(fault.BadInput, "input", "not JSON: %v", err)
	}
	if _, ok := value.(map[string]any); !ok {
		return nil, false, fault.New(fault.BadInput, "input", "a session input is a JSON object")
	}
	if cs.Schema != nil {
		if err := cs.Schema.Validate(value); err != nil {
			return nil, false, fault.New(fault.BadInput, "input", "the input does not match session.inputSchema: %v", err)
		}
	}
	id, err := evalID(ctx, cs.ID, expr.Vars{Session: &expr.Session{Input: value}})
	if err != nil {
		return nil, false, fault.New(fault.BadInput, "input", "session.id failed for this input: %v", err)
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		s, created, err = st.start(ctx, tx, comp, id, input, value, principal)
		return err
	})
	if isSlotRace(err) {
		return nil, false, slotRaced("input")
	}
	return s, created, err
}

func (st *Store) start(ctx context.Context, tx pgx.Tx, comp *action.Compiled, id string, raw jsonvalue.Value, value any, principal string) (*Session, bool, error) {
	cs := comp.Session
	cur, err := lockSession(ctx, tx, comp.ActionID, id)
	if err != nil {
		return nil, false, err
	}
	if cur != nil {
		switch {
		case cur.Status.Final():
			return nil, false, fault.New(fault.SessionClosed, "input", "session %q is %s: a closed session never starts again", id, cur.Status)
		case !jsonvalue.Equal(cur.Input, raw):
			return nil, false, fault.New(fault.SessionInputConflict, "input", "session %q is live with another input", id)
		}
		return cur, false, nil
	}
	slot, err := freeSlot(ctx, tx, comp, id, value, "input")
	if err != nil {
		return nil, false, err
	}
	now := st.clock.Now()
	ends, err := evalEnd(ctx, cs, value, now)
	if err != nil {
		return nil, false, fault.New(fault.BadInput, "input", "session.ends failed for this input: %v", err)
	}
	s, err := scanSession(tx.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, ends_at,
			created_at, updated_at, slot, display_title, max_usd)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $6, $8, $9, $10) RETURNING `+sessionColumns,
		comp.ActionID, id, comp.Version, []byte(raw), Open, now, ends, slot, titleOf(ctx, cs, value), capOf(cs)))
	if err != nil {
		return nil, false, fmt.Errorf("session: start %q: %w", id, err)
	}
	data, err := json.Marshal(Started{ActionID: comp.ActionID, SessionID: id, Input: raw, Principal: principal})
	if err != nil {
		return nil, false, err
	}
	evs, err := ledger.Append(ctx, tx, now, ledger.NewEvent{Type: StartedType, Data: data})
	if err != nil {
		return nil, false, err
	}
	if err := startedBy(ctx, tx, cs, s, value, evs[0]); err != nil {
		return nil, false, err
	}
	if err := (Notice{SIDs: []int64{s.SID}, Timers: cs.Timed()}).Send(ctx, tx); err != nil {
		return nil, false, err
	}
	s, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = $1`, s.SID))
	return s, true, err
}

// freeSlot returns the singleton slot a session started by hand or by a
// request takes (nil: the action has none), or SESSION_SLOT_TAKEN naming
// the live session that holds it (G7). field names the request field the
// errors point at.
func freeSlot(ctx context.Context, tx pgx.Tx, comp *action.Compiled, id string, value any, field string) (*string, error) {
	slot, err := slotOf(ctx, comp.Session, value)
	if err != nil {
		return nil, fault.New(fault.BadInput, field, "session.concurrencyKey failed for this input: %v", err)
	}
	if slot == nil {
		return nil, nil
	}
	holder, err := slotHolder(ctx, tx, comp.ActionID, id, *slot)
	if err != nil {
		return nil, err
	}
	if holder != "" {
		return nil, fault.New(fault.SlotTaken, field, "%s", SlotTakenMessage(holder))
	}
	return slot, nil
}

// isSlotRace reports whether err is the unique index on live sessions'
// slots refusing a second holder: a concurrent start took the slot after
// this one looked (G7).
func isSlotRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "sessions_slot"
}

// slotRaced is the error of a start that lost the slot to a concurrent
// one (isSlotRace).
func slotRaced(field string) error {
	return fault.New(fault.SlotTaken, field, "the action is a singleton (session.concurrency 1) and another live session took its slot: try again to see which")
}

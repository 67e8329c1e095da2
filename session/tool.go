package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Tool sessions (X1-X6): a tool action's calls recorded as CALL inputs of a
// session of their own, with no turns.

// EnsureToolSession creates the tool session addressed by actionID and id
// at version with input, OPEN since now, unless it exists (a first call
// made concurrently by another transaction wins; X2). q is meant to commit
// at once: the session exists even when the call's transaction rolls back.
func EnsureToolSession(ctx context.Context, q Execer, actionID uuid.UUID, id string, version int, input jsonvalue.Value, now time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, created_at, updated_at, kind)
		VALUES ($1, $2, $3, $4, $5, $6, $6, $6, $7) ON CONFLICT (action_id, id) DO NOTHING`,
		actionID, id, version, []byte(input), Open, now, KindTool)
	if err != nil {
		return fmt.Errorf("session: create tool session: %w", err)
	}
	return nil
}

// StatusOf reads a session's status through q (X3: a call checks it as it
// starts, in its own transaction).
func StatusOf(ctx context.Context, q ledger.Querier, sid int64) (Status, error) {
	var st Status
	if err := q.QueryRow(ctx, `SELECT status FROM sessions WHERE sid = $1`, sid).Scan(&st); err != nil {
		return "", fmt.Errorf("session: status: %w", err)
	}
	return st, nil
}

// Lookup finds a session's key and kind by action id and session id
// through q (a transaction sees sessions created after it began, X6); ok
// is false when there is none.
func Lookup(ctx context.Context, q ledger.Querier, actionID uuid.UUID, id string) (sid int64, kind SessionKind, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT sid, kind FROM sessions WHERE action_id = $1 AND id = $2`, actionID, id).Scan(&sid, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("session: lookup: %w", err)
	}
	return sid, kind, true, nil
}

// Call is a tool call to record in its tool session (X4).
type Call struct {
	SID int64
	// ExecutionID is the call's execution, its input's identity; Caller
	// the execution that made the call, if any.
	ExecutionID uuid.UUID
	Caller      *uuid.UUID
	// Number numbers the call within its transaction, from 1 (X5).
	Number    int
	InputSize int
	At        time.Time
}

// RecordCall records c as a CALL input of its tool session in tx (X4),
// already CONSUMED: it commits or rolls back with the caller's
// transaction. Calls list in the order their transactions began, then by
// transaction and call number (X5); tx sees its own uncommitted calls.
func RecordCall(ctx context.Context, tx pgx.Tx, c Call) error {
	_, err := tx.Exec(ctx, `INSERT INTO session_inputs (sid, seq, identity, kind, triggers, starts_turn, status, byte_size,
			delivered_at, execution_id, caller_execution_id, order_key)
		VALUES ($1, nextval('session_call_seq'), $2, $8, '{}', false, $9, $3, $4, $5, $6,
			to_char(transaction_timestamp() AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || '.' ||
			lpad(pg_current_xact_id()::text, 20, '0') || '.' || lpad($7::int::text, 6, '0'))`,
		c.SID, c.ExecutionID.String(), c.InputSize, c.At, c.ExecutionID, c.Caller, c.Number, KindCall, InputConsumed)
	if err != nil {
		return fmt.Errorf("session: record call: %w", err)
	}
	return Notice{SIDs: []int64{c.SID}}.Send(ctx, tx)
}

package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// InterruptsChannel is the NOTIFY channel on which an interrupt reaches
// the executor running the turn (payload: the session's sid).
const InterruptsChannel = "actionsledger_interrupts"

// Interrupt asks the running turn of a session to end early (G9), for
// principal, and returns the number of the turn. The request is stored on
// the session in one transaction and announced on InterruptsChannel: the
// executor running the turn cancels its handler, and the turn's settlement
// finds the request, whatever the handler returned, and ends the turn
// CANCELLED: nothing it did commits, its inputs stay pending in their
// order, and the session waits WAITING for its next input (or a resume),
// as after a turn-scoped failure (G10). A close that comes first wins: the
// turn is cancelled by it (T8). Asking again while the request stands
// returns the same turn.
//
// Errors: fault.BadInput (id), fault.NotFound (actionId, id),
// fault.SessionClosed, fault.TurnNotRunning (no turn runs).
func (st *Store) Interrupt(ctx context.Context, actionID uuid.UUID, id, principal string) (int, error) {
	if id == "" || len(id) > MaxIDLen {
		return 0, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	var turn int
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		s, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: interrupt: %w", err)
		}
		turn, err = interruptTx(ctx, tx, s, principal, st.clock.Now())
		return err
	})
	if err != nil {
		return 0, err
	}
	if st.Log != nil {
		st.Log.Info("turn interrupted", "action", actionID, "session", id, "turn", turn, "by", principal)
	}
	return turn, nil
}

// interruptTx stores an interrupt of s's running turn for principal in tx,
// which holds s's row, and announces it; it returns the turn.
func interruptTx(ctx context.Context, tx pgx.Tx, s *Session, principal string, now time.Time) (int, error) {
	if s.Status.Final() {
		return 0, fault.New(fault.SessionClosed, "id", "the session is %s", s.Status)
	}
	var turn int
	err := tx.QueryRow(ctx, `SELECT number FROM session_turns WHERE sid = $1 AND status = 'RUNNING' ORDER BY number DESC LIMIT 1`, s.SID).Scan(&turn)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !s.Running(now)) {
		return 0, fault.New(fault.TurnNotRunning, "id", "no turn of the session is running: there is nothing to interrupt")
	}
	if err != nil {
		return 0, fmt.Errorf("session: interrupt: %w", err)
	}
	if s.InterruptTurn != nil && *s.InterruptTurn == turn {
		return turn, nil // asked already
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET interrupt_turn = $2, interrupted_by = $3 WHERE sid = $1`, s.SID, turn, principal); err != nil {
		return 0, fmt.Errorf("session: interrupt: %w", err)
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InterruptsChannel, strconv.FormatInt(s.SID, 10))
	return turn, err
}

package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// How a turn pauses and resumes (P1-P5, H1-H5):
//   - A turn that ends WAITING commits like any other (its writes, calls and
//     state) and leaves the session WAITING with one APPROVAL interrupt per
//     gated call and the handler's continuation in sessions.resume.
//   - respondToSession answers an interrupt with a COMMAND input and opens
//     the session; a turn of its own takes the pending COMMANDs only, and
//     starts from sessions.resume.
//   - A held turn commits nothing of its run: only its record, transcript
//     and a HOLD interrupt; its inputs become RECEIVED and the session
//     WAITING. A RETRY answer's turn starts from the held turn's
//     continuation and runs its inputs again (Request.Replayed).

// startsFrom works out where a new turn over inputs starts: the held turn
// it retries (a RETRY answer among its inputs, H3) and the continuation
// it resumes from: the held turn's, or the one the session's last WAITING
// turn left (P5).
func startsFrom(ctx context.Context, tx pgx.Tx, sid int64, inputs []session.Input) (retryOf int, resume jsonvalue.Value, err error) {
	var seqs []int64
	for _, in := range inputs {
		if in.Kind == session.KindCommand {
			seqs = append(seqs, in.Seq)
		}
	}
	if len(seqs) == 0 {
		return 0, nil, nil // only a turn that takes answers resumes
	}
	var approvals int
	err = tx.QueryRow(ctx, `SELECT coalesce(max(turn) FILTER (WHERE kind = 'HOLD' AND decision = 'RETRY'), 0),
			count(*) FILTER (WHERE kind = 'APPROVAL')
		FROM session_interrupts WHERE sid = $1 AND command_seq = ANY($2)`, sid, seqs).Scan(&retryOf, &approvals)
	if err != nil {
		return 0, nil, fmt.Errorf("claim: retry: %w", err)
	}
	switch {
	case retryOf > 0:
		err = tx.QueryRow(ctx, `SELECT resume FROM session_turns WHERE sid = $1 AND number = $2`, sid, retryOf).Scan(&resume)
	case approvals > 0:
		err = tx.QueryRow(ctx, `SELECT resume FROM sessions WHERE sid = $1`, sid).Scan(&resume)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("claim: resume: %w", err)
	}
	return retryOf, resume, nil
}

// views turns inputs into what the handler sees: their events and, for
// COMMAND inputs, the answers they carry.
func (e *Executor) views(ctx context.Context, inputs []session.Input) ([]InputView, error) {
	ids := make([]uuid.UUID, 0, len(inputs))
	for _, in := range inputs {
		if in.EventID != nil {
			ids = append(ids, *in.EventID)
		}
	}
	events, err := ledger.EventsByID(ctx, e.pool, ids)
	if err != nil {
		return nil, err
	}
	views := make([]InputView, len(inputs))
	for i, in := range inputs {
		v := InputView{Identity: in.Identity, Kind: in.Kind, Sequence: in.Seq, Triggers: in.Triggers}
		if in.EventID != nil {
			if ev, ok := events[*in.EventID]; ok {
				v.Event = &EventView{ID: ev.ID, Type: ev.Type, Data: ev.Data, CommitTime: ev.CommitTime, Position: ev.Position}
				if in.Kind == session.KindCommand && ev.Type == session.RespondedType {
					var cmd Command
					if err := json.Unmarshal(ev.Data, &cmd); err != nil {
						return nil, fmt.Errorf("turns: command %s: %w", in.Identity, err)
					}
					v.Command = &cmd
				}
			}
		}
		views[i] = v
	}
	return views, nil
}

// replayed returns the inputs a retry turn runs again (H3): those of the
// held turn it retries, preceded by the ones that turn ran again when it
// was itself a retry, oldest first.
func (e *Executor) replayed(ctx context.Context, c *claim) ([]InputView, error) {
	if c.retryOf == 0 {
		return nil, nil
	}
	// retry_of always names an earlier turn, so the chain ends.
	rows, err := e.pool.Query(ctx, `
		WITH RECURSIVE chain (number, depth) AS (
			SELECT $2::int, 0
			UNION ALL
			SELECT t.retry_of, c.depth + 1 FROM chain c
			  JOIN session_turns t ON t.sid = $1 AND t.number = c.number WHERE t.retry_of IS NOT NULL)
		SELECT `+session.InputColumns+` FROM (
			SELECT i.*, c.depth FROM chain c
			  JOIN turn_inputs ti ON ti.sid = $1 AND ti.turn = c.number
			  JOIN session_inputs i ON i.sid = ti.sid AND i.seq = ti.seq) x
		ORDER BY depth DESC, order_key, seq`, c.sess.SID, c.retryOf)
	if err != nil {
		return nil, fmt.Errorf("turns: replayed: %w", err)
	}
	ins, err := pgx.CollectRows(rows, session.ScanInput)
	if err != nil {
		return nil, fmt.Errorf("turns: replayed: %w", err)
	}
	return e.views(ctx, ins)
}

// waitingReason is the session's reason while it waits for approvals.
func waitingReason(n int) string {
	if n == 1 {
		return "waiting for approval of 1 tool call"
	}
	return fmt.Sprintf("waiting for approval of %d tool calls", n)
}

// recordApprovals keeps the approval requests a turn listed (P1, P2): new
// ones become PENDING interrupts, ones listed again keep their row; every
// other approval the session still waited on is no longer awaited (CLOSED,
// answering it fails as stale). It returns the listed ids in order, how
// many of them wait, and whether any interrupt was raised or closed.
func recordApprovals(ctx context.Context, tx pgx.Tx, c *claim, approvals []Approval, now time.Time) (ids []uuid.UUID, pending int, changed bool, err error) {
	ids = make([]uuid.UUID, len(approvals))
	for i, a := range approvals {
		ids[i] = a.InterruptID
		var sid int64
		var status string
		err := tx.QueryRow(ctx, `SELECT sid, status FROM session_interrupts WHERE id = $1`, a.InterruptID).Scan(&sid, &status)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO session_interrupts (id, sid, kind, turn, execution_id, tool_action_id, tool_version,
					tool_name, call_id, input, status, created_at)
				VALUES ($1, $2, 'APPROVAL', $3, $4, $5, $6, $7, $8, $9, 'PENDING', $10)`,
				a.InterruptID, c.sess.SID, c.turn, a.ExecutionID, a.ToolActionID, a.ToolVersion, a.ToolName, a.CallID,
				[]byte(a.Input), now); err != nil {
				return nil, 0, false, fmt.Errorf("turns: approval: %w", err)
			}
			c.raised = append(c.raised, raised{id: a.InterruptID, kind: session.InterruptApproval, what: a.ToolName})
			pending++
			changed = true
		case err != nil:
			return nil, 0, false, err
		case sid != c.sess.SID:
			return nil, 0, false, fmt.Errorf("approval %s is not a request of this session", a.InterruptID)
		case status == session.InterruptPending:
			pending++
		}
		// A request listed again keeps its row: still PENDING, or ANSWERED
		// while this turn ran (its answer is a pending COMMAND input that
		// the next turn takes).
	}
	tag, err := tx.Exec(ctx, `UPDATE session_interrupts SET status = 'CLOSED'
		WHERE sid = $1 AND kind = 'APPROVAL' AND status = 'PENDING' AND NOT id = ANY($2)`, c.sess.SID, ids)
	if err != nil {
		return nil, 0, false, err
	}
	return ids, pending, changed || tag.RowsAffected() > 0, nil
}

// hold records a held turn (H1, H2): nothing its run did commits; the turn
// and its execution are HELD with a HOLD interrupt to answer, the turn's
// inputs RECEIVED, the state as the turn before left it, and the session
// WAITING with a reason naming the turn.
func (e *Executor) hold(ctx context.Context, tx pgx.Tx, c *claim, h *HoldError, now time.Time) error {
	id := InterruptIDFor(c.execID, "hold")
	code := "agent_unfinished"
	if h.Cause == CauseRefused {
		code = "agent_refused"
	}
	reason := fmt.Sprintf("turn %d is held (%s): answer its hold with respondToSession", c.turn, code)
	tag, err := tx.Exec(ctx, `INSERT INTO session_interrupts (id, sid, kind, turn, execution_id, cause, category, explanation, status, created_at)
		VALUES ($1, $2, 'HOLD', $3, $4, $5, nullif($6, ''), nullif($7, ''), 'PENDING', $8) ON CONFLICT (id) DO NOTHING`,
		id, c.sess.SID, c.turn, c.execID, h.Cause, storable(h.Category), storable(h.Explanation), now)
	if err != nil {
		return fmt.Errorf("turns: hold: %w", err)
	}
	if tag.RowsAffected() > 0 {
		c.raised = append(c.raised, raised{id: id, kind: session.InterruptHold, what: h.Cause})
	}
	c.outcome = "HELD"
	if _, err := tx.Exec(ctx, `UPDATE session_inputs i SET status = 'RECEIVED', turn = $2 FROM turn_inputs t
		WHERE t.sid = $1 AND t.turn = $2 AND i.sid = t.sid AND i.seq = t.seq`, c.sess.SID, c.turn); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET status = 'WAITING', reason = $2, updated_at = $3, next_turn_at = NULL,
		lease_owner = NULL, lease_expires_at = NULL WHERE sid = $1`, c.sess.SID, reason, now); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE session_turns SET status = 'HELD', finished_at = $3, checkpoint_state = $4,
		checkpoint_status = 'WAITING', checkpoint_reason = $5 WHERE sid = $1 AND number = $2`,
		c.sess.SID, c.turn, now, nullable(c.sess.State), reason); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE executions SET status = 'HELD', error = $2, finished_at = $3, hold_id = $4 WHERE id = $1`,
		c.execID, storable(code+": "+h.Message), now, id); err != nil {
		return err
	}
	return session.Notice{SIDs: []int64{c.sess.SID}, Interrupts: true}.Send(ctx, tx)
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// MaxHandoffChars is the longest handoff note, in characters (G5).
const MaxHandoffChars = 20000

// routeSQL finds the session an id routes to (G5): the newest of its chain
// of successors, else the session itself. Parameters: $1 action id, $2 id.
const routeSQL = `SELECT coalesce(r.route_sid, r.sid) FROM sessions r WHERE r.action_id = $1 AND r.id = $2`

// successorID names the successor of a session: <root>~<n>, where root is
// the first session's id and n the successor's place in the chain (2 for
// the first successor).
func successorID(pred *Session) string {
	if pred.PredecessorSID != nil {
		if i := strings.LastIndexByte(pred.ID, '~'); i > 0 {
			if n, err := strconv.Atoi(pred.ID[i+1:]); err == nil {
				return fmt.Sprintf("%s~%d", pred.ID[:i], n+1)
			}
		}
	}
	return pred.ID + "~2"
}

// startSuccessor starts, in tx (which holds pred's row), the successor of
// pred (G5): a new OPEN session with pred's input at the action's current
// version, its end computed anew from now, linked to pred, and routed to
// by pred's first id. A handoff note, when there is one, is its first
// input: a COMMAND input HANDOFF sent by SYSTEM. Without an action store
// (Store.Actions) it keeps pred's version and end.
func (st *Store) startSuccessor(ctx context.Context, tx pgx.Tx, pred *Session, note *string, now time.Time) (*Session, error) {
	id := successorID(pred)
	if len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "the successor's id %q would be longer than %d bytes", id, MaxIDLen)
	}
	version, ends, maxUSD := pred.Version, pred.EndsAt, pred.MaxUSD
	var timed func(sid int64) error
	if st.Actions != nil {
		if err := tx.QueryRow(ctx, `SELECT current_version FROM actions WHERE id = $1`, pred.ActionID).Scan(&version); err != nil {
			return nil, fmt.Errorf("session: successor: %w", err)
		}
		comp, err := st.Actions.Compiled(ctx, pred.ActionID, version)
		if err != nil {
			return nil, err
		}
		if cs := comp.Session; cs != nil {
			maxUSD = cs.MaxUSD // G8: a new session takes the version's cap
			var input any
			if err := json.Unmarshal(pred.Input, &input); err != nil {
				return nil, err
			}
			if ends, err = evalEnd(ctx, cs, input, now); err != nil {
				return nil, fault.New(fault.BadInput, "successor", "session.ends failed for the successor: %v", err)
			}
			timed = func(sid int64) error {
				if !cs.Timed() {
					return nil
				}
				c := Clock{StartedAt: now, EndsAt: ends}
				if due := c.WakeAfter(cs, now, true); !due.IsZero() {
					return setTimer(ctx, tx, sid, due)
				}
				return nil
			}
		}
	}
	// The slot (G7) passes on: the predecessor is final by now.
	succ, err := scanSession(tx.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, ends_at,
			created_at, updated_at, predecessor_sid, slot, display_title, max_usd)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $6, $8, $9, $10, $11) RETURNING `+sessionColumns,
		pred.ActionID, id, version, []byte(pred.Input), Open, now, ends, pred.SID, pred.Slot, pred.DisplayTitle, maxUSD))
	if err != nil {
		return nil, fmt.Errorf("session: successor %q: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET successor_sid = $2 WHERE sid = $1`, pred.SID, succ.SID); err != nil {
		return nil, err
	}
	// The first session of the chain routes its id to the newest.
	if _, err := tx.Exec(ctx, `UPDATE sessions SET route_sid = $2 WHERE sid = coalesce((SELECT r.sid FROM sessions r
		WHERE r.route_sid = $1), $1)`, pred.SID, succ.SID); err != nil {
		return nil, err
	}
	if timed != nil {
		if err := timed(succ.SID); err != nil {
			return nil, err
		}
	}
	if note != nil && strings.TrimSpace(*note) != "" {
		c := Commanded{ActionID: pred.ActionID, SessionID: succ.ID, Command: CommandHandoff, Message: *note,
			Sender: Sender{Kind: SenderSystem, ID: "handoff from " + pred.ID}}
		if _, err := deliverCommand(ctx, tx, succ, c, "handoff/"+pred.ID, InputPending, now); err != nil {
			return nil, err
		}
	}
	return succ, Notice{SIDs: []int64{succ.SID}}.Send(ctx, tx)
}

// Retry starts a new session for the input of a FAILED one (G5): its
// successor (see startSuccessor), to which the failed session's pending
// inputs (those its failed turn took among them) are delivered again, in
// their order, so a turn takes them at once. Retrying a session that has
// a successor returns that successor: a retry is made once. Errors:
// fault.BadInput (id), fault.NotFound (actionId, id),
// fault.SessionNotRetryable (the session is not FAILED).
func (st *Store) Retry(ctx context.Context, actionID uuid.UUID, id string) (*Session, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	var out *Session
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		now := st.clock.Now()
		pred, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: retry: %w", err)
		}
		if pred.SuccessorSID != nil {
			out, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = $1`, *pred.SuccessorSID))
			return err
		}
		if pred.Status != Failed {
			return fault.New(fault.SessionNotRetryable, "id", "the session is %s: only a FAILED session is retried as a new one", pred.Status)
		}
		succ, err := st.startSuccessor(ctx, tx, pred, nil, now)
		if err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `WITH c AS (
				INSERT INTO session_inputs (sid, seq, identity, kind, event_id, triggers, starts_turn, status, byte_size, delivered_at,
					order_key, command, message, sender_kind, sender_id, idempotency_key)
				SELECT $2, row_number() OVER (ORDER BY seq), identity, kind, event_id, triggers, starts_turn, 'PENDING', byte_size, $3,
					lpad((row_number() OVER (ORDER BY seq))::text, 20, '0'), command, message, sender_kind, sender_id, idempotency_key
				  FROM session_inputs WHERE sid = $1 AND status = 'PENDING' AND kind <> 'REQUEST'
				RETURNING starts_turn)
			SELECT count(*) FROM c`, pred.SID, succ.SID, now).Scan(&n); err != nil {
			return fmt.Errorf("session: retry: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions s SET input_count = $2,
				next_turn_at = CASE WHEN EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'PENDING' AND i.starts_turn) THEN $3::timestamptz END
			WHERE sid = $1`, succ.SID, n, now); err != nil {
			return err
		}
		out, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = $1`, succ.SID))
		if err != nil {
			return err
		}
		return Notice{SIDs: []int64{succ.SID}, Turns: true}.Send(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

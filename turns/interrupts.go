package turns

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// views turns inputs into what the handler sees: their events (from
// known, read with the inputs, or else from the ledger) and, for COMMAND
// inputs, the answers they carry.
func (e *Executor) views(ctx context.Context, inputs []session.Input, known map[uuid.UUID]ledger.Event) ([]InputView, error) {
	var ids []uuid.UUID
	for _, in := range inputs {
		if in.EventID != nil {
			if _, ok := known[*in.EventID]; !ok {
				ids = append(ids, *in.EventID)
			}
		}
	}
	events := known
	if len(ids) > 0 {
		read, err := ledger.EventsByID(ctx, e.pool, ids)
		if err != nil {
			return nil, err
		}
		events = make(map[uuid.UUID]ledger.Event, len(known)+len(read))
		for id, ev := range known {
			events[id] = ev
		}
		for id, ev := range read {
			events[id] = ev
		}
	}
	views := make([]InputView, len(inputs))
	for i, in := range inputs {
		v := InputView{Identity: in.Identity, Kind: in.Kind, Sequence: in.Seq, Triggers: in.Triggers}
		if in.EventID != nil {
			if ev, ok := events[*in.EventID]; ok {
				v.Event = &EventView{ID: ev.ID, Type: ev.Type, Data: ev.Data, CommitTime: ev.CommitTime, Position: ev.Position}
				if in.Kind == session.KindCommand && ev.Type == ledger.RespondedType {
					var cmd Command
					if err := json.Unmarshal(ev.Data, &cmd); err != nil {
						return nil, fmt.Errorf("turns: command %s: %w", in.Identity, err)
					}
					v.Command = &cmd
				}
				if in.Kind == session.KindCommand && ev.Type == ledger.CommandedType {
					var msg session.Commanded
					if err := json.Unmarshal(ev.Data, &msg); err != nil {
						return nil, fmt.Errorf("turns: message %s: %w", in.Identity, err)
					}
					if in.Message != nil {
						msg.Message = *in.Message // as edited while it waited (G2)
					}
					v.Message = &msg
				}
				if in.Kind == session.KindRequest && ev.Type == session.RequestedType {
					var req session.Requested
					if err := json.Unmarshal(ev.Data, &req); err != nil {
						return nil, fmt.Errorf("turns: request %s: %w", in.Identity, err)
					}
					v.Request = &req
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
	return e.replayedInputs(ctx, c.sess.SID, c.retryOf)
}

// replayedInputs is replayed for the turn of session sid that retries
// turn retryOf (0: none).
func (e *Executor) replayedInputs(ctx context.Context, sid int64, retryOf int) ([]InputView, error) {
	if retryOf == 0 {
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
		ORDER BY depth DESC, order_key, seq`, sid, retryOf)
	if err != nil {
		return nil, fmt.Errorf("turns: replayed: %w", err)
	}
	ins, err := pgx.CollectRows(rows, session.ScanInput)
	if err != nil {
		return nil, fmt.Errorf("turns: replayed: %w", err)
	}
	return e.views(ctx, ins, nil)
}

// waitingReason is the session's reason while it waits for approvals.
func waitingReason(n int) string {
	if n == 1 {
		return "waiting for approval of 1 tool call"
	}
	return fmt.Sprintf("waiting for approval of %d tool calls", n)
}

package turns

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// take is what a new turn takes: pending inputs and due firings, in the
// order the handler sees them.
type take struct {
	items []item
	// final: the session's end has come and the turn takes everything
	// pending (E3, E4).
	final bool
	// ended: the end has come and nothing is pending; the session completes
	// with no turn (E5).
	ended bool
}

// item is one input of a turn: a pending input row, or a firing that the
// claim records as a SCHEDULE input.
type item struct {
	row    *session.Input
	firing *session.Firing
	event  ledger.NewEvent // a firing's schedule.fired event
	at     time.Time       // commit time of the row's event, or the scheduled time
}

func (it item) size() int {
	if it.row != nil {
		return it.row.ByteSize
	}
	return len(it.event.Data)
}

// plan works out the next turn of sess at now (T2-T4, E3-E5, C4-C6). It
// returns nil when no turn is due: no pending input or due firing starts
// one, and the end has not come.
//
// Before the end a turn starts when a pending input of a trigger turns.on
// names (every trigger, without turns.on) or a due firing of an entry it
// names is there; it takes every pending input and the latest due firing of
// each entry, up to maxInputs and maxBytes. After the end a turn takes
// everything pending, whatever turns.on names, and is final if nothing is
// left over; with nothing pending the session just completes.
func (e *Executor) plan(ctx context.Context, tx pgx.Tx, sess *session.Session, cs *action.CompiledSession, now time.Time) (*take, error) {
	clk := session.Clock{StartedAt: sess.StartedAt, EndsAt: sess.EndsAt}
	ended := clk.Ended(now)
	var firings []session.Firing
	if len(cs.Clock) > 0 {
		taken, err := session.TakenFirings(ctx, tx, []int64{sess.SID})
		if err != nil {
			return nil, err
		}
		clk.Taken = taken[sess.SID]
		firings = clk.Due(cs, now)
	}
	starts := ended
	for _, f := range firings {
		starts = starts || f.StartsTurn
	}
	if !starts {
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM session_inputs WHERE sid = $1 AND status = 'PENDING' AND starts_turn)`,
			sess.SID).Scan(&starts); err != nil {
			return nil, err
		}
		if !starts {
			return nil, nil
		}
	}
	if !ended {
		// P5, H3: an answer to an interrupt runs in a turn of its own; the
		// other pending inputs wait for the turn after it (P3).
		rows, err := tx.Query(ctx, `SELECT `+session.InputColumns+` FROM session_inputs
			WHERE sid = $1 AND status = 'PENDING' AND kind = 'COMMAND' ORDER BY seq`, sess.SID)
		if err != nil {
			return nil, err
		}
		commands, err := pgx.CollectRows(rows, session.ScanInput)
		if err != nil {
			return nil, err
		}
		if len(commands) > 0 {
			items := make([]item, len(commands))
			for i := range commands {
				items[i] = item{row: &commands[i], at: commands[i].DeliveredAt}
			}
			return &take{items: items}, nil
		}
	}
	limit := action.DefaultMaxInputs
	if cs.MaxInputs > 0 {
		limit = cs.MaxInputs
	}
	// After the end, answers are never cut off from the turn (E6): the
	// turn reaches at least to the last pending COMMAND, whatever the limits.
	floor := 0
	if ended {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING'
			AND seq <= (SELECT max(seq) FROM session_inputs WHERE sid = $1 AND status = 'PENDING' AND kind = 'COMMAND')`,
			sess.SID).Scan(&floor); err != nil {
			return nil, err
		}
	}
	// One more than the limit tells whether anything is left over (E4).
	rows, err := tx.Query(ctx, `SELECT `+session.InputColumns+` FROM session_inputs WHERE sid = $1 AND status = 'PENDING' ORDER BY seq LIMIT $2`,
		sess.SID, max(limit, floor)+1)
	if err != nil {
		return nil, err
	}
	pending, err := pgx.CollectRows(rows, session.ScanInput)
	if err != nil {
		return nil, err
	}
	items, err := merge(ctx, tx, pending, firings)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &take{ended: true}, nil // only an end brings a turn with nothing pending
	}
	n := min(len(items), limit)
	if cs.MaxBytes > 0 {
		total := 0
		for i := range n {
			total += items[i].size()
			if total > cs.MaxBytes && i > 0 {
				n = i
				break
			}
		}
	}
	for i, it := range items {
		if it.row != nil && it.row.Kind == session.KindCommand {
			n = max(n, i+1)
		}
	}
	return &take{items: items[:n], final: ended && n == len(items)}, nil
}

// merge places firings among pending inputs by time (C6): a firing comes
// before the first input whose event committed after its scheduled time.
// Inputs keep their delivery order among themselves.
func merge(ctx context.Context, q ledger.Querier, pending []session.Input, firings []session.Firing) ([]item, error) {
	if len(firings) == 0 {
		out := make([]item, len(pending))
		for i := range pending {
			out[i] = item{row: &pending[i]}
		}
		return out, nil
	}
	ids := make([]uuid.UUID, 0, len(pending))
	for _, in := range pending {
		if in.EventID != nil {
			ids = append(ids, *in.EventID)
		}
	}
	committed := map[uuid.UUID]time.Time{}
	if len(ids) > 0 {
		rows, err := q.Query(ctx, `SELECT id, commit_time FROM events WHERE id = ANY($1)`, ids)
		if err != nil {
			return nil, fmt.Errorf("turn inputs: commit times: %w", err)
		}
		var id uuid.UUID
		var at time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { committed[id] = at; return nil }); err != nil {
			return nil, fmt.Errorf("turn inputs: commit times: %w", err)
		}
	}
	out := make([]item, 0, len(pending)+len(firings))
	next := 0
	for i := range pending {
		in := &pending[i]
		at := in.DeliveredAt
		if in.EventID != nil {
			if t, ok := committed[*in.EventID]; ok {
				at = t
			}
		}
		for ; next < len(firings) && firings[next].At.Before(at); next++ {
			out = append(out, firingItem(firings[next]))
		}
		out = append(out, item{row: in, at: at})
	}
	for ; next < len(firings); next++ {
		out = append(out, firingItem(firings[next]))
	}
	return out, nil
}

func firingItem(f session.Firing) item {
	ev := f.Event()
	ev.ID = uuid.New()
	return item{firing: &f, event: ev, at: f.At}
}

// recordFirings records the turn's firings as SCHEDULE inputs (C3, C6):
// each takes the next delivery sequence number, and an order key that lists
// it where the turn places it, after the input before it. It returns the
// turn's inputs in order and the firings' events, which the caller appends
// as the last write of its transaction.
func recordFirings(ctx context.Context, tx pgx.Tx, sid int64, items []item, now time.Time) ([]session.Input, []ledger.NewEvent, error) {
	k := 0
	for _, it := range items {
		if it.firing != nil {
			k++
		}
	}
	out := make([]session.Input, len(items))
	if k == 0 {
		for i, it := range items {
			out[i] = *it.row
		}
		return out, nil, nil
	}
	var count int64
	if err := tx.QueryRow(ctx, `UPDATE sessions SET input_count = input_count + $2 WHERE sid = $1 RETURNING input_count`,
		sid, k).Scan(&count); err != nil {
		return nil, nil, fmt.Errorf("record firings: %w", err)
	}
	seq := count - int64(k)
	// Before the first pending input the listing continues after the inputs
	// already delivered: any key below that input's own sorts there.
	prev := orderKey(seq)
	for _, it := range items {
		if it.row != nil {
			prev = orderKey(it.row.Seq - 1)
			break
		}
	}
	var (
		seqs, sizes      []int64
		identities, keys []string
		names            []string
		eventIDs         []uuid.UUID
		starts           []bool
		scheduled        []time.Time
		events           []ledger.NewEvent
	)
	for i, it := range items {
		if it.row != nil {
			out[i] = *it.row
			prev = it.row.OrderKey
			continue
		}
		seq++
		f := it.firing
		in := session.Input{SID: sid, Seq: seq, Identity: f.Identity(), Kind: session.KindSchedule, EventID: &it.event.ID,
			StartsTurn: f.StartsTurn, Status: session.InputPending, ByteSize: it.size(), DeliveredAt: now,
			OrderKey: prev + "/" + orderKey(seq)}
		out[i] = in
		seqs, sizes = append(seqs, seq), append(sizes, int64(in.ByteSize))
		identities, keys = append(identities, in.Identity), append(keys, in.OrderKey)
		names, eventIDs = append(names, f.Entry.Name), append(eventIDs, it.event.ID)
		starts, scheduled = append(starts, f.StartsTurn), append(scheduled, f.At)
		events = append(events, it.event)
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_inputs (sid, seq, identity, kind, event_id, starts_turn, status, byte_size, delivered_at, order_key, schedule, scheduled_at)
		SELECT $1, u.seq, u.identity, 'SCHEDULE', u.event_id, u.starts, 'PENDING', u.size, $2, u.key, u.name, u.at
		  FROM unnest($3::bigint[], $4::text[], $5::uuid[], $6::boolean[], $7::bigint[], $8::text[], $9::text[], $10::timestamptz[])
		       AS u (seq, identity, event_id, starts, size, key, name, at)`,
		sid, now, seqs, identities, eventIDs, starts, sizes, keys, names, scheduled)
	if err != nil {
		return nil, nil, fmt.Errorf("record firings: %w", err)
	}
	return out, events, nil
}

// orderKey is the listing key of an input with delivery sequence seq (see
// session_inputs.order_key).
func orderKey(seq int64) string { return fmt.Sprintf("%020d", seq) }

package session

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/schedule"
)

// Firing is a firing of a session clock entry that is due and that no turn
// has taken yet: the latest one of its entry (C5).
type Firing struct {
	Entry *schedule.Entry
	// At is the scheduled time, UTC.
	At time.Time
	// Missed counts the entry's earlier firings passed over since the last
	// one a turn took.
	Missed int
	// StartsTurn reports whether the entry starts a turn (C4).
	StartsTurn bool
}

// Identity is the firing's input identity, schedule/<name>/<scheduled_at> (C3).
func (f Firing) Identity() string {
	return "schedule/" + f.Entry.Name + "/" + f.At.UTC().Format(time.RFC3339Nano)
}

// Event is the firing's schedule.fired event (C3), data {schedule,
// scheduled_at, missed}.
func (f Firing) Event() ledger.NewEvent {
	return ledger.NewEvent{Type: schedule.FiredType, Data: jsonvalue.MustEncode(map[string]any{
		"schedule":     f.Entry.Name,
		"scheduled_at": f.At.UTC().Format(time.RFC3339Nano),
		"missed":       f.Missed,
	})}
}

// Clock is what a session's clock needs to know about the session.
type Clock struct {
	StartedAt time.Time
	EndsAt    *time.Time
	// Taken holds, per entry name, the scheduled time of the last firing a
	// turn took (see TakenFirings).
	Taken map[string]time.Time
}

// Ended reports whether the session's end has come at now (E3).
func (c Clock) Ended(now time.Time) bool { return c.EndsAt != nil && !now.Before(*c.EndsAt) }

// Due returns the firings due at now that no turn has taken, one per entry
// at most (the latest), in scheduled order (ties in definition order).
func (c Clock) Due(cs *action.CompiledSession, now time.Time) []Firing {
	var out []Firing
	for _, e := range cs.Clock {
		after := c.StartedAt
		if t, ok := c.Taken[e.Name]; ok && t.After(after) {
			after = t
		}
		at, n := e.Due(c.StartedAt, after, now, c.EndsAt)
		if n == 0 {
			continue
		}
		f := Firing{Entry: e, At: at, Missed: n - 1, StartsTurn: cs.ClockStartsTurn(e)}
		i := len(out)
		for i > 0 && out[i-1].At.After(f.At) {
			i--
		}
		out = append(out[:i], append([]Firing{f}, out[i:]...)...)
	}
	return out
}

// WakeAfter returns when the session's timer is next due after t: the first
// firing after t of an entry that starts turns, or the end when it is later
// than t, whichever comes first; zero when neither comes. With end set, an
// end at or before t counts too (it is due at once).
func (c Clock) WakeAfter(cs *action.CompiledSession, t time.Time, end bool) time.Time {
	var next time.Time
	for _, e := range cs.Clock {
		if !cs.ClockStartsTurn(e) {
			continue
		}
		if f := e.NextBefore(c.StartedAt, t, c.EndsAt); !f.IsZero() && (next.IsZero() || f.Before(next)) {
			next = f
		}
	}
	if c.EndsAt != nil && (end || c.EndsAt.After(t)) && (next.IsZero() || c.EndsAt.Before(next)) {
		next = *c.EndsAt
	}
	return next
}

// TakenFirings returns, per session and entry name, the scheduled time of
// the last firing a turn took (C5), read through q.
func TakenFirings(ctx context.Context, q ledger.Querier, sids []int64) (map[int64]map[string]time.Time, error) {
	out := make(map[int64]map[string]time.Time, len(sids))
	if len(sids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, takenFiringsSQL(`sid = ANY($1)`), sids)
	if err != nil {
		return nil, fmt.Errorf("session: taken firings: %w", err)
	}
	if err := scanTakenFirings(rows, out); err != nil {
		return nil, fmt.Errorf("session: taken firings: %w", err)
	}
	return out, nil
}

// QueueTakenFirings queues TakenFirings' read in b; out gets its result.
func QueueTakenFirings(b *pgx.Batch, sids []int64, out map[int64]map[string]time.Time) {
	if len(sids) == 0 {
		return
	}
	b.Queue(takenFiringsSQL(`sid = ANY($1)`), sids).Query(func(rows pgx.Rows) error { return scanTakenFirings(rows, out) })
}

// takenFiringsSQL reads the newest firing of each schedule entry of the
// sessions that sids (an SQL condition on sid) selects.
func takenFiringsSQL(sids string) string {
	return `SELECT sid, schedule, max(scheduled_at) FROM session_inputs
	WHERE ` + sids + ` AND schedule IS NOT NULL GROUP BY sid, schedule`
}

func scanTakenFirings(rows pgx.Rows, out map[int64]map[string]time.Time) error {
	var sid int64
	var name string
	var at time.Time
	_, err := pgx.ForEachRow(rows, []any{&sid, &name, &at}, func() error {
		m := out[sid]
		if m == nil {
			m = map[string]time.Time{}
			out[sid] = m
		}
		m[name] = at.UTC()
		return nil
	})
	return err
}

// TakenFirings returns, per entry name, the scheduled time of the last
// firing a turn of session sid took (C5).
func (st *Store) TakenFirings(ctx context.Context, sid int64) (map[string]time.Time, error) {
	m, err := TakenFirings(ctx, st.pool, []int64{sid})
	return m[sid], err
}

// setTimer makes the session's timer due at the latest at due (an earlier
// due time is kept), creating it if needed, in tx. The session row must be
// locked by tx already (timers are always locked after their session).
func setTimer(ctx context.Context, tx pgx.Tx, sid int64, due time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO session_timers (sid, due_at) VALUES ($1, $2)
		ON CONFLICT (sid) DO UPDATE SET due_at = least(session_timers.due_at, EXCLUDED.due_at)`, sid, due)
	if err != nil {
		return fmt.Errorf("session: set timer: %w", err)
	}
	return nil
}

// evalEnd evaluates session.ends for a session's input and startedAt (E1),
// truncated to the microseconds PostgreSQL keeps.
func evalEnd(ctx context.Context, cs *action.CompiledSession, input any, startedAt time.Time) (*time.Time, error) {
	if cs.Ends == nil {
		return nil, nil
	}
	t, err := cs.Ends.EvalTime(ctx, expr.Vars{Session: &expr.Session{Input: input, StartedAt: startedAt}})
	if err != nil {
		return nil, err
	}
	t = t.UTC().Truncate(time.Microsecond)
	if t.Before(startedAt) {
		// An end before the start is the start: the session ends at once.
		// (Clamping also keeps Go's zero time, year 1, from reading as "no end".)
		t = startedAt.UTC()
	}
	return &t, nil
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/pgplan"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Limits of a dry run.
const (
	// DefaultDryRunEvents is how many events a dry run reads by default,
	// MaxDryRunEvents the most it may be asked to.
	DefaultDryRunEvents = 100_000
	MaxDryRunEvents     = 500_000
	// MaxDryRunTurns is the most first turns a dry run may run, and
	// MaxDryRunTurnInputs the most inputs each takes.
	MaxDryRunTurns      = 20
	MaxDryRunTurnInputs = 1000
	// DryRunShown is how many sessions and intake records a dry run lists
	// (the counts cover all of them).
	DryRunShown = 100
)

// MaxDryRuns is how many dry runs one process runs at once (each holds a
// connection and a core for up to the request timeout); more are refused
// with fault.Unavailable (retry later).
const MaxDryRuns = 2

// dryRunSlots bounds the dry runs running in this process.
var dryRunSlots = make(chan struct{}, MaxDryRuns)

// DryRunStats counts what a dry run's triggers did.
type DryRunStats struct {
	Triggers []DryRunTrigger
	// Executions counts the executions an action without a session block
	// would run (one per matching event).
	Executions int
}

// DryRunTrigger is what one trigger did in a dry run: events its
// predicate matched, sessions it started, events it delivered to
// sessions, intake records it left and executions it would run.
type DryRunTrigger struct {
	Trigger       string
	Matched       int
	Started       int
	Delivered     int
	IntakeRecords int
	Executions    int
}

func (s *DryRunStats) count(trigger string, f func(*DryRunTrigger)) {
	if s == nil {
		return
	}
	for i := range s.Triggers {
		if s.Triggers[i].Trigger == trigger {
			f(&s.Triggers[i])
			return
		}
	}
}

// DryRun is what a proposed definition would have done over a range of the
// ledger (issue 15): judged as a new action whose triggers saw those events
// live, in commit order.
type DryRun struct {
	// From and To are the positions asked for; Reached the last one read
	// (To when the whole range was read, less when Limit cut it short).
	From, To, Reached int64
	Events            int
	Limit             int
	Stats             DryRunStats
	// Sessions counts the sessions it would start; Shown lists the first
	// DryRunShown in start order.
	Sessions int
	Shown    []DryRunSession
	// Intake counts intake records by reason; IntakeShown lists the first
	// DryRunShown.
	Intake      map[string]int
	IntakeShown []IntakeRecord
	// Diagnostics are predicates that failed to evaluate, per trigger.
	Diagnostics []Diagnostic
	// Turns are the first turns of the first sessions, when asked for.
	Turns []DryRunTurn
	Took  time.Duration
}

// DryRunTurn is the first turn a session of a dry run would run: its
// handler's outcome on the inputs the session had at the end of the range
// (up to maxInputs). Status is an execution status (SUCCEEDED, FAILED,
// HELD); State and SessionStatus are what the turn would commit.
type DryRunTurn struct {
	SessionID     string
	Inputs        int
	Status        string
	Output        jsonvalue.Value
	Error         *string
	State         jsonvalue.Value
	SessionStatus *string
}

// TurnRunner runs the first turns of the sessions sids of a dry run's
// version comp, inside the dry run's transaction tx (turns.Executor
// .DryRunTurns): the handler's own writes go to a transaction of their own
// that is rolled back too.
type TurnRunner func(ctx context.Context, tx pgx.Tx, comp *action.Compiled, sids []int64) ([]DryRunTurn, error)

// DryRunSession is a session a dry run would start, with the number of
// inputs it would have at the end of the range.
type DryRunSession struct {
	ID        string
	Input     jsonvalue.Value
	StartedAt time.Time
	EndsAt    *time.Time
	// Origin is the event that would start it.
	Origin uuid.UUID
	Inputs int
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// DryRun judges the events from position from to position to (inclusive;
// to 0: the head), at most limit of them (0: DefaultDryRunEvents), with
// the triggers of comp, a compiled definition that is not stored, as a new
// action created before from would have (issue 15). It runs the
// dispatcher's own code in a transaction that is rolled back, so sessions
// are started and resumed, intake records left and executions counted by
// the same rules as live dispatch, and nothing is kept. Turns do not run:
// a session is open until its end. Schedule triggers fire nothing (their
// firings belong to the future). author is who asks: with authorities
// enforced, the definition sees only the namespaces that principal may
// read with the grants it declares. Errors: fault.BadInput (fields from,
// to, limit, turns), fault.Unavailable when MaxDryRuns run already.
//
// With turns > 0 and run set, it also runs the handler of the first turn
// of each of the first turns sessions that have inputs (run; nothing
// commits). Errors
// include fault.BadInput (field turns) for more than MaxDryRunTurns.
func (d *Dispatcher) DryRun(ctx context.Context, comp *action.Compiled, author string, from, to int64, limit, turns int, run TurnRunner) (*DryRun, error) {
	began := time.Now()
	if limit == 0 {
		limit = DefaultDryRunEvents
	}
	switch {
	case from < 1:
		return nil, fault.New(fault.BadInput, "from", "from is a ledger position, at least 1")
	case to != 0 && to < from:
		return nil, fault.New(fault.BadInput, "to", "to is a ledger position at or after from")
	case limit < 1 || limit > MaxDryRunEvents:
		return nil, fault.New(fault.BadInput, "limit", "limit is 1-%d events", MaxDryRunEvents)
	case turns < 0 || turns > MaxDryRunTurns:
		return nil, fault.New(fault.BadInput, "turns", "turns is 0-%d", MaxDryRunTurns)
	}
	select {
	case dryRunSlots <- struct{}{}:
		defer func() { <-dryRunSlots }()
	default:
		return nil, fault.New(fault.Unavailable, "", "%d dry runs are running on this server: try again when one has finished", MaxDryRuns)
	}
	out := &DryRun{From: from, To: to, Reached: from - 1, Limit: limit, Intake: map[string]int{}}
	for _, t := range comp.Triggers {
		out.Stats.Triggers = append(out.Stats.Triggers, DryRunTrigger{Trigger: t.Name})
	}
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT `+pgplan.KeyJoinsExpr); err != nil {
			return err
		}
		head, err := ledger.Head(ctx, tx)
		if err != nil {
			return err
		}
		if from > head+1 {
			return fault.New(fault.BadInput, "from", "from is %d, after the ledger head (%d)", from, head)
		}
		if out.To == 0 || out.To > head {
			out.To = head
		}
		// The proposed version, stored in this transaction alone.
		id := uuid.New()
		now := d.clock.Now()
		raw, err := json.Marshal(comp.Def)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO actions (id, current_version, created_at, updated_at) VALUES ($1, 1, $2, $2)`, id, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO action_versions (action_id, version, definition, from_position, created_at, author)
			VALUES ($1, 1, $2, $3, $4, nullif($5, ''))`, id, raw, from-1, now, author); err != nil {
			return err
		}
		cp := *comp
		cp.ActionID, cp.Version, cp.Author = id, 1, author
		ix, err := d.versionIndex(ctx, tx, &cp, from-1)
		if err != nil {
			return err
		}
		cursor := from - 1
		for cursor < out.To && out.Events < limit {
			events, err := readRange(ctx, tx, cursor, out.To, min(d.Batch, limit-out.Events))
			if err != nil {
				return err
			}
			if len(events) == 0 {
				break
			}
			b := &batch{d: d, index: ix, tx: tx, now: d.clock.Now(), diags: map[diagKey]*diagEntry{}, dry: &out.Stats}
			for _, ev := range events {
				if err := b.event(ctx, ev); err != nil {
					return fmt.Errorf("dry run: event %d: %w", ev.Position, err)
				}
			}
			if err := b.flush(ctx, 0); err != nil {
				return err
			}
			cursor = events[len(events)-1].Position
			out.Events += len(events)
		}
		out.Reached = cursor
		if err := dryRunResults(ctx, tx, id, out); err != nil {
			return err
		}
		if turns > 0 && run != nil && cp.Session != nil {
			// Sessions with inputs: one without would run no turn.
			rows, err := tx.Query(ctx, `SELECT sid FROM sessions s WHERE action_id = $1
				AND EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = s.sid) ORDER BY sid LIMIT $2`, id, turns)
			if err != nil {
				return err
			}
			sids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			if out.Turns, err = run(ctx, tx, &cp, sids); err != nil {
				return err
			}
		}
		return errDryRun
	})
	if !errors.Is(err, errDryRun) {
		return nil, err
	}
	out.Took = time.Since(began)
	return out, nil
}

// dryRunResults reads what the dry run's batches wrote for action id.
func dryRunResults(ctx context.Context, tx pgx.Tx, id uuid.UUID, out *DryRun) error {
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE action_id = $1`, id).Scan(&out.Sessions); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT s.id, s.input, s.started_at, s.ends_at, s.origin_event_id,
			(SELECT count(*) FROM session_inputs i WHERE i.sid = s.sid)
		FROM sessions s WHERE s.action_id = $1 ORDER BY s.sid LIMIT $2`, id, DryRunShown)
	if err != nil {
		return err
	}
	out.Shown, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DryRunSession, error) {
		var s DryRunSession
		err := r.Scan(&s.ID, &s.Input, &s.StartedAt, &s.EndsAt, &s.Origin, &s.Inputs)
		s.StartedAt = s.StartedAt.UTC()
		return s, err
	})
	if err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT t, count(*) FROM session_inputs i JOIN sessions s ON s.sid = i.sid, unnest(i.triggers) t
		WHERE s.action_id = $1 GROUP BY t`, id)
	if err != nil {
		return err
	}
	var trig string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&trig, &n}, func() error {
		out.Stats.count(trig, func(c *DryRunTrigger) { c.Delivered = n })
		return nil
	}); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT reason, count(*) FROM intake_records WHERE action_id = $1 GROUP BY reason`, id)
	if err != nil {
		return err
	}
	var reason string
	if _, err := pgx.ForEachRow(rows, []any{&reason, &n}, func() error {
		out.Intake[reason] = n
		return nil
	}); err != nil {
		return err
	}
	recs, err := intakeRecords(ctx, tx, id, 0, DryRunShown, true)
	if err != nil {
		return err
	}
	out.IntakeShown = recs
	out.Diagnostics, err = diagnostics(ctx, tx, id)
	return err
}

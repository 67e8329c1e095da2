package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/due"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/schedule"
)

// FiringsChannel is the NOTIFY channel that wakes the firing loop when a
// schedule trigger's clock changes (it may be due sooner than the loop
// sleeps for).
const FiringsChannel = "actionsledger_firings"

// DefaultFiringBatch is how many due schedule triggers one transaction fires.
const DefaultFiringBatch = 100

// firingNamespace seeds the ids of firing events: a firing's event id is
// derived from its identity, so the same firing can never be two events.
var firingNamespace = uuid.MustParse("6f1c1a53-8f0e-4d8a-9a43-5e2c0b7f1d20")

// Firing is one firing of a schedule trigger (A4): the trigger of action
// ActionID named Trigger fired for the scheduled time At, passing over
// Missed earlier firings (missed while the service was down, or while
// firings queued behind a slow loop).
type Firing struct {
	ActionID uuid.UUID
	Trigger  string
	// At is the scheduled time, UTC.
	At     time.Time
	Missed int
}

// Identity is the firing's identity:
// schedule/<action id>/<trigger>/<scheduled_at, RFC 3339 UTC>.
func (f Firing) Identity() string {
	return "schedule/" + f.ActionID.String() + "/" + f.Trigger + "/" + f.At.UTC().Format(time.RFC3339Nano)
}

// Event is the firing's schedule.fired event: data {action, trigger,
// scheduled_at, missed}, its id derived from Identity.
func (f Firing) Event() ledger.NewEvent {
	return ledger.NewEvent{
		ID:   uuid.NewSHA1(firingNamespace, []byte(f.Identity())),
		Type: schedule.FiredType,
		Data: jsonvalue.MustEncode(map[string]any{
			"action":       f.ActionID.String(),
			"trigger":      f.Trigger,
			"scheduled_at": f.At.UTC().Format(time.RFC3339Nano),
			"missed":       f.Missed,
		}),
	}
}

// FiredBy returns the action and trigger a schedule.fired event of a
// schedule trigger fired for; ok false for any other event (a session
// clock's firing names no action).
func FiredBy(ev ledger.Event) (actionID uuid.UUID, trigger string, ok bool) {
	if ev.Type != schedule.FiredType {
		return uuid.Nil, "", false
	}
	var d struct {
		Action  string `json:"action"`
		Trigger string `json:"trigger"`
	}
	if json.Unmarshal(ev.Data, &d) != nil || d.Action == "" {
		return uuid.Nil, "", false
	}
	id, err := uuid.Parse(d.Action)
	if err != nil {
		return uuid.Nil, "", false
	}
	return id, d.Trigger, true
}

// TriggerClock is the state of a schedule trigger's clock (A4), as stored.
type TriggerClock struct {
	ActionID uuid.UUID
	Trigger  string
	Spec     TriggerSchedule
	// Anchor is when the trigger got its schedule: an every schedule fires
	// at Anchor + k·every, a cron one strictly after Anchor.
	Anchor time.Time
	// Last is the scheduled time of the last firing, or when the clock
	// last (re)started; firings after it are due.
	Last time.Time
	// Due is the next firing; nil while the action is not ACTIVE (or the
	// schedule never fires again).
	Due *time.Time
	// Fired counts the firings appended, Missed the earlier firings they
	// passed over.
	Fired, Missed int64
	// LastFired is the scheduled time of the last firing, LastEvent its
	// event's id; nil before the first.
	LastFired *time.Time
	LastEvent *uuid.UUID
}

// Next returns the clock's next n firings after now (none while paused),
// UTC, for the trigger's compiled entry e.
func (c TriggerClock) Next(e *schedule.Entry, now time.Time, n int) []time.Time {
	out := []time.Time{}
	if c.Due == nil || e == nil {
		return out
	}
	t := now
	if c.Last.After(t) {
		t = c.Last
	}
	for len(out) < n {
		// A firing due but not yet appended comes first.
		if len(out) == 0 && !c.Due.After(now) {
			out = append(out, c.Due.UTC())
			t = *c.Due
			continue
		}
		next := e.Next(c.Anchor, t)
		if next.IsZero() {
			break
		}
		out = append(out, next.UTC())
		t = next
	}
	return out
}

// Clocks returns the clocks of action id's schedule triggers, keyed by
// trigger name.
func (s *Store) Clocks(ctx context.Context, id uuid.UUID) (map[string]TriggerClock, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+clockColumns+`
		FROM trigger_schedules WHERE action_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("action: clocks: %w", err)
	}
	cs, err := pgx.CollectRows(rows, scanClock)
	if err != nil {
		return nil, fmt.Errorf("action: clocks: %w", err)
	}
	out := make(map[string]TriggerClock, len(cs))
	for _, c := range cs {
		out[c.Trigger] = c
	}
	return out, nil
}

const clockColumns = `action_id, trigger, spec, anchor, last_at, due_at, fired, missed, last_fired_at, last_event_id`

func scanClock(r pgx.CollectableRow) (TriggerClock, error) {
	var c TriggerClock
	var spec []byte
	if err := r.Scan(&c.ActionID, &c.Trigger, &spec, &c.Anchor, &c.Last, &c.Due, &c.Fired, &c.Missed, &c.LastFired, &c.LastEvent); err != nil {
		return c, err
	}
	c.Anchor, c.Last, c.Due, c.LastFired = c.Anchor.UTC(), c.Last.UTC(), utcPtr(c.Due), utcPtr(c.LastFired)
	return c, json.Unmarshal(spec, &c.Spec)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// lockClocks locks the clocks of action id in tx. A version or status
// change takes them before it reads the ledger head (cut): a firing of
// them that is being appended commits first and so falls before the cut,
// judged by the version it fired under; a firing loop that comes later
// skips them until the change commits.
func lockClocks(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM trigger_schedules WHERE action_id = $1 FOR UPDATE`, id); err != nil {
		return fmt.Errorf("action: schedule triggers: %w", err)
	}
	return nil
}

// syncClocks makes the stored clocks of action id match the schedule
// triggers of its version comp, in tx (the version's transaction): a
// trigger new to the action, or whose schedule changed, starts its clock at
// now (so an every schedule's grid starts there and nothing is due for the
// time before); an unchanged one keeps its clock; clocks of triggers the
// version no longer has are dropped. active false (the action is not
// ACTIVE) leaves every clock paused.
func syncClocks(ctx context.Context, tx pgx.Tx, id uuid.UUID, comp *Compiled, now time.Time, active bool) error {
	now = now.UTC().Truncate(time.Microsecond) // as stored
	rows, err := tx.Query(ctx, `SELECT `+clockColumns+`
		FROM trigger_schedules WHERE action_id = $1 FOR UPDATE`, id)
	if err != nil {
		return fmt.Errorf("action: schedule triggers: %w", err)
	}
	old, err := pgx.CollectRows(rows, scanClock)
	if err != nil {
		return fmt.Errorf("action: schedule triggers: %w", err)
	}
	byName := map[string]TriggerClock{}
	for _, c := range old {
		byName[c.Trigger] = c
	}
	keep := []string{}
	changed := false
	for i, t := range comp.Def.Triggers {
		e := comp.Triggers[i].Schedule
		if t.Schedule == nil || e == nil {
			continue
		}
		keep = append(keep, t.Name)
		spec, err := json.Marshal(t.Schedule)
		if err != nil {
			return err
		}
		anchor, last := now, now
		if c, ok := byName[t.Name]; ok {
			was, _ := json.Marshal(c.Spec)
			if jsonvalue.Equal(was, spec) {
				anchor, last = c.Anchor, c.Last
			}
		}
		var due *time.Time
		if active {
			if n := e.Next(anchor, last); !n.IsZero() {
				due = &n
			}
		}
		changed = true
		if _, err := tx.Exec(ctx, `INSERT INTO trigger_schedules (action_id, trigger, spec, anchor, last_at, due_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (action_id, trigger) DO UPDATE SET spec = EXCLUDED.spec, anchor = EXCLUDED.anchor,
				last_at = EXCLUDED.last_at, due_at = EXCLUDED.due_at`, id, t.Name, spec, anchor, last, due); err != nil {
			return fmt.Errorf("action: schedule triggers: %w", err)
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM trigger_schedules WHERE action_id = $1 AND NOT (trigger = ANY($2))`, id, keep)
	if err != nil {
		return fmt.Errorf("action: schedule triggers: %w", err)
	}
	if changed || tag.RowsAffected() > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, FiringsChannel); err != nil {
			return err
		}
	}
	return nil
}

// Firings runs the clocks of schedule triggers (A4). Each due clock fires
// in a transaction that locks its row, appends the firing's schedule.fired
// event and moves the clock to its next firing, so a firing is in the
// ledger exactly once whatever crashes; its event id, derived from the
// firing's identity, keeps a firing from being appended twice even by a
// clock moved back by hand. The dispatcher then matches the event against
// its trigger alone, like an event trigger's match: one execution, or a
// session start or resume.
//
// After downtime a clock fires once, for its latest due time, with missed
// counting the firings passed over: no burst. Several processes may run
// Firings: due rows are locked FOR UPDATE SKIP LOCKED.
type Firings struct {
	pool    *pgxpool.Pool
	actions *Store
	clock   clock.Clock
	log     *slog.Logger
	Batch   int
	// Metrics, when set, counts firings and how late they were.
	Metrics *observe.Metrics
}

// NewFirings returns a Firings.
func NewFirings(pool *pgxpool.Pool, actions *Store, c clock.Clock, log *slog.Logger) *Firings {
	return &Firings{pool: pool, actions: actions, clock: c, log: log, Batch: DefaultFiringBatch}
}

// Run fires due schedule triggers until ctx ends. Between rounds it sleeps
// until the earliest clock is due, at most poll, or until wake.
func (f *Firings) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) error {
	return due.Loop{Name: "schedule triggers", Once: f.FireOnce, Batch: f.Batch, Next: f.NextDue, Clock: f.clock, Log: f.log}.Run(ctx, wake, poll)
}

// NextDue returns when the earliest clock is due; zero when none is.
func (f *Firings) NextDue(ctx context.Context) (time.Time, error) {
	var next *time.Time
	if err := f.pool.QueryRow(ctx, `SELECT min(due_at) FROM trigger_schedules WHERE due_at IS NOT NULL`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("schedule triggers: %w", err)
	}
	if next == nil {
		return time.Time{}, nil
	}
	return next.UTC(), nil
}

// FireOnce fires up to Batch due clocks in one transaction and returns how
// many it handled. Clocks another transaction holds are left for the next
// round.
func (f *Firings) FireOnce(ctx context.Context) (int, error) {
	var fired []Firing
	var now time.Time
	n := 0
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		fired, n = nil, 0
		now = f.clock.Now().UTC().Truncate(time.Microsecond)
		rows, err := tx.Query(ctx, `SELECT `+clockColumns+`
			FROM trigger_schedules WHERE due_at <= $1 ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED`, now, f.Batch)
		if err != nil {
			return fmt.Errorf("schedule triggers: claim: %w", err)
		}
		due, err := pgx.CollectRows(rows, scanClock)
		if err != nil || len(due) == 0 {
			return err
		}
		n = len(due)
		var firings []Firing
		var actions, triggers []string
		var lasts []time.Time
		var dues []*time.Time
		var missed []int64
		var eventIDs []*uuid.UUID
		for _, c := range due {
			e, err := TriggerEntry(c.Trigger, c.Spec)
			if err != nil {
				// A stored schedule that no longer parses (a zone gone
				// from the database): pause it rather than retry forever.
				f.log.Error("schedule trigger paused: its schedule does not parse", "action", c.ActionID, "trigger", c.Trigger, "err", err)
				actions, triggers = append(actions, c.ActionID.String()), append(triggers, c.Trigger)
				lasts, dues, missed, eventIDs = append(lasts, c.Last), append(dues, nil), append(missed, -1), append(eventIDs, nil)
				continue
			}
			at, count := e.Due(c.Anchor, c.Last, now, nil)
			var next *time.Time
			if t := e.Next(c.Anchor, now); !t.IsZero() {
				next = &t
			}
			last, id := c.Last, (*uuid.UUID)(nil)
			if count > 0 {
				fr := Firing{ActionID: c.ActionID, Trigger: c.Trigger, At: at.UTC(), Missed: count - 1}
				firings = append(firings, fr)
				ev := fr.Event()
				last, id = fr.At, &ev.ID
			}
			actions, triggers = append(actions, c.ActionID.String()), append(triggers, c.Trigger)
			lasts, dues, eventIDs = append(lasts, last), append(dues, next), append(eventIDs, id)
			missed = append(missed, int64(max(count-1, 0)))
		}
		if len(firings) > 0 {
			evs, err := f.fresh(ctx, tx, firings)
			if err != nil {
				return err
			}
			if _, err := ledger.Append(ctx, tx, now, evs...); err != nil {
				return err
			}
			fired = firings
		}
		// missed -1 marks a paused clock (its schedule failed to parse).
		_, err = tx.Exec(ctx, `UPDATE trigger_schedules t SET last_at = u.last_at, due_at = u.due_at,
				fired = t.fired + CASE WHEN u.event_id IS NULL THEN 0 ELSE 1 END,
				missed = t.missed + greatest(u.missed, 0),
				last_event_id = coalesce(u.event_id, t.last_event_id),
				last_fired_at = CASE WHEN u.event_id IS NULL THEN t.last_fired_at ELSE u.last_at END
			FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::bigint[], $6::uuid[])
				AS u (action_id, trigger, last_at, due_at, missed, event_id)
			WHERE t.action_id = u.action_id AND t.trigger = u.trigger`, actions, triggers, lasts, dues, missed, eventIDs)
		if err != nil {
			return fmt.Errorf("schedule triggers: move: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, fr := range fired {
		f.Metrics.TriggerFiring(now.Sub(fr.At), fr.Missed)
	}
	return n, nil
}

// fresh returns the events of firings that are not in the ledger yet, in
// scheduled order (a clock is never moved back, so normally all of them).
func (f *Firings) fresh(ctx context.Context, tx pgx.Tx, firings []Firing) ([]ledger.NewEvent, error) {
	sortFirings(firings)
	evs := make([]ledger.NewEvent, len(firings))
	ids := make([]uuid.UUID, len(firings))
	for i, fr := range firings {
		evs[i] = fr.Event()
		ids[i] = evs[i].ID
	}
	rows, err := tx.Query(ctx, `SELECT id FROM events WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("schedule triggers: %w", err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("schedule triggers: %w", err)
	}
	return slices.DeleteFunc(evs, func(ev ledger.NewEvent) bool { return slices.Contains(have, ev.ID) }), nil
}

// sortFirings orders firings by scheduled time (ties by action and
// trigger), so the ledger holds them in the order they were due.
func sortFirings(firings []Firing) {
	slices.SortStableFunc(firings, func(a, b Firing) int {
		if firingBefore(a, b) {
			return -1
		}
		if firingBefore(b, a) {
			return 1
		}
		return 0
	})
}

func firingBefore(a, b Firing) bool {
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	if a.ActionID != b.ActionID {
		return a.ActionID.String() < b.ActionID.String()
	}
	return a.Trigger < b.Trigger
}

// TriggerEntry compiles the stored schedule s of the trigger named name
// with the rules of a definition's (A4).
func TriggerEntry(name string, s TriggerSchedule) (*schedule.Entry, error) {
	c := &compiler{}
	e := c.triggerSchedule(Trigger{Name: name, Schedule: &s}, "schedule")
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return e, nil
}

// pauseClocks pauses (active false) or restarts from now (active true) the
// clocks of action id in tx, as its status changes (A4: enabling resumes
// from now, with nothing due for the time it was not ACTIVE).
func pauseClocks(ctx context.Context, tx pgx.Tx, id uuid.UUID, now time.Time, active bool) error {
	now = now.UTC().Truncate(time.Microsecond) // as stored
	if !active {
		_, err := tx.Exec(ctx, `UPDATE trigger_schedules SET due_at = NULL WHERE action_id = $1`, id)
		return err
	}
	rows, err := tx.Query(ctx, `SELECT `+clockColumns+`
		FROM trigger_schedules WHERE action_id = $1 FOR UPDATE`, id)
	if err != nil {
		return err
	}
	cs, err := pgx.CollectRows(rows, scanClock)
	if err != nil || len(cs) == 0 {
		return err
	}
	for _, c := range cs {
		e, err := TriggerEntry(c.Trigger, c.Spec)
		if err != nil {
			continue // stays paused
		}
		var due *time.Time
		if n := e.Next(c.Anchor, now); !n.IsZero() {
			due = &n
		}
		if _, err := tx.Exec(ctx, `UPDATE trigger_schedules SET last_at = $3, due_at = $4 WHERE action_id = $1 AND trigger = $2`,
			id, c.Trigger, now, due); err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, FiringsChannel)
	return err
}

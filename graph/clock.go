package graph

import (
	"context"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// MaxNextFirings is the most firings nextFirings lists.
const MaxNextFirings = 100

// nextFirings answers a nextFirings field: count is 1-MaxNextFirings,
// default 5. Errors: fault.BadInput (field count).
func nextFirings(count *int, upcoming func(int) []time.Time) ([]time.Time, error) {
	n := 5
	if count != nil {
		n = *count
	}
	if n < 1 || n > MaxNextFirings {
		return nil, fault.New(fault.BadInput, "count", "count is 1-%d", MaxNextFirings)
	}
	if upcoming == nil {
		return []time.Time{}, nil
	}
	return upcoming(n), nil
}

// triggerClocks is Action.schedules (A4): the clocks of the schedule
// triggers of the action's newest version, in definition order.
func (r *Resolver) triggerClocks(ctx context.Context, a *action.Action) ([]model.TriggerClock, error) {
	c, err := r.ActionStore.Compiled(ctx, a.ID, a.CurrentVersion)
	if err != nil {
		return nil, err
	}
	out := []model.TriggerClock{}
	var clocks map[string]action.TriggerClock
	now := r.Clock.Now()
	for i, t := range c.Triggers {
		if t.Schedule == nil {
			continue
		}
		if clocks == nil {
			if clocks, err = r.ActionStore.Clocks(ctx, a.ID); err != nil {
				return nil, err
			}
		}
		tc, ok := clocks[t.Name]
		if !ok {
			continue // stored before schedule triggers had clocks: cannot be
		}
		def := c.Def.Triggers[i].Schedule
		e := t.Schedule
		out = append(out, model.TriggerClock{
			Trigger: t.Name, Cron: def.Cron, Timezone: def.Timezone, Every: def.Every,
			Anchor: tc.Anchor, Active: tc.Due != nil, Fired: int(tc.Fired), Missed: int(tc.Missed),
			LastFiredAt: tc.LastFired, DueAt: tc.Due, LastEventID: tc.LastEvent,
			Upcoming: func(n int) []time.Time { return tc.Next(e, now, n) },
		})
	}
	return out, nil
}

// sessionClock is ActionSession.clock (issue 13: the console shows a
// session's next firings): the entries of the session version's clock in
// definition order, each with the last firing a turn took, the firing due
// and not taken yet (C5) and the next one after now before the session's
// end (C1, C2). A closed session has no next firing.
func (r *Resolver) sessionClock(ctx context.Context, s *session.Session) ([]model.ClockEntry, error) {
	c, err := r.ActionStore.Compiled(ctx, s.ActionID, s.Version)
	if err != nil {
		return nil, err
	}
	if c.Session == nil || len(c.Session.Clock) == 0 {
		return []model.ClockEntry{}, nil
	}
	taken, err := r.SessionStore.TakenFirings(ctx, s.SID)
	if err != nil {
		return nil, err
	}
	now := r.Clock.Now()
	clk := session.Clock{StartedAt: s.StartedAt, EndsAt: s.EndsAt, Taken: taken}
	due := map[string]time.Time{}
	if !s.Status.Final() {
		for _, f := range clk.Due(c.Session, now) {
			due[f.Entry.Name] = f.At
		}
	}
	v, err := r.version(ctx, s.ActionID, s.Version)
	if err != nil {
		return nil, err
	}
	out := make([]model.ClockEntry, 0, len(c.Session.Clock))
	for i, e := range c.Session.Clock {
		entry := model.ClockEntry{Name: e.Name, StartsTurn: c.Session.ClockStartsTurn(e)}
		if v != nil && v.Definition.Session != nil && i < len(v.Definition.Session.Schedule) {
			def := v.Definition.Session.Schedule[i]
			entry.Cron, entry.Timezone, entry.Every = def.Cron, def.Timezone, def.Every
		}
		if t, ok := clk.Taken[e.Name]; ok {
			entry.LastTaken = &t
		}
		if t, ok := due[e.Name]; ok {
			entry.Due = &t
		}
		final, startedAt, endsAt := s.Status.Final(), s.StartedAt, s.EndsAt
		entry.Upcoming = func(n int) []time.Time {
			out := []time.Time{}
			for t := now; !final && len(out) < n; {
				if t = e.NextBefore(startedAt, t, endsAt); t.IsZero() {
					break
				}
				out = append(out, t.UTC())
			}
			return out
		}
		if next := entry.Upcoming(1); len(next) == 1 {
			entry.Next = &next[0]
		}
		out = append(out, entry)
	}
	return out, nil
}

// parsePosition reads a ledger position argument (a decimal string).
// Errors: fault.BadInput (field name).
func parsePosition(s *string, name string) (int64, error) {
	p, err := strconv.ParseInt(*s, 10, 64)
	if err != nil {
		return 0, fault.New(fault.BadInput, name, "%s is a ledger position: a decimal integer, as Event.position gives it", name)
	}
	return p, nil
}

// parseFrom reads createAction's and updateAction's from: a ledger
// position as a decimal string. Errors: fault.BadInput (field from).
func parseFrom(from *string) (action.From, error) {
	if from == nil {
		return action.From{}, nil
	}
	p, err := parsePosition(from, "from")
	if err != nil {
		return action.From{}, err
	}
	return action.From{Position: &p}, nil
}

// triggerNextFirings is Trigger.nextFirings (A4): the clock of the
// trigger's action, found from the object the trigger was read through
// (an action, an action version or an execution), when it runs with this
// trigger's schedule.
func (r *Resolver) triggerNextFirings(ctx context.Context, t *action.Trigger, count *int) ([]time.Time, error) {
	id, ok := triggerOwner(ctx)
	if t.Schedule == nil || !ok {
		return nextFirings(count, nil)
	}
	clocks, err := r.ActionStore.Clocks(ctx, id)
	if err != nil {
		return nil, err
	}
	c, ok := clocks[t.Name]
	if !ok || !sameSchedule(c.Spec, *t.Schedule) {
		return nextFirings(count, nil)
	}
	e, err := action.TriggerEntry(t.Name, c.Spec)
	if err != nil {
		return nextFirings(count, nil)
	}
	now := r.Clock.Now()
	return nextFirings(count, func(n int) []time.Time { return c.Next(e, now, n) })
}

// triggerOwner finds the action a Trigger field is resolved under by
// walking up the field contexts to the action, version or execution
// that holds the definition.
func triggerOwner(ctx context.Context) (uuid.UUID, bool) {
	for fc := graphql.GetFieldContext(ctx); fc != nil; fc = fc.Parent {
		switch v := fc.Result.(type) {
		case *action.Version:
			return v.ActionID, v != nil
		case action.Version:
			return v.ActionID, true
		case *action.Action:
			return v.ID, v != nil
		case *turns.Execution:
			return v.ActionID, v != nil
		case turns.Execution:
			return v.ActionID, true
		}
	}
	return uuid.Nil, false
}

func sameSchedule(a, b action.TriggerSchedule) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.Cron, b.Cron) && eq(a.Timezone, b.Timezone) && eq(a.Every, b.Every)
}

package graph

import (
	"context"
	"time"

	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/session"
)

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
		if !s.Status.Final() {
			if t := e.NextBefore(s.StartedAt, now, s.EndsAt); !t.IsZero() {
				t = t.UTC()
				entry.Next = &t
			}
		}
		out = append(out, entry)
	}
	return out, nil
}

package session_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/schedule"
)

// firingData is a schedule trigger firing's event data (A4).
type firingData struct {
	Action      string `json:"action"`
	Trigger     string `json:"trigger"`
	ScheduledAt string `json:"scheduled_at"`
	Missed      int    `json:"missed"`
}

// fire runs the schedule triggers' clocks once and returns the firings
// appended, oldest first.
func (f *fixture) fire() []firingData {
	f.t.Helper()
	before := f.head()
	_, err := f.app.Firings.FireOnce(f.ctx)
	require.NoError(f.t, err)
	evs, err := f.app.Ledger.Events(f.ctx, before, 1000, schedule.FiredType)
	require.NoError(f.t, err)
	var out []firingData
	for _, ev := range evs {
		var d firingData
		require.NoError(f.t, json.Unmarshal(ev.Data, &d))
		out = append(out, d)
	}
	return out
}

func (f *fixture) clocks(id uuid.UUID) map[string]action.TriggerClock {
	f.t.Helper()
	cs, err := f.app.Actions.Clocks(f.ctx, id)
	require.NoError(f.t, err)
	return cs
}

func at(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// A4: an every trigger fires on a grid from its creation, once per
// firing however often the loop runs; after downtime it fires once, for
// the latest due time, counting the rest as missed; disabling stops it
// and enabling resumes from then, with nothing missed for the pause.
func TestScheduleTriggerFiresOnceAndCatchesUp_A4(t *testing.T) {
	f := setup(t)
	id := f.create(action.Definition{Name: "tick", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "tick", Schedule: &action.TriggerSchedule{Every: ptr("1m")}},
	}})
	require.Empty(t, f.fire(), "nothing is due at creation")

	f.clock.Advance(time.Minute)
	got := f.fire()
	require.Equal(t, []firingData{{id.String(), "tick", at(epoch.Add(time.Minute)), 0}}, got)
	require.Empty(t, f.fire(), "a firing is appended once")

	f.clock.Advance(10*time.Minute + 30*time.Second) // the service was down
	require.Equal(t, []firingData{{id.String(), "tick", at(epoch.Add(11 * time.Minute)), 9}}, f.fire())
	f.dispatch()

	_, err := f.app.Actions.SetStatus(f.ctx, id, action.StatusDisabled)
	require.NoError(t, err)
	f.clock.Advance(5 * time.Minute)
	require.Empty(t, f.fire(), "a disabled action's schedule does not fire")
	require.False(t, f.clocks(id)["tick"].Due != nil)

	_, err = f.app.Actions.SetStatus(f.ctx, id, action.StatusActive) // at 16m30s
	require.NoError(t, err)
	require.Empty(t, f.fire(), "enabling does not fire for the pause")
	f.clock.Advance(time.Minute) // 17m30s: the grid from creation goes on
	require.Equal(t, []firingData{{id.String(), "tick", at(epoch.Add(17 * time.Minute)), 0}}, f.fire())

	c := f.clocks(id)["tick"]
	require.EqualValues(t, 3, c.Fired)
	require.EqualValues(t, 9, c.Missed)
	require.Equal(t, epoch.Add(17*time.Minute), *c.LastFired)
	require.Equal(t, epoch.Add(18*time.Minute), *c.Due)
	require.Equal(t, []time.Time{epoch.Add(18 * time.Minute), epoch.Add(19 * time.Minute)},
		c.Next(schedule.Every("tick", time.Minute), f.clock.Now(), 2))

	// Each firing runs one execution of the action without a session block.
	f.dispatch()
	xs, err := f.app.Turns.ActionExecutions(f.ctx, id, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, xs, 3)
	for _, x := range xs {
		require.Equal(t, []string{"tick"}, x.Triggers)
	}
}

// A4: a firing reaches its own trigger alone: not a schedule trigger of
// the same name in another action, nor a trigger whose predicate pins no
// event type; and a session clock's firings (C3) reach no trigger.
func TestScheduleTriggerFiringGoesToItsTriggerAlone_A4(t *testing.T) {
	f := setup(t)
	def := action.Definition{Name: "tick", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "tick", Schedule: &action.TriggerSchedule{Every: ptr("1m")}},
	}}
	a := f.create(def)
	f.clock.Advance(30 * time.Second)
	b := f.create(def) // its grid starts 30s later
	any := f.create(action.Definition{Name: "any", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "any", Event: `has(event.data.trigger) || event.data.schedule == "x"`},
	}})
	f.clock.Advance(40 * time.Second) // a fires at 1m, b not yet (1m30s)
	require.Len(t, f.fire(), 1)
	f.dispatch()
	count := func(id uuid.UUID) int {
		xs, err := f.app.Turns.ActionExecutions(f.ctx, id, 0, 100, nil)
		require.NoError(t, err)
		return len(xs)
	}
	require.Equal(t, 1, count(a))
	require.Equal(t, 0, count(b))
	require.Equal(t, 0, count(any))
}

// A4 with a session block: a start schedule trigger starts a session whose
// input its mapping reads from the firing; a resume one delivers each
// firing to the session its id names, as an EVENT input of that trigger.
func TestScheduleTriggerStartsAndResumesSessions_A4(t *testing.T) {
	f := setup(t)
	id := f.create(action.Definition{Name: "daily", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "daily", Schedule: &action.TriggerSchedule{Cron: ptr("0 2 * * *"), Timezone: ptr("Europe/Berlin")},
				Session: startRole(`{"day": "string(event.data.scheduled_at)", "missed": "int(event.data.missed)"}`)},
			{Name: "hourly", Schedule: &action.TriggerSchedule{Every: ptr("1h")},
				Session: resumeRole(`"2025-03-04T01:00:00Z"`)},
		},
		Session: &action.SessionDef{ID: "string(session.input.day)"},
	})
	// epoch is 09:00 UTC; 02:00 in Berlin (CET) is 01:00 UTC next day.
	f.clock.Set(time.Date(2025, 3, 4, 1, 0, 0, 0, time.UTC))
	got := f.fire()
	require.Len(t, got, 2)
	// Both are due at 01:00 UTC: ties go in action and trigger order.
	require.Equal(t, firingData{id.String(), "daily", "2025-03-04T01:00:00Z", 0}, got[0])
	require.Equal(t, firingData{id.String(), "hourly", "2025-03-04T01:00:00Z", 15}, got[1], "10:00 to 00:00 passed over")
	f.dispatch()
	s := f.session(id, "2025-03-04T01:00:00Z")
	var input map[string]any
	require.NoError(t, json.Unmarshal(s.Input, &input))
	require.Equal(t, map[string]any{"day": "2025-03-04T01:00:00Z", "missed": float64(0)}, input)
	in := f.inputs(s)
	require.Len(t, in, 1, "the hourly firing, committed after the daily one, reached the session it started")
	require.Equal(t, []string{"hourly"}, in[0].Triggers)
	ev, err := f.app.Ledger.Event(f.ctx, *in[0].EventID)
	require.NoError(t, err)
	require.Equal(t, schedule.FiredType, ev.Type)

	f.clock.Advance(time.Hour)
	require.Len(t, f.fire(), 1)
	f.dispatch()
	require.Len(t, f.inputs(s), 2)
	require.Empty(t, f.intakeViews(id))
}

// A4, A2: an update that keeps a trigger's schedule keeps its clock; one
// that changes it starts the clock again at the update; one that drops the
// trigger drops its clock.
func TestScheduleTriggerUpdates_A4(t *testing.T) {
	f := setup(t)
	def := action.Definition{Name: "tick", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "tick", Schedule: &action.TriggerSchedule{Every: ptr("1m")}},
		{Name: "entry", Event: `event.type == "entry.inserted"`},
	}}
	id := f.create(def)
	f.clock.Advance(90 * time.Second)
	require.Len(t, f.fire(), 1)

	def.Name = "tick, renamed"
	_, err := f.app.Actions.Update(f.ctx, id, def)
	require.NoError(t, err)
	c := f.clocks(id)["tick"]
	require.Equal(t, epoch, c.Anchor, "an unchanged schedule keeps its clock")
	require.Equal(t, epoch.Add(2*time.Minute), *c.Due)

	def.Triggers[0].Schedule = &action.TriggerSchedule{Every: ptr("5m")}
	_, err = f.app.Actions.Update(f.ctx, id, def)
	require.NoError(t, err)
	c = f.clocks(id)["tick"]
	require.Equal(t, f.clock.Now(), c.Anchor, "a changed schedule starts again")
	require.Equal(t, f.clock.Now().Add(5*time.Minute), *c.Due)
	require.EqualValues(t, 1, c.Fired, "its counts stay")

	def.Triggers = def.Triggers[1:]
	_, err = f.app.Actions.Update(f.ctx, id, def)
	require.NoError(t, err)
	require.Empty(t, f.clocks(id))
	f.clock.Advance(time.Hour)
	require.Empty(t, f.fire())
}

// A4: two loops firing at once append each firing once (the clock's row
// is locked while its firing is appended; the event id is the firing's
// identity).
func TestScheduleTriggerConcurrentLoops_A4(t *testing.T) {
	f := setup(t)
	for range 5 {
		f.create(action.Definition{Name: "tick", Kind: "agent.echo", Triggers: []action.Trigger{
			{Name: "tick", Schedule: &action.TriggerSchedule{Every: ptr("1s")}},
		}})
	}
	before := f.head()
	for range 20 {
		f.clock.Advance(time.Second)
		done := make(chan error, 2)
		for range 2 {
			go func() { _, err := f.app.Firings.FireOnce(f.ctx); done <- err }()
		}
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		// A clock one loop skipped (locked by the other) fires in the next round.
		_, err := f.app.Firings.FireOnce(f.ctx)
		require.NoError(t, err)
	}
	evs, err := f.app.Ledger.Events(f.ctx, before, 1000, schedule.FiredType)
	require.NoError(t, err)
	require.Len(t, evs, 100)
	seen := map[string]bool{}
	for _, ev := range evs {
		var d firingData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		k := d.Action + d.ScheduledAt
		require.False(t, seen[k], "firing %s twice", k)
		seen[k] = true
		require.Zero(t, d.Missed)
	}
}

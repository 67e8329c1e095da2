package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
)

const createScheduledOp = `mutation($id: UUID!) { actions { createAction(id: $id, input: {
  name: "nightly report", kind: "agent.echo",
  triggers: [
    { name: "tick", schedule: { every: "1m" } },
    { name: "nightly", schedule: { cron: "0 2 * * *", timezone: "Europe/Berlin" } },
    { name: "entry", event: "event.type == \"entry.inserted\"" }
  ]
}) { version definition { triggers { name event schedule { cron timezone every } } } } } }`

const schedulesOp = `query($id: UUID!) { actions { action(id: $id) { status schedules {
  trigger cron timezone every anchor active fired missed lastFiredAt dueAt nextFirings(count: 3)
  lastEvent { eventType data }
} } } }`

type triggerClock struct {
	Trigger     string
	Cron        *string
	Timezone    *string
	Every       *string
	Anchor      time.Time
	Active      bool
	Fired       int
	Missed      int
	LastFiredAt *time.Time
	DueAt       *time.Time
	NextFirings []time.Time
	LastEvent   *struct {
		EventType string
		Data      json.RawMessage
	}
}

func (e *env) schedules(t *testing.T, id string) []triggerClock {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct {
				Status    string
				Schedules []triggerClock
			}
		}
	}
	e.ok(t, schedulesOp, map[string]any{"id": id}, &out)
	return out.Actions.Action.Schedules
}

// A4 over GraphQL with the loops running: schedule triggers are defined
// and read back, their clocks show what comes next, a firing runs an
// execution of the action without a session block with its
// schedule.fired event, and disabling pauses the clocks.
func TestScheduleTriggerEndToEnd_A4(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clk := e.app.Clock.(*clock.Manual)
	start := clk.Now() // Monday 2026-03-02 09:00 UTC
	id := uuid.NewString()

	var created struct {
		Actions struct {
			CreateAction struct {
				Definition struct {
					Triggers []struct {
						Name     string
						Event    *string
						Schedule *struct{ Cron, Timezone, Every *string }
					}
				}
			}
		}
	}
	e.ok(t, createScheduledOp, map[string]any{"id": id}, &created)
	tr := created.Actions.CreateAction.Definition.Triggers
	require.Len(t, tr, 3)
	require.Nil(t, tr[0].Event)
	require.Equal(t, "1m", *tr[0].Schedule.Every)
	require.Equal(t, "0 2 * * *", *tr[1].Schedule.Cron)
	require.Equal(t, "Europe/Berlin", *tr[1].Schedule.Timezone)
	require.Nil(t, tr[2].Schedule)

	cs := e.schedules(t, id)
	require.Len(t, cs, 2, "one clock per schedule trigger, in definition order")
	require.Equal(t, "tick", cs[0].Trigger)
	require.True(t, cs[0].Active)
	require.Equal(t, start, cs[0].Anchor.UTC())
	require.Equal(t, []time.Time{start.Add(time.Minute), start.Add(2 * time.Minute), start.Add(3 * time.Minute)}, utcs(cs[0].NextFirings))
	require.Nil(t, cs[0].LastFiredAt)
	// 02:00 in Berlin is 01:00 UTC in winter; on 29 March Berlin moves to
	// summer time, but these three are before it.
	require.Equal(t, []time.Time{
		time.Date(2026, 3, 3, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 4, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 5, 1, 0, 0, 0, time.UTC),
	}, utcs(cs[1].NextFirings))

	// The triggers themselves say what comes next, read through the action
	// or one of its versions.
	var defs struct {
		Actions struct {
			Action struct {
				Definition struct {
					Triggers []struct {
						Name        string
						NextFirings []time.Time
					}
				}
				VersionAt struct {
					Definition struct {
						Triggers []struct{ NextFirings []time.Time }
					}
				}
			}
		}
	}
	e.ok(t, `query($id: UUID!) { actions { action(id: $id) {
	  definition { triggers { name nextFirings(count: 2) } }
	  versionAt(number: 1) { definition { triggers { nextFirings(count: 1) } } } } } }`, map[string]any{"id": id}, &defs)
	dt := defs.Actions.Action.Definition.Triggers
	require.Equal(t, []time.Time{start.Add(time.Minute), start.Add(2 * time.Minute)}, utcs(dt[0].NextFirings))
	require.Len(t, dt[1].NextFirings, 2)
	require.Empty(t, dt[2].NextFirings, "an event trigger has no clock")
	require.Equal(t, []time.Time{start.Add(time.Minute)}, utcs(defs.Actions.Action.VersionAt.Definition.Triggers[0].NextFirings))

	clk.Advance(time.Minute)
	poll(t, "the first firing's execution", func() bool {
		return len(e.executions(t, uuid.MustParse(id), "SUCCEEDED", 10, nil).Actions.Action.Executions.Nodes) == 1
	})
	x := e.executions(t, uuid.MustParse(id), nil, 10, nil).Actions.Action.Executions.Nodes[0]
	require.Equal(t, "schedule.fired", x.Event.EventType)
	var data map[string]any
	require.NoError(t, json.Unmarshal(x.Event.Data, &data))
	require.Equal(t, map[string]any{"action": id, "trigger": "tick", "scheduled_at": "2026-03-02T09:01:00Z", "missed": float64(0)}, data)
	cs = e.schedules(t, id)
	require.Equal(t, 1, cs[0].Fired)
	require.Equal(t, start.Add(time.Minute), cs[0].LastFiredAt.UTC())
	require.Equal(t, "schedule.fired", cs[0].LastEvent.EventType)

	r := e.do(t, `mutation($id: UUID!) { actions { setActionStatus(id: $id, status: DISABLED) { status } } }`, map[string]any{"id": id})
	require.Empty(t, r.Errors)
	cs = e.schedules(t, id)
	require.False(t, cs[0].Active)
	require.Empty(t, cs[0].NextFirings)
	require.Nil(t, cs[0].DueAt)

	requireError(t, e.do(t, `query($id: UUID!) { actions { action(id: $id) { schedules { nextFirings(count: 0) } } } }`,
		map[string]any{"id": id}), "BAD_USER_INPUT", "count")
}

// A4: a trigger with both an event predicate and a schedule, or a schedule
// that cannot fire, is refused naming the field, and nothing is stored.
func TestScheduleTriggerRefused_A4(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const op = `mutation($id: UUID!, $t: [TriggerInput!]) { actions { createAction(id: $id, input: {
	  name: "x", kind: "agent.echo", triggers: $t }) { version } } }`
	cases := []struct {
		trigger     map[string]any
		code, field string
	}{
		{map[string]any{"name": "t", "event": `event.type == "a"`, "schedule": map[string]any{"every": "1m"}}, "INVALID_ACTION", "input.triggers[0].event"},
		{map[string]any{"name": "t", "schedule": map[string]any{"cron": "0 0 30 2 *"}}, "INVALID_ACTION", "input.triggers[0].schedule.cron"},
		{map[string]any{"name": "t", "schedule": map[string]any{"cron": "0 2 * * *", "timezone": "Europe/Nowhere"}}, "INVALID_ACTION", "input.triggers[0].schedule.timezone"},
		{map[string]any{"name": "t", "schedule": map[string]any{}}, "INVALID_ACTION", "input.triggers[0].schedule"},
		{map[string]any{"name": "t", "schedule": map[string]any{"every": "10ms"}}, "INVALID_ACTION", "input.triggers[0].schedule.every"},
	}
	for _, tc := range cases {
		id := uuid.NewString()
		requireError(t, e.do(t, op, map[string]any{"id": id, "t": []any{tc.trigger}}), tc.code, tc.field)
		require.Zero(t, e.countRows(t, `SELECT count(*) FROM actions WHERE id = $1`, id))
	}
	require.Zero(t, e.countRows(t, `SELECT count(*) FROM trigger_schedules`))
}

// C1: a session's clock entries list their next firings too.
func TestClockEntryNextFirings_C1(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clk := e.app.Clock.(*clock.Manual)
	id := uuid.NewString()
	e.ok(t, `mutation($id: UUID!) { actions { createAction(id: $id, input: {
	  name: "m", kind: "agent.echo",
	  triggers: [{ name: "opened", event: "event.type == \"account.inserted\"", session: { start: { input: { id: "string(event.data.id)" } } } }],
	  session: { id: "string(session.input.id)", ends: "session.started_at + duration('150s')", schedule: [{ name: "each", every: "1m" }] }
	}) { version } } }`, map[string]any{"id": id}, nil)
	e.put(t, "account", "a1", map[string]any{"id": "a1"}, "")
	var out struct {
		Actions struct {
			Action struct {
				Session *struct {
					StartedAt time.Time
					Clock     []struct {
						Name        string
						Next        *time.Time
						NextFirings []time.Time
					}
				}
			}
		}
	}
	q := `query($id: UUID!) { actions { action(id: $id) { session(id: "a1") { startedAt clock { name next nextFirings(count: 5) } } } } }`
	poll(t, "the session", func() bool {
		e.ok(t, q, map[string]any{"id": id}, &out)
		return out.Actions.Action.Session != nil
	})
	s := out.Actions.Action.Session
	st := s.StartedAt.UTC()
	require.Equal(t, st, clk.Now())
	require.Equal(t, []time.Time{st.Add(time.Minute), st.Add(2 * time.Minute)}, utcs(s.Clock[0].NextFirings), "none at or after the end")
	require.Equal(t, st.Add(time.Minute), s.Clock[0].Next.UTC())
}

func utcs(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

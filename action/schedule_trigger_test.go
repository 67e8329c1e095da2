package action_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/schedule"
)

// scheduled is an action without a session block with a schedule trigger
// and an event trigger (A4).
func scheduled() action.Definition {
	return action.Definition{Name: "nightly", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "nightly", Schedule: &action.TriggerSchedule{Cron: ptr("0 2 * * *"), Timezone: ptr("Europe/Berlin")}},
		{Name: "entry", Event: `event.type == "entry.inserted"`},
	}}
}

// A4: a schedule trigger compiles to its clock entry and a predicate that
// matches firings of a trigger of its name; it needs no read grant for
// them. With a session block it starts sessions from the firing or
// resumes one.
func TestCompileScheduleTrigger_A4(t *testing.T) {
	t.Parallel()
	c, err := action.Compile(scheduled(), nil)
	require.NoError(t, err)
	tr := c.Triggers[0]
	require.NotNil(t, tr.Schedule)
	require.Equal(t, "nightly", tr.Schedule.Name)
	require.Equal(t, []string{schedule.FiredType}, tr.EventTypes)
	require.Nil(t, c.Triggers[1].Schedule)
	require.Equal(t, []string{"entry"}, c.Grants.Read, "a schedule trigger reads no namespace")

	d := monitor()
	d.Triggers = append(d.Triggers,
		action.Trigger{Name: "daily", Schedule: &action.TriggerSchedule{Every: ptr("24h")},
			Session: &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"account_id": "'6f1c1a53-8f0e-4d8a-9a43-5e2c0b7f1d20'"}`)}}},
		action.Trigger{Name: "hourly", Schedule: &action.TriggerSchedule{Cron: ptr("@hourly")},
			Session: &action.TriggerRole{Resume: &action.ResumeRole{ID: `"acct-" + string(event.data.scheduled_at)`}}})
	d.Session.Turns.On = append(d.Session.Turns.On, "hourly")
	c, err = action.Compile(d, nil)
	require.NoError(t, err)
	require.NotNil(t, c.Triggers[2].Start)
	require.NotNil(t, c.Triggers[3].ResumeID)
}

// A4 with A3's way of reporting: each mistake in a schedule trigger names
// its field.
func TestCompileScheduleTriggerRules_A4(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, code, field, message string
		edit                       func(d *action.Definition)
	}{
		{"event and schedule", fault.InvalidAction, "triggers[0].event", "exactly one of event and schedule", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "x"`
		}},
		{"cron and every", fault.InvalidAction, "triggers[0].schedule", "exactly one of cron and every", func(d *action.Definition) {
			d.Triggers[0].Schedule.Every = ptr("1h")
		}},
		{"neither cron nor every", fault.InvalidAction, "triggers[0].schedule", "exactly one of cron and every", func(d *action.Definition) {
			d.Triggers[0].Schedule = &action.TriggerSchedule{}
		}},
		{"a cron that never fires", fault.InvalidAction, "triggers[0].schedule.cron", "", func(d *action.Definition) {
			d.Triggers[0].Schedule.Cron = ptr("0 0 30 2 *")
		}},
		{"six cron fields", fault.InvalidAction, "triggers[0].schedule.cron", "", func(d *action.Definition) {
			d.Triggers[0].Schedule.Cron = ptr("0 0 2 * * *")
		}},
		{"an unknown zone", fault.InvalidAction, "triggers[0].schedule.timezone", "", func(d *action.Definition) {
			d.Triggers[0].Schedule.Timezone = ptr("Mars/Olympus")
		}},
		{"Local", fault.InvalidAction, "triggers[0].schedule.timezone", "", func(d *action.Definition) {
			d.Triggers[0].Schedule.Timezone = ptr("Local")
		}},
		{"timezone with every", fault.InvalidAction, "triggers[0].schedule.timezone", "only to a cron schedule", func(d *action.Definition) {
			d.Triggers[0].Schedule = &action.TriggerSchedule{Every: ptr("1m"), Timezone: ptr("UTC")}
		}},
		{"every under a second", fault.InvalidAction, "triggers[0].schedule.every", "at least 1s", func(d *action.Definition) {
			d.Triggers[0].Schedule = &action.TriggerSchedule{Every: ptr("500ms")}
		}},
		{"every over a year", fault.InvalidAction, "triggers[0].schedule.every", "at most", func(d *action.Definition) {
			d.Triggers[0].Schedule = &action.TriggerSchedule{Every: ptr("2000000h")}
		}},
		{"a role without a session block", fault.InvalidAction, "triggers[0].session", "only when the action has a session block", func(d *action.Definition) {
			d.Triggers[0].Session = &action.TriggerRole{Resume: &action.ResumeRole{ID: `"x"`}}
		}},
		{"an event trigger naming schedule.fired", fault.InvalidAction, "triggers[1].event", "give the trigger a schedule instead", func(d *action.Definition) {
			d.Triggers[1].Event = `event.type == "schedule.fired"`
		}},
		{"no event and no schedule", fault.InvalidExpression, "triggers[0].event", "an event predicate (event) or a schedule", func(d *action.Definition) {
			d.Triggers[0].Schedule = nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := scheduled()
			tc.edit(&d)
			_, err := action.Compile(d, nil)
			require.Error(t, err)
			var found []string
			for _, e := range action.Errors(err) {
				fe := fault.As(e)
				require.NotNil(t, fe)
				if fe.Code == tc.code && fe.Field == tc.field {
					require.Contains(t, fe.Message, tc.message)
					return
				}
				found = append(found, fe.Code+" "+fe.Field+": "+fe.Message)
			}
			t.Fatalf("no %s at %s; got %q", tc.code, tc.field, found)
		})
	}
}

package action_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

func ptr[T any](v T) *T { return &v }

// monitor is the definition of ../shared/examples/create_monitor.graphql.
func monitor() action.Definition {
	return action.Definition{
		Name: "early-fraud-detector", Kind: "agent.echo",
		Config: jsonvalue.Value(`{"agent_id":"monitor","sleep_ms":0}`),
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"account_id":"string(event.data.account_id)"}`)}}},
			{Name: "entry", Event: `event.type == "entry.inserted"`,
				Session: &action.TriggerRole{Resume: &action.ResumeRole{ID: "string(event.data.account_id)"}}},
		},
		Session: &action.SessionDef{
			InputSchema: jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string","format":"uuid"}},"required":["account_id"],"additionalProperties":false}`),
			ID:          "string(session.input.account_id)",
			Turns:       &action.Turns{On: []string{"entry"}, MaxInputs: ptr(100)},
		},
	}
}

func TestCompileMonitor_A1(t *testing.T) {
	t.Parallel()
	c, err := action.Compile(monitor(), nil)
	require.NoError(t, err)
	require.Len(t, c.Triggers, 2)
	require.Equal(t, []string{"account.inserted"}, c.Triggers[0].EventTypes)
	require.NotNil(t, c.Triggers[0].Start)
	require.NotNil(t, c.Triggers[1].ResumeID)
	require.True(t, c.Session.StartsTurn([]string{"entry"}))
	require.False(t, c.Session.StartsTurn([]string{"opened"}))
	require.Equal(t, 100, c.Session.MaxInputs)
}

// TestCompileRules_A3 checks each A3 rule is enforced with its code and field.
func TestCompileRules_A3(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(d *action.Definition)
		code  string
		field string
	}{
		{"trigger without role", func(d *action.Definition) { d.Triggers[1].Session = nil }, fault.InvalidAction, "triggers[1].session"},
		{"start and resume", func(d *action.Definition) {
			d.Triggers[1].Session.Start = &action.StartRole{Input: jsonvalue.Value(`{"account_id":"'x'"}`)}
		}, fault.InvalidAction, "triggers[1].session"},
		{"role without session block", func(d *action.Definition) { d.Session = nil }, fault.InvalidAction, "triggers[0].session"},
		{"start predicate reads session", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "a" && session.id == "x"`
		}, fault.InvalidAction, "triggers[0].event"},
		{"resume predicate selects every event", func(d *action.Definition) { d.Triggers[1].Event = `true` }, fault.InvalidAction, "triggers[1].event"},
		{"resume predicate on session only", func(d *action.Definition) { d.Triggers[1].Event = `session.id == "x"` }, fault.InvalidAction, "triggers[1].event"},
		{"session.state", func(d *action.Definition) {
			d.Triggers[1].Event = `event.type == "a" && session.state.x == 1`
		}, fault.InvalidAction, "triggers[1].event"},
		{"path not in closed schema", func(d *action.Definition) {
			d.Triggers[1].Event = `event.type == "a" && session.input.nope == "x"`
		}, fault.InvalidAction, "triggers[1].event"},
		{"mapping misses required", func(d *action.Definition) {
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{}`)
		}, fault.InvalidAction, "triggers[0].session.start.input"},
		{"mapping leaf not an expression", func(d *action.Definition) {
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": 12}`)
		}, fault.InvalidAction, "triggers[0].session.start.input.account_id"},
		{"no start trigger", func(d *action.Definition) { d.Triggers = d.Triggers[1:] }, fault.InvalidAction, "triggers"},
		{"turns.on unknown", func(d *action.Definition) { d.Session.Turns.On = []string{"nope"} }, fault.InvalidAction, "session.turns.on[0]"},
		{"maxInputs 0", func(d *action.Definition) { d.Session.Turns.MaxInputs = ptr(0) }, fault.BadInput, "session.turns.maxInputs"},
		{"schedule entry with cron and every", func(d *action.Definition) {
			d.Session.Schedule = []action.ScheduleEntry{{Name: "x", Cron: ptr("* * * * *"), Every: ptr("1h")}}
		}, fault.InvalidAction, "session.schedule[0]"},
		{"nine schedule entries", func(d *action.Definition) {
			for i := range 9 {
				d.Session.Schedule = append(d.Session.Schedule, action.ScheduleEntry{Name: string(rune('a' + i)), Every: ptr("1h")})
			}
		}, fault.InvalidAction, "session.schedule"},
		{"bad CEL", func(d *action.Definition) { d.Triggers[0].Event = `event.type ==` }, fault.InvalidExpression, "triggers[0].event"},
		{"predicate not bool", func(d *action.Definition) { d.Triggers[0].Event = `event.type` }, fault.InvalidExpression, "triggers[0].event"},
		{"duplicate trigger names", func(d *action.Definition) { d.Triggers[1].Name = "opened" }, fault.InvalidAction, "triggers[1].name"},
		{"bad schema", func(d *action.Definition) { d.Session.InputSchema = jsonvalue.Value(`{"type":12}`) }, fault.InvalidSchema, "session.inputSchema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := monitor()
			tc.edit(&d)
			_, err := action.Compile(d, nil)
			require.Error(t, err)
			var found []string
			for _, e := range action.Errors(err) {
				fe := fault.As(e)
				require.NotNil(t, fe, "every error is a *fault.Error: %v", e)
				if fe.Code == tc.code && fe.Field == tc.field {
					return
				}
				found = append(found, fe.Code+" "+fe.Field+": "+fe.Message)
			}
			t.Fatalf("no %s at %s; got %q", tc.code, tc.field, found)
		})
	}
}

func TestCompileReportsEveryViolation_A3(t *testing.T) {
	t.Parallel()
	d := monitor()
	d.Triggers[0].Event = `event.type ==`
	d.Triggers[1].Session = nil
	d.Session.Turns.On = []string{"nope"}
	_, err := action.Compile(d, nil)
	require.GreaterOrEqual(t, len(action.Errors(err)), 3)
}

// sessionless is an action without a session block (issue 15).
func sessionless() action.Definition {
	return action.Definition{Name: "on-entry", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "entry", Event: `event.type == "entry.inserted"`},
		{Name: "any", Event: `event.data.kind == "x"`},
	}}
}

// Issue 15: an action without a session block compiles its triggers and
// concurrency block, and A3 refuses what would read or need a session.
func TestCompileSessionless_A3(t *testing.T) {
	t.Parallel()
	d := sessionless()
	d.Concurrency = &action.ConcurrencyDef{Limit: 3, Key: ptr(`string(event.data.account)`)}
	c, err := action.Compile(d, nil)
	require.NoError(t, err)
	require.True(t, c.Sessionless())
	require.Nil(t, c.Session)
	require.Equal(t, []string{"entry.inserted"}, c.Triggers[0].EventTypes)
	require.Nil(t, c.Triggers[1].EventTypes, "pins no type: matched against every event")
	require.Equal(t, 3, c.Concurrency.Limit)
	require.NotNil(t, c.Concurrency.Key)

	cases := []struct {
		name, code, field, message string
		edit                       func(d *action.Definition)
	}{
		{"a start role", fault.InvalidAction, "triggers[0].session", "only when the action has a session block", func(d *action.Definition) {
			d.Triggers[0].Session = &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"a":"'x'"}`)}}
		}},
		{"a resume role", fault.InvalidAction, "triggers[1].session", "only when the action has a session block", func(d *action.Definition) {
			d.Triggers[1].Session = &action.TriggerRole{Resume: &action.ResumeRole{ID: `"x"`}}
		}},
		{"a predicate reads session", fault.InvalidAction, "triggers[0].event", "there is no session", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "entry.inserted" && session.input.a == "x"`
		}},
		{"a tool with a session", fault.InvalidAction, "tool.session", "needs the action's session block", func(d *action.Definition) {
			d.Tool = &action.ToolDef{Name: "t", Session: &action.ToolSessionDef{Start: &action.StartRole{Input: jsonvalue.Value(`{"a":"tool.input.a"}`)}}}
		}},
		{"a predicate matching no event", fault.InvalidAction, "triggers[0].event", "matches no event", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "a" && event.type == "b"`
		}},
		{"a key reading session", fault.InvalidAction, "concurrency.key", "there is no session", func(d *action.Definition) {
			d.Concurrency = &action.ConcurrencyDef{Limit: 1, Key: ptr(`session.id`)}
		}},
		{"a key that is not a string", fault.InvalidExpression, "concurrency.key", "string", func(d *action.Definition) {
			d.Concurrency = &action.ConcurrencyDef{Limit: 1, Key: ptr(`event.position`)}
		}},
		{"a limit of 0", fault.BadInput, "concurrency.limit", "1-1000", func(d *action.Definition) {
			d.Concurrency = &action.ConcurrencyDef{Limit: 0}
		}},
		{"a limit over the cap", fault.BadInput, "concurrency.limit", "1-1000", func(d *action.Definition) {
			d.Concurrency = &action.ConcurrencyDef{Limit: 1001}
		}},
		{"concurrency without triggers", fault.InvalidAction, "concurrency", "no triggers", func(d *action.Definition) {
			d.Triggers = nil
			d.Tool = &action.ToolDef{Name: "t"}
			d.Concurrency = &action.ConcurrencyDef{Limit: 1}
		}},
		{"no triggers and no tool", fault.InvalidAction, "triggers", "needs triggers", func(d *action.Definition) { d.Triggers = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := sessionless()
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
	// With a session block, a concurrency block is refused: turns already
	// run one at a time.
	m := monitor()
	m.Concurrency = &action.ConcurrencyDef{Limit: 1}
	_, err = action.Compile(m, nil)
	require.Equal(t, fault.InvalidAction, fault.CodeOf(err))
	require.Equal(t, "concurrency", fault.As(err).Field)
}

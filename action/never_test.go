package action_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// tool returns a tool-only action whose tool session maps tool.input.
func toolAction(schema string, mapping string) action.Definition {
	return action.Definition{
		Name: "lookup", Kind: "agent.echo",
		Session: &action.SessionDef{
			InputSchema: jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}`),
			ID:          "string(session.input.account_id)",
		},
		Tool: &action.ToolDef{Name: "lookup", InputSchema: jsonvalue.Value(schema),
			Session: &action.ToolSessionDef{Start: &action.StartRole{Input: jsonvalue.Value(mapping)}}},
	}
}

// TestCompileRefusesWhatCanNeverWork_Issue10 covers issue 10's "definitions
// that can never work": each is refused at create with a code and the field
// at fault, where it would otherwise be accepted and then fail on every
// event. (Already refused before issue 10, and tested in compile_test.go and
// clock_test.go: never-matching cron, unknown or Local timezone, every under
// a second, wrong expression output types, paths outside a closed schema,
// missing required mapping properties, maxInputs out of range.)
func TestCompileRefusesWhatCanNeverWork_Issue10(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, field, code, msg string
		def                    func() action.Definition
	}{
		{"start mapping of the wrong type", "triggers[0].session.start.input.account_id", fault.InvalidAction,
			"this value is always of type integer, but inputSchema allows only string for session.input.account_id",
			func() action.Definition {
				d := monitor()
				d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "size(event.data.account_id)"}`)
				return d
			}},
		{"start mapping object for a string", "triggers[0].session.start.input.account_id", fault.InvalidAction,
			"always of type object",
			func() action.Definition {
				d := monitor()
				d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": {"id": "string(event.data.account_id)"}}`)
				return d
			}},
		{"nested mapping of the wrong type", "triggers[0].session.start.input.account.id", fault.InvalidAction,
			"always of type boolean, but inputSchema allows only null or string for session.input.account.id",
			func() action.Definition {
				d := monitor()
				d.Session.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account":{"type":"object",
					"properties":{"id":{"type":["string","null"]}}}},"required":["account"]}`)
				d.Session.ID = "string(session.input.account.id)"
				d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account": {"id": "event.data.x == 1"}}`)
				return d
			}},
		{"tool mapping of the wrong type", "tool.session.start.input.account_id", fault.InvalidAction,
			"always of type array",
			func() action.Definition { return toolAction(`{"type":"object"}`, `{"account_id": "[tool.input.a]"}`) }},
		{"predicate pins no common type", "triggers[0].event", fault.InvalidAction,
			"this predicate matches no event: its conjuncts require different event types",
			func() action.Definition {
				d := monitor()
				d.Triggers[0].Event = `event.type == "account.inserted" && event.type in ["entry.inserted", "x"]`
				return d
			}},
		{"predicate pins an impossible type", "triggers[1].event", fault.InvalidAction,
			`"Entry Inserted" is not an event type`,
			func() action.Definition {
				d := monitor()
				d.Triggers[1].Event = `event.type == "Entry Inserted"`
				return d
			}},
		{"session inputSchema no input satisfies", "session.inputSchema", fault.InvalidSchema,
			`no input can satisfy inputSchema: required property "account_id" can only be a string, and none satisfies both its lower bound 40 and its upper bound 36`,
			func() action.Definition {
				d := monitor()
				d.Session.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string","minLength":40,"maxLength":36}},
					"required":["account_id"],"additionalProperties":false}`)
				return d
			}},
		{"tool inputSchema no input satisfies", "tool.inputSchema", fault.InvalidSchema,
			`required property "a" is not allowed`,
			func() action.Definition {
				return toolAction(`{"type":"object","required":["a"],"additionalProperties":false}`, `{"account_id": "'x'"}`)
			}},
		{"predicate whose cost grows with the square of the event", "triggers[0].event", fault.InvalidExpression,
			"grows faster than the data",
			func() action.Definition {
				d := monitor()
				d.Triggers[0].Event = `event.data.s.replace("", event.data.s).size() > 0`
				return d
			}},
		{"predicate over the cost limit on every event", "triggers[0].event", fault.InvalidExpression,
			"every evaluation of this expression costs at least",
			func() action.Definition {
				d := monitor()
				d.Triggers[0].Event = `[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, ` +
					`[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, a+b+c+d+e))))).size() > 0`
				return d
			}},
		{"every of zero", "session.schedule[0].every", fault.InvalidAction, "at least 1s",
			func() action.Definition {
				d := monitor()
				d.Session.Schedule = []action.ScheduleEntry{{Name: "tick", Every: ptr("0s")}}
				return d
			}},
		{"negative every", "session.schedule[0].every", fault.InvalidAction, "at least 1s",
			func() action.Definition {
				d := monitor()
				d.Session.Schedule = []action.ScheduleEntry{{Name: "tick", Every: ptr("-1h")}}
				return d
			}},
		{"maxBytes 0", "session.turns.maxBytes", fault.BadInput, "maxBytes is 1-",
			func() action.Definition {
				d := monitor()
				d.Session.Turns.MaxBytes = ptr(0)
				return d
			}},
		{"maxBytes over the cap", "session.turns.maxBytes", fault.BadInput, "maxBytes is 1-",
			func() action.Definition {
				d := monitor()
				d.Session.Turns.MaxBytes = ptr(action.MaxBytesCap + 1)
				return d
			}},
		{"maxInputs over the cap", "session.turns.maxInputs", fault.BadInput, "maxInputs is 1-1000",
			func() action.Definition {
				d := monitor()
				d.Session.Turns.MaxInputs = ptr(action.MaxInputsCap + 1)
				return d
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := action.Compile(tc.def(), nil)
			require.Error(t, err)
			var found []string
			for _, e := range action.Errors(err) {
				fe := fault.As(e)
				require.NotNil(t, fe)
				if fe.Code == tc.code && fe.Field == tc.field {
					require.Contains(t, fe.Message, tc.msg)
					return
				}
				found = append(found, fe.Code+" "+fe.Field+": "+fe.Message)
			}
			t.Fatalf("no %s at %s; got %q", tc.code, tc.field, found)
		})
	}
}

// TestCompileAcceptsWhatCanWork_Issue10: near misses of the refusals above
// that some event or input satisfies are accepted.
func TestCompileAcceptsWhatCanWork_Issue10(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(d *action.Definition)
	}{
		{"mapping of type dyn", func(d *action.Definition) {
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "event.data.account_id"}`)
		}},
		{"double for an integer property", func(d *action.Definition) {
			d.Session.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"},"n":{"type":"integer"}},"required":["account_id"]}`)
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "string(event.data.account_id)", "n": "double(event.data.n) * 2.0"}`)
		}},
		{"integer for a number property", func(d *action.Definition) {
			d.Session.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"},"n":{"type":"number"}},"required":["account_id"]}`)
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "string(event.data.account_id)", "n": "size(event.data.items)"}`)
		}},
		{"timestamp for a string property", func(d *action.Definition) {
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "event.commit_time"}`)
		}},
		{"pinned types that intersect", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type in ["account.inserted", "x"] && event.type == "account.inserted"`
		}},
		{"reserved but written types", func(d *action.Definition) {
			d.Triggers[1].Event = `event.type in ["entry.updated", "action_session.responded"]`
		}},
		{"bounds that leave one value", func(d *action.Definition) {
			d.Session.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string","minLength":36,"maxLength":36}},"required":["account_id"]}`)
		}},
		{"every of a second", func(d *action.Definition) {
			d.Session.Schedule = []action.ScheduleEntry{{Name: "tick", Every: ptr("1s")}}
		}},
		{"a request over MCP, which triggers see", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "action_session.requested"`
		}},
		{"a constant part an event may skip", func(d *action.Definition) {
			d.Triggers[0].Event = `event.type == "account.inserted" && (event.data.ok == true || 1 / 0 == 1)`
			d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "event.data.ok == true ? string(event.data.account_id) : string([1][2])"}`)
		}},
		{"an end a moment after the start", func(d *action.Definition) {
			d.Session.Ends = ptr("session.started_at + duration('1ms')")
		}},
		{"an end from the input", func(d *action.Definition) {
			d.Session.Ends = ptr("session.started_at - duration('1h') + duration(string(session.input.account_id))")
		}},
		{"a constant end (its passing needs the store's clock)", func(d *action.Definition) {
			d.Session.Ends = ptr("timestamp('2001-01-01T00:00:00Z')")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := monitor()
			tc.edit(&d)
			_, err := action.Compile(d, nil)
			require.NoError(t, err)
		})
	}
}

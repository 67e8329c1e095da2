package server_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

const createActionOp = `mutation($id: UUID!, $input: ActionInput!) { actions {
  createAction(id: $id, input: $input) { actionId version createdAt definition { name } } } }`

// monitorDef returns a fresh copy of the seed's monitor definition (a valid
// action) as a GraphQL variable, for cases to break one rule at a time.
func monitorDef() map[string]any {
	return map[string]any{
		"name":   "early-fraud-detector",
		"kind":   "agent.echo",
		"config": map[string]any{"agent_id": "monitor", "sleep_ms": 0},
		"triggers": []any{
			map[string]any{
				"name":    "opened",
				"event":   `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}},
			},
			map[string]any{
				"name":    "entry",
				"event":   `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}},
			},
		},
		"session": map[string]any{
			"inputSchema": map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"account_id": map[string]any{"type": "string", "format": "uuid"}},
				"required":             []any{"account_id"},
				"additionalProperties": false,
			},
			"id":    "string(session.input.account_id)",
			"turns": map[string]any{"on": []any{"entry"}, "maxInputs": 100},
		},
	}
}

func trigger(def map[string]any, i int) map[string]any {
	return def["triggers"].([]any)[i].(map[string]any)
}

func sessionBlock(def map[string]any) map[string]any { return def["session"].(map[string]any) }

func turnsBlock(def map[string]any) map[string]any {
	return sessionBlock(def)["turns"].(map[string]any)
}

// want is one error a case expects: its code and extensions.field.
type want struct{ code, field string }

// TestCreateActionRejectsA3Violations breaks each rule of A3 (and the
// kind, config and schema checks of A1) in an otherwise valid definition:
// each gives its stable code naming the field, and nothing is stored.
func TestCreateActionRejectsA3Violations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nineEntries := make([]any, 9)
	for i := range nineEntries {
		nineEntries[i] = map[string]any{"name": fmt.Sprintf("e%d", i), "every": "1h"}
	}
	cases := []struct {
		name      string
		breakRule func(d map[string]any)
		want      []want
	}{
		{"trigger without a role when there is a session block", func(d map[string]any) {
			delete(trigger(d, 1), "session")
		}, []want{{"INVALID_ACTION", "input.triggers[1].session"}}},
		{"trigger with both start and resume", func(d map[string]any) {
			trigger(d, 0)["session"].(map[string]any)["resume"] = map[string]any{"id": "string(event.data.account_id)"}
		}, []want{{"INVALID_ACTION", "input.triggers[0].session"}}},
		{"role without a session block", func(d map[string]any) {
			delete(d, "session")
		}, []want{{"INVALID_ACTION", "input.triggers[0].session"}, {"INVALID_ACTION", "input.triggers[1].session"}}},
		{"start predicate reads session", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "account.inserted" && session.id == "x"`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"start mapping reads session", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "session.id"}}}
		}, []want{{"INVALID_ACTION", "input.triggers[0].session.start.input.account_id"}}},
		{"resume predicate selects every event", func(d map[string]any) {
			trigger(d, 1)["event"] = "true"
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"resume predicate constrains only the session", func(d map[string]any) {
			trigger(d, 1)["event"] = `session.id == "x"`
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"session.state is read", func(d map[string]any) {
			trigger(d, 1)["event"] = `event.type == "entry.inserted" && session.state.count > 1`
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"path into session.input outside a closed inputSchema", func(d map[string]any) {
			trigger(d, 1)["event"] = `event.type == "entry.inserted" && session.input.owner == "x"`
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"session id reads a path outside a closed inputSchema", func(d map[string]any) {
			sessionBlock(d)["id"] = "string(session.input.owner)"
		}, []want{{"INVALID_ACTION", "input.session.id"}}},
		{"start mapping misses a required property", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{}}}
		}, []want{{"INVALID_ACTION", "input.triggers[0].session.start.input"}}},
		{"no start trigger", func(d map[string]any) {
			d["triggers"] = d["triggers"].([]any)[1:]
		}, []want{{"INVALID_ACTION", "input.triggers"}}},
		{"turns.on names an unknown trigger", func(d map[string]any) {
			turnsBlock(d)["on"] = []any{"entry", "nope"}
		}, []want{{"INVALID_ACTION", "input.session.turns.on[1]"}}},
		{"maxInputs 0", func(d map[string]any) {
			turnsBlock(d)["maxInputs"] = 0
		}, []want{{"BAD_USER_INPUT", "input.session.turns.maxInputs"}}},
		{"maxInputs 5000", func(d map[string]any) {
			turnsBlock(d)["maxInputs"] = 5000
		}, []want{{"BAD_USER_INPUT", "input.session.turns.maxInputs"}}},
		{"schedule with 9 entries", func(d map[string]any) {
			sessionBlock(d)["schedule"] = nineEntries
		}, []want{{"INVALID_ACTION", "input.session.schedule"}}},
		{"schedule entry with cron and every", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "both", "cron": "0 9 * * *", "every": "1h"}}
		}, []want{{"INVALID_ACTION", "input.session.schedule[0]"}}},
		{"bad CEL syntax", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == `
		}, []want{{"INVALID_EXPRESSION", "input.triggers[0].event"}}},
		{"predicate returns a string", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type`
		}, []want{{"INVALID_EXPRESSION", "input.triggers[0].event"}}},
		{"unknown kind", func(d map[string]any) {
			d["kind"] = "agent.unknown"
		}, []want{{"UNKNOWN_KIND", "input.kind"}}},
		{"echo config with negative sleep_ms", func(d map[string]any) {
			d["config"] = map[string]any{"sleep_ms": -1}
		}, []want{{"INVALID_CONFIG", "input.config.sleep_ms"}}},
		{"echo config with an unknown key", func(d map[string]any) {
			d["config"] = map[string]any{"agent_id": "m", "colour": "red"}
		}, []want{{"INVALID_CONFIG", "input.config"}}},
		{"invalid inputSchema", func(d map[string]any) {
			sessionBlock(d)["inputSchema"] = map[string]any{"type": 12}
		}, []want{{"INVALID_SCHEMA", "input.session.inputSchema"}}},
		// Issue 10: definitions that can never work.
		{"start mapping that is never of the property's type", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "size(event.data.account_id)"}}}
		}, []want{{"INVALID_ACTION", "input.triggers[0].session.start.input.account_id"}}},
		{"predicate that pins no common event type", func(d map[string]any) {
			trigger(d, 1)["event"] = `event.type == "entry.inserted" && event.type == "entry.updated"`
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"inputSchema no input satisfies", func(d map[string]any) {
			sessionBlock(d)["inputSchema"].(map[string]any)["required"] = []any{"account_id", "owner"}
		}, []want{{"INVALID_SCHEMA", "input.session.inputSchema"}}},
		{"predicate whose cost grows with the square of the event", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "account.inserted" && event.data.items.all(a, event.data.items.exists(b, a == b))`
		}, []want{{"INVALID_EXPRESSION", "input.triggers[0].event"}}},
		{"predicate false whatever the event", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "account.inserted" && ["a"].exists(x, x == "b")`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"predicate that fails whatever the event", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "account.inserted" && 1 / 0 == 1`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"predicate on schedule.fired, which no trigger sees", func(d map[string]any) {
			trigger(d, 1)["event"] = `event.type == "schedule.fired"`
		}, []want{{"INVALID_ACTION", "input.triggers[1].event"}}},
		{"predicate on a type the service never writes", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type in ["action_session.started", "account.deleted"]`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"start mapping that fails whatever the event", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(1 / 0)"}}}
		}, []want{{"INVALID_EXPRESSION", "input.triggers[0].session.start.input.account_id"}}},
		{"resume id that fails whatever the event", func(d map[string]any) {
			trigger(d, 1)["session"] = map[string]any{"resume": map[string]any{"id": `["a", "b"][2]`}}
		}, []want{{"INVALID_EXPRESSION", "input.triggers[1].session.resume.id"}}},
		{"required property whose const has another type", func(d map[string]any) {
			sessionBlock(d)["inputSchema"].(map[string]any)["properties"].(map[string]any)["account_id"].(map[string]any)["const"] = 7
		}, []want{{"INVALID_SCHEMA", "input.session.inputSchema"}}},
		{"a tool with turns whose source has no turn()", func(d map[string]any) {
			d["kind"], d["config"] = "starlark", nil
			d["source"] = "def call(event):\n    return 1\n"
			d["tool"] = map[string]any{"name": "lookup"}
		}, []want{{"INVALID_ACTION", "input.source"}}},
		{"predicate with a part every event runs that fails", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "account.inserted" && event.data.n == [1][3]`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"start mapping with a part every event runs that fails", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id) + string([1][3])"}}}
		}, []want{{"INVALID_EXPRESSION", "input.triggers[0].session.start.input.account_id"}}},
		{"ends that can never be a timestamp", func(d map[string]any) {
			sessionBlock(d)["ends"] = "session.started_at + duration(string(1 / 0))"
		}, []want{{"INVALID_EXPRESSION", "input.session.ends"}}},
		{"ends before the start", func(d map[string]any) {
			sessionBlock(d)["ends"] = "session.started_at - duration('1h')"
		}, []want{{"INVALID_ACTION", "input.session.ends"}}},
		{"ends at the start", func(d map[string]any) {
			sessionBlock(d)["ends"] = "duration('0s') + session.started_at"
		}, []want{{"INVALID_ACTION", "input.session.ends"}}},
		{"ends a constant instant that has passed", func(d map[string]any) {
			sessionBlock(d)["ends"] = "timestamp('2001-01-01T00:00:00Z')"
		}, []want{{"INVALID_ACTION", "input.session.ends"}}},
		{"clock cron that never fires (31 February)", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "never", "cron": "0 0 31 2 *"}}
		}, []want{{"INVALID_ACTION", "input.session.schedule[0].cron"}}},
		{"clock every of zero", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "spin", "every": "0s"}}
		}, []want{{"INVALID_ACTION", "input.session.schedule[0].every"}}},
		{"tool arguments schema nothing satisfies", func(d map[string]any) {
			d["triggers"], d["session"] = []any{}, nil
			d["tool"] = map[string]any{"name": "lookup", "inputSchema": map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 5, "maximum": 1}}, "required": []any{"n"}}}
		}, []want{{"INVALID_SCHEMA", "input.tool.inputSchema"}}},
		{"MCP arguments schema nothing satisfies", func(d map[string]any) {
			d["mcp"] = map[string]any{"inputSchema": map[string]any{
				"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string", "minLength": 3, "maxLength": 2}}, "required": []any{"message"}},
				"session": map[string]any{"resume": map[string]any{"id": "string(request.arguments.message)"}}}
		}, []want{{"INVALID_SCHEMA", "input.mcp.inputSchema"}}},
		{"MCP resume id that fails whatever the request", func(d map[string]any) {
			d["mcp"] = map[string]any{"session": map[string]any{"resume": map[string]any{"id": `string(request.arguments.message) + ["a"][1]`}}}
		}, []want{{"INVALID_EXPRESSION", "input.mcp.session.resume.id"}}},
		{"maxBytes 0", func(d map[string]any) {
			turnsBlock(d)["maxBytes"] = 0
		}, []want{{"BAD_USER_INPUT", "input.session.turns.maxBytes"}}},
		// Text PostgreSQL cannot store is refused before anything is written (HARD-PARTS 7).
		{"NUL in the name", func(d map[string]any) {
			d["name"] = "early\x00fraud"
		}, []want{{"BAD_USER_INPUT", "input.name"}}},
		{"NUL in a predicate's string literal", func(d map[string]any) {
			trigger(d, 0)["event"] = "event.type == \"account\x00inserted\""
		}, []want{{"BAD_USER_INPUT", "input.triggers[0].event"}}},
		{"NUL in a start mapping", func(d map[string]any) {
			trigger(d, 0)["session"] = map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "'\x00'"}}}
		}, []want{{"INVALID_JSON", "input.triggers[0].session.start.input"}}},
		{"NUL in the inputSchema", func(d map[string]any) {
			sessionBlock(d)["inputSchema"].(map[string]any)["description"] = "a\x00b"
		}, []want{{"INVALID_JSON", "input.session.inputSchema"}}},
		{"several violations at once", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type ==`
			delete(trigger(d, 1), "session")
			turnsBlock(d)["maxInputs"] = 0
			d["kind"] = "agent.unknown"
		}, []want{
			{"INVALID_EXPRESSION", "input.triggers[0].event"},
			{"INVALID_ACTION", "input.triggers[1].session"},
			{"BAD_USER_INPUT", "input.session.turns.maxInputs"},
			{"UNKNOWN_KIND", "input.kind"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def := monitorDef()
			tc.breakRule(def)
			id := uuid.NewString()
			r := e.do(t, createActionOp, map[string]any{"id": id, "input": def})
			require.JSONEq(t, `{"actions":{"createAction":null}}`, string(r.Data), "no partial data")
			for _, w := range tc.want {
				requireError(t, r, w.code, w.field)
			}
			require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM actions WHERE id = $1`, id))
			require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM action_versions WHERE action_id = $1`, id))
			e.requireAlive(t)
		})
	}
}

// TestCreateActionIdempotence: the same id and definition returns the
// stored version; a different definition fails with ACTION_EXISTS (A1).
func TestCreateActionIdempotence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := uuid.NewString()
	type created struct {
		Actions struct {
			CreateAction struct {
				ActionID, CreatedAt string
				Version             json.Number
				Definition          struct{ Name string }
			}
		}
	}
	var first, again created
	e.ok(t, createActionOp, map[string]any{"id": id, "input": monitorDef()}, &first)
	e.ok(t, createActionOp, map[string]any{"id": id, "input": monitorDef()}, &again)
	require.Equal(t, first, again)
	require.Equal(t, json.Number("1"), first.Actions.CreateAction.Version)

	changed := monitorDef()
	changed["name"] = "renamed"
	r := e.do(t, createActionOp, map[string]any{"id": id, "input": changed})
	requireError(t, r, "ACTION_EXISTS", "id")
	var def struct {
		Actions struct {
			Action struct {
				Version    json.Number
				Definition struct{ Name string }
			}
		}
	}
	e.ok(t, `query($id: UUID!) { actions { action(id: $id) { version definition { name } } } }`, map[string]any{"id": id}, &def)
	require.Equal(t, json.Number("1"), def.Actions.Action.Version)
	require.Equal(t, "early-fraud-detector", def.Actions.Action.Definition.Name)
}

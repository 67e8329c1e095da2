package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// big is an integer beyond float64's exact range (2^53) that still fits int64.
const big = "9007199254740993123"

// bigAction is an action whose start trigger matches big.inserted events
// whose data.n equals n exactly, keeping n as the session input.
func bigAction(n string) map[string]any {
	return map[string]any{
		"name": "big-" + n,
		"kind": "agent.echo",
		"triggers": []any{map[string]any{
			"name":    "big",
			"event":   `event.type == "big.inserted" && event.data.n == ` + n,
			"session": map[string]any{"start": map[string]any{"input": map[string]any{"n": "event.data.n"}}},
		}},
		"session": map[string]any{"id": "string(session.input.n)"},
	}
}

// TestLargeIntegersStayExact sends a number float64 cannot hold as a JSON
// variable and finds it unchanged in putValue's answer, ledger.value,
// events.data, a session input, and in trigger predicates, which compare
// it exactly (HARD-PARTS 6; L2, L4, A1).
func TestLargeIntegersStayExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	match, miss := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": match, "input": bigAction(big)}, nil)
	e.ok(t, createActionOp, map[string]any{"id": miss, "input": bigAction("9007199254740993124")}, nil)

	value := json.RawMessage(`{"n": ` + big + `}`)
	kv := e.put(t, "big", "k", value, "")
	jsonEq(t, string(value), kv.Value)
	jsonEq(t, string(value), kv.Event.Data)

	var read struct {
		Ledger struct {
			Value  struct{ Value json.RawMessage }
			Events struct {
				Nodes []struct{ Data json.RawMessage }
			}
		}
	}
	e.ok(t, `{ ledger { value(namespace: "big", key: "k") { value }
	    events(type: "big.inserted") { nodes { data } } } }`, nil, &read)
	jsonEq(t, string(value), read.Ledger.Value.Value)
	require.Len(t, read.Ledger.Events.Nodes, 1)
	jsonEq(t, string(value), read.Ledger.Events.Nodes[0].Data)

	const sessionOp = `query($a: UUID!, $id: String!) { actions { action(id: $a) {
	    session(id: $id) { input status } sessions { nodes { id } } triggerDiagnostics { count } } } }`
	type found struct {
		Actions struct {
			Action struct {
				Session *struct {
					Input  json.RawMessage
					Status string
				}
				Sessions           struct{ Nodes []any }
				TriggerDiagnostics []any
			}
		}
	}
	var hit found
	poll(t, "the session of the matching action", func() bool {
		e.ok(t, sessionOp, map[string]any{"a": match, "id": big}, &hit)
		return hit.Actions.Action.Session != nil
	})
	jsonEq(t, string(value), hit.Actions.Action.Session.Input)
	require.Equal(t, "OPEN", hit.Actions.Action.Session.Status)

	// One dispatch transaction evaluates an event against every action, so
	// the other action has seen the event by now.
	var other found
	e.ok(t, sessionOp, map[string]any{"a": miss, "id": big}, &other)
	require.Nil(t, other.Actions.Action.Session)
	require.Empty(t, other.Actions.Action.Sessions.Nodes, "a predicate one off must not match")
	require.Empty(t, other.Actions.Action.TriggerDiagnostics)
}

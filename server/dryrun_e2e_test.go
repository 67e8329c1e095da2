package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

const dryRunOp = `query($a: UUID!, $input: ActionInput!, $from: String!, $to: String, $limit: Int, $turns: Int) { actions {
  dryRun(actionId: $a, input: $input, from: $from, to: $to, limit: $limit, turns: $turns) {
    turns { sessionId inputs status output error state sessionStatus }
    from to reached events complete sessionCount executions tookMs
    triggers { trigger matched started delivered intakeRecords executions }
    sessions { id input startedAt inputs origin { eventType } }
    intakeCounts { reason count }
    intakeRecords { trigger reason sessionId event { eventType } }
    diagnostics { trigger count lastMessage }
  } } }`

type dryRunOut struct {
	Actions struct {
		DryRun struct {
			From, To, Reached string
			Events            int
			Complete          bool
			SessionCount      int
			Executions        int
			Triggers          []struct {
				Trigger                                                string
				Matched, Started, Delivered, IntakeRecords, Executions int
			}
			Sessions []struct {
				ID     string
				Inputs int
				Origin struct{ EventType string }
			}
			IntakeCounts []struct {
				Reason string
				Count  int
			}
			Diagnostics []struct {
				Trigger string
				Count   int
			}
			Turns []struct {
				SessionID     string
				Inputs        int
				Status        string
				Output        json.RawMessage
				SessionStatus *string
			}
		}
	}
}

// Issue 15 over GraphQL: a dry run says what a proposed definition would
// have done over the ledger (sessions started and resumed, intake records
// and why, per trigger), by the dispatcher's rules, and stores nothing.
func TestDryRunEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a1, a2 := uuid.NewString(), uuid.NewString()
	e.put(t, "account", a1, map[string]any{"account_id": a1}, "")
	e.put(t, "account", a2, map[string]any{"account_id": a2}, "")
	for i := range 5 {
		e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": a1, "amount": i}, "")
	}
	e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": "nobody", "amount": 9}, "")
	e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": a2, "amount": "not a number"}, "")
	before := e.countRows(t, `SELECT count(*) FROM sessions`) + e.countRows(t, `SELECT count(*) FROM actions`)

	var input map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
	  "name": "monitor", "kind": "agent.echo",
	  "triggers": [
	    {"name": "opened", "event": "event.type == \"account.inserted\"", "session": {"start": {"input": {"account_id": "string(event.data.account_id)"}}}},
	    {"name": "big", "event": "event.type == \"entry.inserted\" && event.data.amount >= 2", "session": {"resume": {"id": "string(event.data.account_id)"}}}
	  ],
	  "session": {"id": "string(session.input.account_id)"}
	}`), &input))
	id := uuid.NewString()
	var out dryRunOut
	e.ok(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "1"}, &out)
	d := out.Actions.DryRun
	require.Equal(t, "1", d.From)
	require.Equal(t, "9", d.To)
	require.True(t, d.Complete)
	require.Equal(t, 9, d.Events)
	require.Equal(t, 2, d.SessionCount)
	require.Len(t, d.Sessions, 2)
	require.Equal(t, "account.inserted", d.Sessions[0].Origin.EventType)
	require.Equal(t, 3, d.Sessions[0].Inputs, "amounts 2, 3 and 4")
	require.Equal(t, 2, d.Triggers[0].Started)
	require.Equal(t, 4, d.Triggers[1].Matched, "2, 3, 4 and nobody's 9")
	require.Equal(t, 3, d.Triggers[1].Delivered)
	require.Equal(t, 1, d.Triggers[1].IntakeRecords)
	require.Equal(t, "session_not_found", d.IntakeCounts[0].Reason)
	require.Len(t, d.Diagnostics, 1, "the string amount failed to compare")
	require.Equal(t, "big", d.Diagnostics[0].Trigger)
	require.Equal(t, before, e.countRows(t, `SELECT count(*) FROM sessions`)+e.countRows(t, `SELECT count(*) FROM actions`), "nothing stored")
	require.Empty(t, d.Turns, "no turns unless asked")

	// The first turns of the first sessions, on the inputs they would have.
	e.ok(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "1", "turns": 5}, &out)
	d = out.Actions.DryRun
	require.Len(t, d.Turns, 1, "a2's session has no input: it would run no turn")
	require.Equal(t, a1, d.Turns[0].SessionID)
	require.Equal(t, 3, d.Turns[0].Inputs)
	require.Equal(t, "SUCCEEDED", d.Turns[0].Status)
	require.NotEmpty(t, d.Turns[0].Output)
	require.Zero(t, e.countRows(t, `SELECT count(*) FROM executions`), "nothing of the turns stored")
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "1", "turns": 21}), "BAD_USER_INPUT", "turns")

	// A limit cuts the range short and says so; a range names its end.
	e.ok(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "3", "to": "8", "limit": 2}, &out)
	d = out.Actions.DryRun
	require.False(t, d.Complete)
	require.Equal(t, "4", d.Reached)
	require.Equal(t, 2, d.Events)

	// A sessionless definition counts executions.
	e.ok(t, dryRunOp, map[string]any{"a": id, "input": map[string]any{"name": "x", "kind": "agent.echo",
		"triggers": []any{map[string]any{"name": "entries", "event": `event.type == "entry.inserted"`}}}, "from": "1"}, &out)
	require.Equal(t, 7, out.Actions.DryRun.Executions)

	// Bad input names the field; a bad definition is refused as createAction refuses it.
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "x"}), "BAD_USER_INPUT", "from")
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "0"}), "BAD_USER_INPUT", "from")
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "5", "to": "2"}), "BAD_USER_INPUT", "to")
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": input, "from": "1", "limit": 0}), "BAD_USER_INPUT", "limit")
	requireError(t, e.do(t, dryRunOp, map[string]any{"a": id, "input": map[string]any{"name": "x", "kind": "agent.echo",
		"triggers": []any{map[string]any{"name": "t", "event": "event.type =="}}}, "from": "1"}), "INVALID_EXPRESSION", "input.triggers[0].event")
}

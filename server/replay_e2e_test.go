package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// T9 over GraphQL: an agent's turn is replayed with its recorded model
// replies and with live ones, and the replay reads as an execution of its
// own whose turn is the original's, with its transcript and a diff.
func TestReplayExecutionEndToEnd_T9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := uuid.NewString()
	e.ok(t, `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`, map[string]any{"id": id,
		"input": map[string]any{
			"name": "triage", "kind": "agent",
			"config": map[string]any{"provider": "scripted", "system": "You triage.", "script": []any{
				map[string]any{"step": 0, "text": "Looks fine.", "toolCalls": []any{map[string]any{"name": "report_outcome",
					"input": map[string]any{"status": "OPEN", "state": map[string]any{"seen": 1}}}}},
			}},
			"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "ticket.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
				map[string]any{"name": "note", "event": `event.type == "note.inserted"`,
					"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}}},
			"session": map[string]any{"id": "string(session.input.id)"},
		}}, nil)
	e.put(t, "ticket", "t1", map[string]any{"id": "t1"}, "")
	e.put(t, "note", "n1", map[string]any{"id": "t1", "text": "printer on fire"}, "")
	var turn struct {
		Actions struct {
			Action struct {
				Session *struct {
					Turns struct {
						Nodes []struct {
							Status    string
							Execution struct{ ID string }
						}
					}
				}
			}
		}
	}
	poll(t, "the first turn", func() bool {
		e.ok(t, `query($id: UUID!) { actions { action(id: $id) { session(id: "t1") { turns { nodes { status execution { id } } } } } } }`,
			map[string]any{"id": id}, &turn)
		s := turn.Actions.Action.Session
		return s != nil && len(s.Turns.Nodes) == 1 && s.Turns.Nodes[0].Status == "COMPLETED"
	})
	orig := turn.Actions.Action.Session.Turns.Nodes[0].Execution.ID

	const replayOp = `mutation($a: UUID!, $id: UUID!, $p: ReplayProvider) { actions { replayExecution(actionId: $a, id: $id, provider: $p) {
	  id status turn { number } invocation { output transcript { nodes { kind } } }
	  replay { of { id } provider by outcome original diff { op path original replay } }
	} } }`
	type replayed struct {
		Actions struct {
			ReplayExecution struct {
				ID, Status string
				Turn       struct{ Number int }
				Invocation struct {
					Output     json.RawMessage
					Transcript struct{ Nodes []struct{ Kind string } }
				}
				Replay struct {
					Of                struct{ ID string }
					Provider          string
					By                *string
					Outcome, Original json.RawMessage
					Diff              []struct{ Op, Path string }
				}
			}
		}
	}
	for _, p := range []string{"RECORDED", "LIVE"} {
		var out replayed
		e.ok(t, replayOp, map[string]any{"a": id, "id": orig, "p": p}, &out)
		r := out.Actions.ReplayExecution
		require.Equal(t, "SUCCEEDED", r.Status, p)
		require.Equal(t, 1, r.Turn.Number)
		require.Equal(t, orig, r.Replay.Of.ID)
		require.Equal(t, p, r.Replay.Provider)
		require.Empty(t, r.Replay.Diff, "%s: the same outcome", p)
		require.NotEmpty(t, r.Invocation.Output)
		jsonEq(t, string(r.Replay.Original), r.Replay.Outcome)
		kinds := map[string]bool{}
		for _, n := range r.Invocation.Transcript.Nodes {
			kinds[n.Kind] = true
		}
		require.True(t, kinds["model_message"], "its transcript: %v", kinds)
	}
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM session_turns`), "no turn was added")

	// The replays are read back from the original.
	var back struct {
		Actions struct {
			Action struct {
				Execution struct {
					Replays []struct {
						Status string
						Replay struct{ Provider string }
					}
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!, $id: UUID!) { actions { action(id: $a) { execution(id: $id) { replays { status replay { provider } } } } } }`,
		map[string]any{"a": id, "id": orig}, &back)
	require.Len(t, back.Actions.Action.Execution.Replays, 2)
	providers := map[string]bool{}
	for _, r := range back.Actions.Action.Execution.Replays {
		providers[r.Replay.Provider] = true
	}
	require.Equal(t, map[string]bool{"RECORDED": true, "LIVE": true}, providers)

	requireError(t, e.do(t, replayOp, map[string]any{"a": id, "id": uuid.NewString()}), "NOT_FOUND", "id")
}

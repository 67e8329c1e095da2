package server_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// failingNoteSource fails its turn (scope TURN) while a note says "fail" and none
// says "fixed".
const failingNoteSource = `
def turn(event):
    texts = [i["event"]["data"].get("text", "") for i in event["inputs"] if i.get("event")]
    if "fail" in texts and "fixed" not in texts:
        return {"status": "FAILED", "scope": "TURN", "reason": "a note says fail"}
    return {"status": "OPEN", "state": {"seen": len(texts)}}
`

// G10, G4 over GraphQL: a Starlark turn that fails with scope TURN leaves
// its session WAITING (turn failureScope TURN); resumeSession runs it
// again; a new note wakes it; the park block reads back as written.
func TestTurnScopedFailureAndResumeEndToEnd_G10(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := uuid.NewString()
	var created struct {
		Actions struct {
			CreateAction struct {
				Definition struct {
					Session struct {
						Park struct {
							TTL         string
							ResumeAfter *string
							ResumeOn    []string
						}
					}
				}
			}
		}
	}
	e.ok(t, `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) {
		definition { session { park { ttl resumeAfter resumeOn } } } } } }`, map[string]any{"id": id,
		"input": map[string]any{
			"name": "notes", "kind": "starlark", "source": failingNoteSource,
			"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "ticket.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
				map[string]any{"name": "note", "event": `event.type == "note.inserted"`,
					"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}}},
			"session": map[string]any{"id": "string(session.input.id)",
				"park": map[string]any{"ttl": "24h", "resumeAfter": "15m", "resumeOn": []any{"note"}}},
		}}, &created)
	p := created.Actions.CreateAction.Definition.Session.Park
	require.Equal(t, "24h", p.TTL)
	require.Equal(t, "15m", *p.ResumeAfter)
	require.Equal(t, []string{"note"}, p.ResumeOn)

	e.put(t, "ticket", "t1", map[string]any{"id": "t1"}, "")
	const resume = `mutation($a: UUID!) { actions { resumeSession(actionId: $a, id: "t1") { status reason } } }`
	poll(t, "the session", func() bool { return e.querySession(t, id, "t1") != nil })
	r := e.do(t, resume, map[string]any{"a": id})
	require.Len(t, r.Errors, 1)
	require.Equal(t, "SESSION_NOT_RESUMABLE", r.Errors[0].code())

	type view struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason *string
					Park   *struct{ Status string }
					Parks  []struct{ Status string }
					Turns  struct {
						Nodes []struct {
							Number       int
							Status       string
							FailureScope *string
						}
					}
					Inputs struct{ Nodes []struct{ Status string } }
				}
			}
		}
	}
	read := func() view {
		var v view
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "t1") { status reason park { status } parks { status }
			turns { nodes { number status failureScope } } inputs { nodes { status } } } } } }`, map[string]any{"a": id}, &v)
		return v
	}
	e.put(t, "note", "n1", map[string]any{"id": "t1", "text": "fail"}, "")
	var v view
	poll(t, "turn 1 fails", func() bool {
		v = read()
		n := v.Actions.Action.Session.Turns.Nodes
		return len(n) == 1 && n[0].Status == "FAILED" && v.Actions.Action.Session.Status == "WAITING"
	})
	s := v.Actions.Action.Session
	require.Equal(t, "WAITING", s.Status)
	require.Contains(t, *s.Reason, "a note says fail")
	require.Equal(t, "FAILED", s.Turns.Nodes[0].Status)
	require.Equal(t, "TURN", *s.Turns.Nodes[0].FailureScope)
	require.Nil(t, s.Park, "a turn-scoped failure is not a park")
	require.Empty(t, s.Parks)
	require.Equal(t, "PENDING", s.Inputs.Nodes[0].Status)

	// An operator's resume runs the turn again on the same input: it fails again.
	e.ok(t, resume, map[string]any{"a": id}, nil)
	poll(t, "turn 2 fails", func() bool {
		v = read()
		n := v.Actions.Action.Session.Turns.Nodes
		return len(n) == 2 && n[0].Status == "FAILED" && v.Actions.Action.Session.Status == "WAITING"
	})

	// A new note wakes it, and the next turn takes both.
	e.put(t, "note", "n2", map[string]any{"id": "t1", "text": "fixed"}, "")
	poll(t, "turn 3 commits", func() bool {
		v = read()
		n := v.Actions.Action.Session.Turns.Nodes
		consumed := true
		for _, in := range v.Actions.Action.Session.Inputs.Nodes {
			consumed = consumed && in.Status == "CONSUMED"
		}
		return len(n) == 3 && n[0].Status == "COMPLETED" && v.Actions.Action.Session.Status == "OPEN" && consumed
	})
	s = v.Actions.Action.Session
	require.Equal(t, "OPEN", s.Status)
	require.Nil(t, s.Turns.Nodes[0].FailureScope)
	for _, in := range s.Inputs.Nodes {
		require.Equal(t, "CONSUMED", in.Status)
	}

	r = e.do(t, `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`,
		map[string]any{"id": uuid.NewString(), "input": map[string]any{
			"name": "bad", "kind": "starlark", "source": failingNoteSource,
			"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "ticket.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}}},
			"session": map[string]any{"id": "string(session.input.id)", "park": map[string]any{"ttl": "1h", "resumeOn": []any{"nope"}}},
		}})
	require.Len(t, r.Errors, 1)
	require.Equal(t, "INVALID_ACTION", r.Errors[0].code())
	require.Equal(t, "input.session.park.resumeOn[0]", r.Errors[0].field())
}

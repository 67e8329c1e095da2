package server_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// G1: a turn messages another session with send_to_session: the target
// gets a COMMAND input MESSAGE whose sender is AGENT <action>/<session>,
// delivered once with the sender's commit; without the target in
// permissions.sessions the call is refused and nothing is delivered.
func TestG1AgentSenderFromAnotherSession(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	target := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": target, "input": map[string]any{
		"name": "inbox", "kind": "starlark",
		"source": "def turn(event):\n    return {\"status\": \"OPEN\", \"state\": {\"seen\": len(event[\"inputs\"])}}\n",
		"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "ticket.inserted"`,
			"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}}},
		"session": map[string]any{"id": "string(session.input.id)"},
	}}, nil)
	sender := func(perms bool) string {
		id := uuid.NewString()
		def := map[string]any{
			"name": "relay", "kind": "starlark",
			"source": "def turn(event):\n    seq = send_to_session(\"" + target + "\", \"t1\", \"look at \" + event[\"session\"][\"id\"], key=None)\n" +
				"    return {\"status\": \"OPEN\", \"state\": {\"sent\": seq}}\n",
			"triggers": []any{map[string]any{"name": "note", "event": `event.type == "note.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
				map[string]any{"name": "more", "event": `event.type == "note.updated"`,
					"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}}},
			"session": map[string]any{"id": "string(session.input.id)"},
		}
		if perms {
			def["permissions"] = map[string]any{"sessions": []any{target}}
		}
		e.ok(t, createOp, map[string]any{"id": id, "input": def}, nil)
		return id
	}
	allowed, refused := sender(true), sender(false)
	e.put(t, "ticket", "t1", map[string]any{"id": "t1"}, "")
	e.put(t, "note", "n1", map[string]any{"id": "n1"}, "")
	e.step(t)
	for i := 1; i <= 2; i++ {
		e.put(t, "note", "n1", map[string]any{"id": "n1", "again": i}, "")
		e.step(t)
	}

	const q = `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status reason
		inputs(first: 50) { nodes { kind status command { kind message sender { kind id } } } } } } } }`
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason *string
					Inputs struct {
						Nodes []struct {
							Kind, Status string
							Command      *struct {
								Kind, Message string
								Sender        struct{ Kind, ID string }
							}
						}
					}
				}
			}
		}
	}
	e.ok(t, q, map[string]any{"a": target, "s": "t1"}, &out)
	var msgs []string
	for _, in := range out.Actions.Action.Session.Inputs.Nodes {
		if in.Command != nil && in.Command.Kind == "MESSAGE" {
			require.Equal(t, "AGENT", in.Command.Sender.Kind)
			require.Equal(t, allowed+"/n1", in.Command.Sender.ID)
			msgs = append(msgs, in.Command.Message)
		}
	}
	require.Equal(t, []string{"look at n1", "look at n1"}, msgs, "one message per sending turn, each delivered once")

	e.ok(t, q, map[string]any{"a": refused, "s": "n1"}, &out)
	require.Contains(t, *out.Actions.Action.Session.Reason, "not allowed")
}

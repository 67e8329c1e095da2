package server_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// G1, G2, G5 over GraphQL on the seed's monitor: a message reaches the
// session as a COMMAND input and a turn takes it (ACCEPTED); a second
// message is edited and then deleted; the same request again returns the
// first input; closing with a handoff and a successor starts <id>~2 with
// the note as its first input, and an entry for the key reaches it.
func TestCommandsEndToEnd_G1_G2_G5(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	aid := e.createMonitor(t)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	poll(t, "the session", func() bool { return e.querySession(t, aid, acct) != nil })

	const send = `mutation($a: UUID!, $id: String!, $m: String, $k: String!) { actions {
		sendToSession(actionId: $a, id: $id, message: $m, idempotencyKey: $k) { sequence kind status command { kind status message sender { kind id } } } } }`
	type sent struct {
		Actions struct {
			SendToSession struct {
				Sequence     int
				Kind, Status string
				Command      struct {
					Kind, Status, Message string
					Sender                struct{ Kind, ID string }
				}
			}
		}
	}
	var first sent
	e.ok(t, send, map[string]any{"a": aid, "id": acct, "m": "please look again", "k": "m1"}, &first)
	c := first.Actions.SendToSession
	require.Equal(t, "COMMAND", c.Kind)
	require.Equal(t, "MESSAGE", c.Command.Kind)
	require.Equal(t, "OPERATOR", c.Command.Sender.Kind)
	var again sent
	e.ok(t, send, map[string]any{"a": aid, "id": acct, "m": "please look again", "k": "m1"}, &again)
	require.Equal(t, c.Sequence, again.Actions.SendToSession.Sequence)
	r := e.do(t, send, map[string]any{"a": aid, "id": acct, "m": "other", "k": "m1"})
	require.Len(t, r.Errors, 1)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", r.Errors[0].code())
	require.Equal(t, "idempotencyKey", r.Errors[0].field())

	type inputs struct {
		Actions struct {
			Action struct {
				Session struct {
					Inputs struct {
						Nodes []struct {
							Sequence int
							Status   string
							Command  *struct{ Status string }
						}
					}
				}
			}
		}
	}
	const read = `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) { inputs { nodes { sequence status command { status } } } } } } }`
	poll(t, "a turn takes the message", func() bool {
		var in inputs
		e.ok(t, read, map[string]any{"a": aid, "id": acct}, &in)
		for _, n := range in.Actions.Action.Session.Inputs.Nodes {
			if n.Sequence == c.Sequence {
				return n.Command != nil && n.Command.Status == "ACCEPTED"
			}
		}
		return false
	})

	// A message to edit and delete: the session waits on nothing, so it is
	// taken at once; edits race the turn and either one wins.
	var second sent
	e.ok(t, send, map[string]any{"a": aid, "id": acct, "m": "draft", "k": "m2"}, &second)
	seq := second.Actions.SendToSession.Sequence
	r = e.do(t, `mutation($a: UUID!, $id: String!, $s: Int!) { actions { editSessionInput(actionId: $a, id: $id, sequence: $s, message: "final") { command { message } } } }`,
		map[string]any{"a": aid, "id": acct, "s": seq})
	if len(r.Errors) > 0 {
		require.Equal(t, "INPUT_NOT_PENDING", r.Errors[0].code(), "%+v", r.Errors)
	}
	r = e.do(t, `mutation($a: UUID!, $id: String!, $s: Int!) { actions { editSessionInput(actionId: $a, id: $id, sequence: $s, message: "x") { sequence } } }`,
		map[string]any{"a": aid, "id": acct, "s": 1})
	require.Len(t, r.Errors, 1)
	require.Equal(t, "INPUT_NOT_PENDING", r.Errors[0].code(), "input 1, the first message, was taken by a turn")
	require.Equal(t, "sequence", r.Errors[0].field())

	var closed struct {
		Actions struct {
			CloseSession struct {
				Status, Handoff string
				Successor       struct{ ID, Status string }
			}
		}
	}
	e.ok(t, `mutation($a: UUID!, $id: String!) { actions { closeSession(actionId: $a, id: $id, reason: "rotate", handoff: "up to date", successor: true) {
		status handoff successor { id status } } } }`, map[string]any{"a": aid, "id": acct}, &closed)
	cs := closed.Actions.CloseSession
	require.Equal(t, "CANCELLED", cs.Status)
	require.Equal(t, "up to date", cs.Handoff)
	require.Equal(t, acct+"~2", cs.Successor.ID)
	e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": acct, "amount": 5}, "")
	poll(t, "the entry reaches the successor, after the handoff note", func() bool {
		s := e.querySession(t, aid, acct+"~2")
		return s != nil && s.takenInputs() == 2
	})
}

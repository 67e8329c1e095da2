package server_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

const lifecycleSessionsOp = `query($a: UUID!, $archived: Boolean) { actions { action(id: $a) {
  sessions(first: 100, archived: $archived) { nodes { id status archivedAt displayTitle ambientStatus } } } } }`

type lifecycleSessions struct {
	Actions struct {
		Action struct {
			Sessions struct {
				Nodes []struct {
					ID            string
					Status        string
					ArchivedAt    *string
					DisplayTitle  *string
					AmbientStatus *string
				}
			}
		}
	}
}

func (e *env) lifecycleList(t *testing.T, actionID string, archived any) lifecycleSessions {
	t.Helper()
	var out lifecycleSessions
	e.ok(t, lifecycleSessionsOp, map[string]any{"a": actionID, "archived": archived}, &out)
	return out
}

// G7, G8, G6 over GraphQL on a real server: a singleton action refuses a
// second start with an intake record slot_taken naming the live session;
// the session shows its displayTitle; archiveSession hides it from the
// default list (archived: false), archived: true lists it, null both,
// unarchiveSession shows it again;
// an unknown session is NOT_FOUND.
func TestG7_G6_G8_LifecycleEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := monitorDef()
	sd := def["session"].(map[string]any)
	sd["concurrency"] = 1
	sd["displayTitle"] = `"Account " + string(session.input.account_id).substring(0, 8)`
	actionID := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": actionID, "input": def}, nil)

	a, b := uuid.NewString(), uuid.NewString()
	e.put(t, "account", a, map[string]any{"account_id": a}, "")
	poll(t, "the first session", func() bool { return len(e.lifecycleList(t, actionID, nil).Actions.Action.Sessions.Nodes) == 1 })
	e.put(t, "account", b, map[string]any{"account_id": b}, "")
	var recs struct {
		Actions struct {
			Action struct {
				IntakeRecords struct {
					Nodes []struct{ Reason, Message string }
				}
			}
		}
	}
	poll(t, "the slot_taken intake record", func() bool {
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) { intakeRecords(first: 10) { nodes { reason message } } } } }`, map[string]any{"a": actionID}, &recs)
		return len(recs.Actions.Action.IntakeRecords.Nodes) == 1
	})
	rec := recs.Actions.Action.IntakeRecords.Nodes[0]
	require.Equal(t, "slot_taken", rec.Reason)
	require.Contains(t, rec.Message, a)

	list := e.lifecycleList(t, actionID, nil).Actions.Action.Sessions.Nodes
	require.Len(t, list, 1)
	require.Equal(t, a, list[0].ID)
	require.Equal(t, "Account "+a[:8], *list[0].DisplayTitle)
	require.Nil(t, list[0].ArchivedAt)

	var arch struct {
		Actions struct {
			ArchiveSession struct {
				ID         string
				Status     string
				ArchivedAt *string
			}
		}
	}
	e.ok(t, `mutation($a: UUID!, $s: String!) { actions { archiveSession(actionId: $a, id: $s) { id status archivedAt } } }`,
		map[string]any{"a": actionID, "s": a}, &arch)
	require.NotNil(t, arch.Actions.ArchiveSession.ArchivedAt)
	require.Equal(t, "OPEN", arch.Actions.ArchiveSession.Status)
	require.Empty(t, e.lifecycleList(t, actionID, false).Actions.Action.Sessions.Nodes, "hidden by default")
	require.Len(t, e.lifecycleList(t, actionID, true).Actions.Action.Sessions.Nodes, 1)
	require.Len(t, e.lifecycleList(t, actionID, nil).Actions.Action.Sessions.Nodes, 1, "null lists both")

	e.ok(t, `mutation($a: UUID!, $s: String!) { actions { unarchiveSession(actionId: $a, id: $s) { id } } }`,
		map[string]any{"a": actionID, "s": a}, nil)
	require.Len(t, e.lifecycleList(t, actionID, false).Actions.Action.Sessions.Nodes, 1)

	r := e.do(t, `mutation($a: UUID!) { actions { archiveSession(actionId: $a, id: "nobody") { id } } }`, map[string]any{"a": actionID})
	requireError(t, r, "NOT_FOUND", "id")
}

// G7: concurrency other than 1 is refused at create with INVALID_ACTION.
func TestG7_ConcurrencyOnlyOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := monitorDef()
	def["session"].(map[string]any)["concurrency"] = 2
	r := e.do(t, createActionOp, map[string]any{"id": uuid.NewString(), "input": def})
	requireError(t, r, "INVALID_ACTION", "input.session.concurrency")
}

const startSessionOp = `mutation($a: UUID!, $input: JSON!) { actions { startSession(actionId: $a, input: $input) {
	created session { id status displayTitle origin { eventType } } } } }`

type startedSession struct {
	Actions struct {
		StartSession struct {
			Created bool
			Session struct {
				ID, Status   string
				DisplayTitle *string
				Origin       *struct{ EventType string }
			}
		}
	}
}

// G7 over GraphQL: startSession starts a session by hand (its origin an
// action_session.started event), returns the live one for the same input
// again, and refuses a singleton's second live session with
// SESSION_SLOT_TAKEN naming the holder; the slot frees when it is final.
func TestG7StartSessionByHand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := monitorDef()
	sd := def["session"].(map[string]any)
	sd["concurrency"] = 1
	sd["displayTitle"] = `"Account " + string(session.input.account_id).substring(0, 8)`
	actionID := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": actionID, "input": def}, nil)

	a, b := uuid.NewString(), uuid.NewString()
	var st startedSession
	e.ok(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": a}}, &st)
	got := st.Actions.StartSession
	require.True(t, got.Created)
	require.Equal(t, a, got.Session.ID)
	require.Equal(t, "OPEN", got.Session.Status)
	require.Equal(t, "Account "+a[:8], *got.Session.DisplayTitle)
	require.Equal(t, "action_session.started", got.Session.Origin.EventType)

	e.ok(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": a}}, &st)
	require.False(t, st.Actions.StartSession.Created, "the same start again returns the live session")

	r := e.do(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": b}})
	err := requireError(t, r, "SESSION_SLOT_TAKEN", "input")
	require.Contains(t, err.Message, a, "the error names the live session")

	// Bad input: each refused with its code and field, nothing created.
	requireError(t, e.do(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": 7}}), "BAD_USER_INPUT", "input")
	requireError(t, e.do(t, startSessionOp, map[string]any{"a": actionID, "input": []any{1}}), "BAD_USER_INPUT", "input")
	requireError(t, e.do(t, startSessionOp, map[string]any{"a": uuid.NewString(), "input": map[string]any{"account_id": a}}), "NOT_FOUND", "actionId")
	require.Len(t, e.lifecycleList(t, actionID, nil).Actions.Action.Sessions.Nodes, 1)

	// A final status frees the slot; a closed session never starts again.
	e.ok(t, `mutation($a: UUID!, $s: String!) { actions { closeSession(actionId: $a, id: $s, reason: "done") { status } } }`,
		map[string]any{"a": actionID, "s": a}, nil)
	e.ok(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": b}}, &st)
	require.True(t, st.Actions.StartSession.Created)
	requireError(t, e.do(t, startSessionOp, map[string]any{"a": actionID, "input": map[string]any{"account_id": a}}), "SESSION_CLOSED", "input")
	require.Equal(t, 2, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'action_session.started'`))
}

package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

// newSteppedEnv is a service whose dispatcher and executor do not run: the
// test steps them, so what each turn takes is deterministic.
func newSteppedEnv(t testing.TB, cfg server.Config) *env {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.DatabaseURL = pgtest.NewDB(t)
	cfg.Clock = clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	app, err := server.New(context.Background(), cfg, log)
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.Close()
	})
	return &env{app: app, srv: srv, logs: logs}
}

// step dispatches every event and runs every queued execution of an
// action without a session block and every runnable turn.
func (e *env) step(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for {
		n, err := e.app.Dispatcher.DispatchOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	for {
		ran, err := e.app.Executor.RunExecutionOnce(ctx)
		require.NoError(t, err)
		if !ran {
			break
		}
	}
	for {
		ran, err := e.app.Executor.RunOnce(ctx)
		require.NoError(t, err)
		if !ran {
			return
		}
	}
}

const updateActionOp = `mutation($id: UUID!, $input: ActionInput!) { actions {
  updateAction(id: $id, input: $input) { actionId version fromPosition definition { config } } } }`

const setStatusOp = `mutation($id: UUID!, $status: ActionStatus!) { actions {
  setActionStatus(id: $id, status: $status) { id status version } } }`

// sessionVersionOp reads a session's pinned version and its turns' outputs.
const sessionVersionOp = `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
  version status turns { nodes { number inputs { identity } execution { version invocation { output } } } } } } } }`

type pinnedSession struct {
	Version json.Number
	Status  string
	Turns   struct {
		Nodes []struct {
			Number    json.Number
			Inputs    []struct{ Identity string }
			Execution struct {
				Version    json.Number
				Invocation struct{ Output json.RawMessage }
			}
		}
	}
}

func (e *env) pinnedSession(t *testing.T, actionID, id string) pinnedSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *pinnedSession }
		}
	}
	e.ok(t, sessionVersionOp, map[string]any{"a": actionID, "s": id}, &out)
	require.NotNil(t, out.Actions.Action.Session, "session %s", id)
	return *out.Actions.Action.Session
}

// agentOf reads agent_id from an echo turn's output.
func agentOf(t *testing.T, output json.RawMessage) string {
	t.Helper()
	var o struct {
		AgentID string `json:"agent_id"`
	}
	require.NoError(t, json.Unmarshal(output, &o))
	return o.AgentID
}

// A2 over GraphQL: a session started under v1 keeps v1's handler config and
// turn limits after an update; a session started after it runs v2.
// Action.version, versions, versionAt and ActionSession.version show it.
func TestA2SessionKeepsItsVersionOverGraphQL(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	id := uuid.NewString()
	v1 := monitorDef()
	v1["config"] = map[string]any{"agent_id": "v1"}
	e.ok(t, createActionOp, map[string]any{"id": id, "input": v1}, nil)

	old := uuid.NewString()
	e.put(t, "account", old, map[string]any{"account_id": old}, "")
	e.put(t, "entry", "o1", map[string]any{"account_id": old}, "")
	e.put(t, "entry", "o2", map[string]any{"account_id": old}, "")
	_, err := e.app.Dispatcher.DispatchOnce(context.Background())
	require.NoError(t, err)

	v2 := monitorDef()
	v2["config"] = map[string]any{"agent_id": "v2"}
	turnsBlock(v2)["maxInputs"] = 1
	var up struct {
		Actions struct {
			UpdateAction struct {
				Version      json.Number
				FromPosition string
				Definition   struct{ Config json.RawMessage }
			}
		}
	}
	e.ok(t, updateActionOp, map[string]any{"id": id, "input": v2}, &up)
	require.Equal(t, json.Number("2"), up.Actions.UpdateAction.Version)
	require.Equal(t, "3", up.Actions.UpdateAction.FromPosition, "the head at the update: three events before it")
	jsonEq(t, `{"agent_id":"v2"}`, up.Actions.UpdateAction.Definition.Config)

	fresh := uuid.NewString()
	e.put(t, "account", fresh, map[string]any{"account_id": fresh}, "")
	e.put(t, "entry", "n1", map[string]any{"account_id": fresh}, "")
	e.put(t, "entry", "n2", map[string]any{"account_id": fresh}, "")
	e.step(t)

	s := e.pinnedSession(t, id, old)
	require.Equal(t, json.Number("1"), s.Version)
	require.Len(t, s.Turns.Nodes, 1, "v1's maxInputs (100): one turn takes both entries")
	require.Len(t, s.Turns.Nodes[0].Inputs, 2)
	require.Equal(t, json.Number("1"), s.Turns.Nodes[0].Execution.Version)
	require.Equal(t, "v1", agentOf(t, s.Turns.Nodes[0].Execution.Invocation.Output))

	s = e.pinnedSession(t, id, fresh)
	require.Equal(t, json.Number("2"), s.Version)
	require.Len(t, s.Turns.Nodes, 2, "v2's maxInputs (1): one entry per turn")
	for _, tn := range s.Turns.Nodes {
		require.Equal(t, json.Number("2"), tn.Execution.Version)
		require.Equal(t, "v2", agentOf(t, tn.Execution.Invocation.Output))
	}

	var act struct {
		Actions struct {
			Action struct {
				Version  json.Number
				Status   string
				Versions []struct{ Version json.Number }
				First    *struct {
					Definition struct{ Config json.RawMessage }
				}
				Missing *struct{ Version json.Number }
			}
		}
	}
	e.ok(t, `query($id: UUID!) { actions { action(id: $id) { version status versions { version }
	  first: versionAt(number: 1) { definition { config } } missing: versionAt(number: 3) { version } } } }`,
		map[string]any{"id": id}, &act)
	a := act.Actions.Action
	require.Equal(t, json.Number("2"), a.Version)
	require.Equal(t, "ACTIVE", a.Status)
	require.Len(t, a.Versions, 2)
	require.NotNil(t, a.First)
	jsonEq(t, `{"agent_id":"v1"}`, a.First.Definition.Config)
	require.Nil(t, a.Missing)

	// The same definition again: the current version, no new one.
	e.ok(t, updateActionOp, map[string]any{"id": id, "input": v2}, &up)
	require.Equal(t, json.Number("2"), up.Actions.UpdateAction.Version)
	require.Equal(t, 2, e.countRows(t, `SELECT count(*) FROM action_versions WHERE action_id = $1`, id))
}

// A2, A3: updateAction reports an invalid definition with exactly the
// errors createAction reports, and writes nothing; an unknown id is NOT_FOUND.
func TestA2UpdateActionErrorsOverGraphQL(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	id := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": id, "input": monitorDef()}, nil)

	bad := monitorDef()
	trigger(bad, 0)["event"] = "event.data.("
	turnsBlock(bad)["on"] = []any{"nothing"}
	sessionBlock(bad)["inputSchema"] = map[string]any{"type": 5}
	created := e.do(t, createActionOp, map[string]any{"id": uuid.NewString(), "input": bad})
	updated := e.do(t, updateActionOp, map[string]any{"id": id, "input": bad})
	requireCodes(t, updated)
	require.GreaterOrEqual(t, len(updated.Errors), 3)
	type seen struct{ code, field, message string }
	view := func(r response) []seen {
		var out []seen
		for _, er := range r.Errors {
			out = append(out, seen{er.code(), er.field(), er.Message})
		}
		return out
	}
	require.Equal(t, view(created), view(updated))
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM action_versions WHERE action_id = $1`, id))
	require.Equal(t, 1, e.countRows(t, `SELECT actions_epoch FROM dispatch_state`), "only the create changed the actions")

	r := e.do(t, updateActionOp, map[string]any{"id": uuid.NewString(), "input": monitorDef()})
	requireError(t, r, "NOT_FOUND", "id")
	r = e.do(t, setStatusOp, map[string]any{"id": uuid.NewString(), "status": "DISABLED"})
	requireError(t, r, "NOT_FOUND", "id")
}

// A2: a disabled action's triggers stop matching, but its open session
// keeps its turns (the executor does not look at the action's status), and
// closeSession still ends it.
func TestA2DisabledActionSessionsKeepTurns(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	id := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": id, "input": monitorDef()}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": acct}, "")
	_, err := e.app.Dispatcher.DispatchOnce(context.Background())
	require.NoError(t, err)

	var st struct {
		Actions struct{ SetActionStatus struct{ Status string } }
	}
	e.ok(t, setStatusOp, map[string]any{"id": id, "status": "DISABLED"}, &st)
	require.Equal(t, "DISABLED", st.Actions.SetActionStatus.Status)
	e.put(t, "entry", "e2", map[string]any{"account_id": acct}, "")
	e.step(t)

	s := e.pinnedSession(t, id, acct)
	require.Equal(t, "OPEN", s.Status)
	require.Len(t, s.Turns.Nodes, 1, "the input delivered before disabling got its turn")
	require.Len(t, s.Turns.Nodes[0].Inputs, 1, "the entry after disabling was not delivered")

	e.ok(t, `mutation($a: UUID!, $s: String!) { actions { closeSession(actionId: $a, id: $s, reason: "done") { status } } }`,
		map[string]any{"a": id, "s": acct}, nil)
	require.Equal(t, "CANCELLED", e.pinnedSession(t, id, acct).Status)
}

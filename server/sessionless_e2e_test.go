package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Issue 15 end to end over GraphQL on a real server: an action without a
// session block runs one execution per matching event; its handler's
// ledger writes commit with the outcome; a failed execution is visible
// with its reason and an operator retries it.

// sessionlessSource writes one record per event (keyed by the event id)
// and fails while config/mode says so.
const sessionlessSource = `
def turn(event):
    if event["session"] != None:
        fail("a sessionless execution has no session")
    input = event["inputs"][0]
    ev = input["event"]
    mode = ledger.get("config", "mode")
    if mode != None and mode["fail"]:
        fail("mode says fail")
    v = ledger.put("seen", ev["id"], {"n": ev["data"]["n"]})
    return {"output": {"n": ev["data"]["n"], "triggers": input["triggers"], "version": v}}

def call(event):
    return {}
`

func sessionlessDef() map[string]any {
	return map[string]any{
		"name":   "entry-writer",
		"kind":   "starlark",
		"source": sessionlessSource,
		"triggers": []any{
			map[string]any{"name": "all", "event": `event.type == "entry.inserted"`},
			map[string]any{"name": "big", "event": `event.type == "entry.inserted" && int(event.data.n) >= 10`},
		},
		"permissions": map[string]any{"read": []any{"config"}, "write": []any{"seen"}},
	}
}

const executionsQuery = `query($id: UUID!, $status: ExecutionStatus, $first: Int, $after: String) { actions { action(id: $id) {
  executions(first: $first, after: $after, status: $status) {
    nodes { id status attempts error retries retriedBy queuedAt startedAt finishedAt concurrencyKey
      session { id } turn { number }
      event { id eventType position data }
      triggers { name event }
      invocation { output transcript(first: 10) { nodes { sequence kind } } } }
    pageInfo { hasNextPage endCursor } } } } }`

type execNode struct {
	ID             string
	Status         string
	Attempts       int
	Error          *string
	Retries        int
	RetriedBy      *string
	QueuedAt       *string
	StartedAt      string
	FinishedAt     *string
	ConcurrencyKey *string
	Session        *struct{ ID string }
	Turn           *struct{ Number int }
	Event          *struct {
		ID        string
		EventType string
		Position  string
		Data      json.RawMessage
	}
	Triggers []struct {
		Name  string
		Event string
	}
	Invocation struct {
		Output     json.RawMessage
		Transcript struct {
			Nodes []struct {
				Sequence int
				Kind     string
			}
		}
	}
}

type execPage struct {
	Actions struct {
		Action struct {
			Executions struct {
				Nodes    []execNode
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
	}
}

func (e *env) executions(t *testing.T, actionID uuid.UUID, status any, first int, after any) execPage {
	t.Helper()
	var out execPage
	e.ok(t, executionsQuery, map[string]any{"id": actionID, "status": status, "first": first, "after": after}, &out)
	return out
}

func TestSessionlessActionEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := uuid.New()
	e.ok(t, createActionOp, map[string]any{"id": id, "input": sessionlessDef()}, nil)

	small := e.put(t, "entry", "e1", map[string]any{"n": 1}, "")
	big := e.put(t, "entry", "e2", map[string]any{"n": 12}, "")
	e.put(t, "account", "a1", map[string]any{"n": 99}, "") // matches no trigger

	poll(t, "both executions succeed", func() bool {
		xs := e.executions(t, id, "SUCCEEDED", 10, nil).Actions.Action.Executions.Nodes
		return len(xs) == 2
	})
	page := e.executions(t, id, nil, 10, nil).Actions.Action.Executions
	require.Len(t, page.Nodes, 2, "one execution per matching event, however many triggers matched")
	require.False(t, page.PageInfo.HasNextPage)
	newest, oldest := page.Nodes[0], page.Nodes[1]
	require.Equal(t, big.Event.ID, newest.Event.ID, "newest event first")
	require.Equal(t, small.Event.ID, oldest.Event.ID)
	require.Equal(t, "entry.inserted", newest.Event.EventType)
	require.Equal(t, []string{"all", "big"}, []string{newest.Triggers[0].Name, newest.Triggers[1].Name})
	require.Equal(t, `event.type == "entry.inserted" && int(event.data.n) >= 10`, newest.Triggers[1].Event)
	require.Len(t, oldest.Triggers, 1)
	for _, x := range page.Nodes {
		require.Equal(t, "SUCCEEDED", x.Status)
		require.Equal(t, 1, x.Attempts)
		require.Nil(t, x.Session)
		require.Nil(t, x.Turn)
		require.Nil(t, x.Error)
		require.Nil(t, x.ConcurrencyKey)
		require.NotNil(t, x.QueuedAt)
		require.NotNil(t, x.FinishedAt)
	}
	jsonEq(t, `{"n": 12, "triggers": ["all", "big"], "version": 1}`, newest.Invocation.Output)

	// The handler's writes committed with the outcome, once.
	require.Equal(t, 2, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'seen' AND version = 1`))

	// Paging: one per page, by the connection's cursor.
	p1 := e.executions(t, id, nil, 1, nil).Actions.Action.Executions
	require.True(t, p1.PageInfo.HasNextPage)
	p2 := e.executions(t, id, nil, 1, *p1.PageInfo.EndCursor).Actions.Action.Executions
	require.Len(t, p2.Nodes, 1)
	require.Equal(t, oldest.ID, p2.Nodes[0].ID)

	// A failure is visible with its reason, and retryable by an operator.
	e.put(t, "config", "mode", map[string]any{"fail": true}, "")
	third := e.put(t, "entry", "e3", map[string]any{"n": 3}, "")
	poll(t, "the execution fails", func() bool {
		return len(e.executions(t, id, "FAILED", 10, nil).Actions.Action.Executions.Nodes) == 1
	})
	failed := e.executions(t, id, "FAILED", 10, nil).Actions.Action.Executions.Nodes[0]
	require.Equal(t, third.Event.ID, failed.Event.ID)
	require.NotNil(t, failed.Error)
	require.Contains(t, *failed.Error, "mode says fail")
	require.Equal(t, 1, failed.Attempts, "a script's failure is not retried: the same event fails the same way")
	require.NotEmpty(t, failed.Invocation.Transcript.Nodes, "the failed run's transcript is kept")

	const retryOp = `mutation($a: UUID!, $id: UUID!) { actions { retryExecution(actionId: $a, id: $id) {
		id status retries retriedBy event { id } } } }`
	e.put(t, "config", "mode", map[string]any{"fail": false}, "")
	var retried struct {
		Actions struct {
			RetryExecution struct {
				ID, Status string
				Retries    int
				RetriedBy  *string
				Event      struct{ ID string }
			}
		}
	}
	e.ok(t, retryOp, map[string]any{"a": id, "id": failed.ID}, &retried)
	require.Equal(t, "QUEUED", retried.Actions.RetryExecution.Status)
	require.Equal(t, 1, retried.Actions.RetryExecution.Retries)
	require.Equal(t, "dev", *retried.Actions.RetryExecution.RetriedBy)
	require.Equal(t, third.Event.ID, retried.Actions.RetryExecution.Event.ID)
	poll(t, "the retried execution succeeds", func() bool {
		return len(e.executions(t, id, "SUCCEEDED", 10, nil).Actions.Action.Executions.Nodes) == 3
	})
	done := e.executions(t, id, "SUCCEEDED", 10, nil).Actions.Action.Executions.Nodes[0]
	require.Equal(t, failed.ID, done.ID)
	require.Equal(t, 2, done.Attempts)
	require.Nil(t, done.Error)
	require.Equal(t, failed.Invocation.Transcript.Nodes, done.Invocation.Transcript.Nodes,
		"the failed run's entries are kept (the script's successful run adds none)")
	require.Equal(t, "error", done.Invocation.Transcript.Nodes[0].Kind)

	// Only a FAILED execution of this action is retried.
	requireError(t, e.do(t, retryOp, map[string]any{"a": id, "id": failed.ID}), "EXECUTION_NOT_RETRYABLE", "id")
	requireError(t, e.do(t, retryOp, map[string]any{"a": id, "id": uuid.New()}), "NOT_FOUND", "id")
	requireError(t, e.do(t, executionsQuery, map[string]any{"id": id, "after": "nope"}), "BAD_USER_INPUT", "after")
}

// A3 for actions without a session block, and the concurrency block's
// rules: each refusal names its field, with a stable code.
func TestSessionlessA3Refusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		edit func(d map[string]any)
		want []want
	}{
		{"a trigger with a session role", func(d map[string]any) {
			trigger(d, 1)["session"] = map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}
		}, []want{{"INVALID_ACTION", "input.triggers[1].session"}}},
		{"a predicate reads session", func(d map[string]any) {
			trigger(d, 0)["event"] = `event.type == "entry.inserted" && session.id == "x"`
		}, []want{{"INVALID_ACTION", "input.triggers[0].event"}}},
		{"a tool with a session", func(d map[string]any) {
			d["tool"] = map[string]any{"name": "t", "session": map[string]any{"start": map[string]any{"input": map[string]any{"a": "tool.input.a"}}}}
		}, []want{{"INVALID_ACTION", "input.tool.session"}}},
		{"the concurrency key reads session", func(d map[string]any) {
			d["concurrency"] = map[string]any{"limit": 1, "key": "session.id"}
		}, []want{{"INVALID_ACTION", "input.concurrency.key"}}},
		{"the concurrency key is not a string", func(d map[string]any) {
			d["concurrency"] = map[string]any{"limit": 1, "key": "event.position"}
		}, []want{{"INVALID_EXPRESSION", "input.concurrency.key"}}},
		{"a concurrency limit of 0", func(d map[string]any) {
			d["concurrency"] = map[string]any{"limit": 0}
		}, []want{{"BAD_USER_INPUT", "input.concurrency.limit"}}},
		{"concurrency with a session block", func(d map[string]any) {
			m := monitorDef()
			for k, v := range m {
				d[k] = v
			}
			delete(d, "source")
			delete(d, "permissions")
			d["concurrency"] = map[string]any{"limit": 1, "key": *str("string(event.data.account_id)")}
		}, []want{{"INVALID_ACTION", "input.concurrency"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := sessionlessDef()
			c.edit(d)
			id := uuid.New()
			r := e.do(t, createActionOp, map[string]any{"id": id, "input": d})
			require.Len(t, r.Errors, len(c.want), "errors: %+v", r.Errors)
			for i, w := range c.want {
				require.Equal(t, w.code, r.Errors[i].code(), "%+v", r.Errors[i])
				require.Equal(t, w.field, r.Errors[i].field(), "%+v", r.Errors[i])
			}
			require.Zero(t, e.countRows(t, `SELECT count(*) FROM actions WHERE id = $1`, id), "nothing stored")
		})
	}
	// The valid definition is accepted, and reads back with its block.
	d := sessionlessDef()
	d["concurrency"] = map[string]any{"limit": 2, "key": "string(event.data.n)"}
	var out struct {
		Actions struct {
			CreateAction struct {
				Definition struct {
					Concurrency struct {
						Limit int
						Key   string
					}
				}
			}
		}
	}
	e.ok(t, `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) {
		definition { concurrency { limit key } } } } }`, map[string]any{"id": uuid.New(), "input": d}, &out)
	require.Equal(t, 2, out.Actions.CreateAction.Definition.Concurrency.Limit)
	require.Equal(t, "string(event.data.n)", out.Actions.CreateAction.Definition.Concurrency.Key)
}

// Issue 15 under AUTH: listing executions needs READ on the action;
// retrying one needs RESPOND on it, and on no other.
func TestSessionlessAuth(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a, other := uuid.New(), uuid.New()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": sessionlessDef()}, nil)
	e.ok(t, createActionOp, map[string]any{"id": other, "input": sessionlessDef()}, nil)
	e.put(t, "config", "mode", map[string]any{"fail": true}, "")
	e.put(t, "entry", "e1", map[string]any{"n": 1}, "")
	e.step(t)
	xs := e.executions(t, a, "FAILED", 10, nil).Actions.Action.Executions.Nodes
	require.Len(t, xs, 1)

	_, reader := e.token(t, "reader", pol("READ", "financial.Action.document:"+a.String()))
	_, operator := e.token(t, "operator", pol("RESPOND", "financial.Action.document:"+a.String()))
	_, elsewhere := e.token(t, "elsewhere", pol("RESPOND", "financial.Action.document:"+other.String()),
		pol("READ", "financial.Action.document:"+other.String()))
	const listOp = `query($id: UUID!) { actions { action(id: $id) { executions { nodes { id status } } } } }`
	const retryOp = `mutation($a: UUID!, $id: UUID!) { actions { retryExecution(actionId: $a, id: $id) { status retriedBy } } }`
	e.allowed(t, reader, listOp, map[string]any{"id": a})
	e.forbidden(t, operator, listOp, map[string]any{"id": a})
	e.forbidden(t, elsewhere, listOp, map[string]any{"id": a})

	vars := map[string]any{"a": a, "id": xs[0].ID}
	e.forbidden(t, reader, retryOp, vars)
	e.forbidden(t, elsewhere, retryOp, vars)
	// Naming the other action does not reach this one's execution.
	requireError(t, e.as(t, elsewhere, retryOp, map[string]any{"a": other, "id": xs[0].ID}), "NOT_FOUND", "id")
	r := e.allowed(t, operator, retryOp, vars)
	require.JSONEq(t, `{"actions":{"retryExecution":{"status":"QUEUED","retriedBy":"operator"}}}`, string(r.Data))
}

package server_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// growSource is the script of issue 10 item 2, 3,000 lists of 999,999
// elements, as a tool's call() and a turn handler's turn().
const growSource = `
def grow():
    x = []
    for i in range(3000):
        x.append([0] * 999999)
    return len(x)

def call(event):
    return grow()

def turn(event):
    return {"status": "OPEN", "output": grow()}
`

// generous raises the step and time limits to the caps, so that only the
// memory budget can stop growSource.
var generous = map[string]any{"max_steps": 100000000, "timeout_ms": 60000}

// Over HTTP: a Starlark tool that grows without bound fails its call with
// a code and the budget in the message, and the server answers the next
// request (issue 10 item 2).
func TestStarlarkMemoryBudgetStopsATool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	toolID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "grow", "kind": "starlark", "source": growSource, "config": generous,
		"tool": map[string]any{"name": "grow"}}}, nil)

	r := e.do(t, `mutation($a: UUID!) { actions { callTool(actionId: $a, input: {}) { output } } }`, map[string]any{"a": toolID})
	ge := requireError(t, r, "TOOL_CALL_FAILED", "")
	require.Contains(t, ge.Message, "the script exceeded its memory budget of 64 MiB")

	start := time.Now()
	e.requireAlive(t)
	t.Logf("the next request answered in %s", time.Since(start))

	// memory_mb sets the budget, within 1-1024 MiB.
	smallID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": smallID, "input": map[string]any{
		"name": "grow-small", "kind": "starlark", "source": growSource,
		"config": map[string]any{"max_steps": 100000000, "timeout_ms": 60000, "memory_mb": 8},
		"tool":   map[string]any{"name": "grow_small"}}}, nil)
	r = e.do(t, `mutation($a: UUID!) { actions { callTool(actionId: $a, input: {}) { output } } }`, map[string]any{"a": smallID})
	ge = requireError(t, r, "TOOL_CALL_FAILED", "")
	require.Contains(t, ge.Message, "memory budget of 8 MiB")

	r = e.do(t, createOp, map[string]any{"id": uuid.NewString(), "input": map[string]any{
		"name": "grow-huge", "kind": "starlark", "source": growSource, "config": map[string]any{"memory_mb": 4096},
		"tool": map[string]any{"name": "grow_huge"}}})
	requireError(t, r, "INVALID_CONFIG", "input.config.memory_mb")
	e.requireAlive(t)
}

// Over HTTP: a Starlark turn handler that grows without bound fails its
// turn, for good, with a reason naming the memory budget (issue 10 item
// 2).
func TestStarlarkMemoryBudgetFailsATurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	aid := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": aid, "input": map[string]any{
		"name": "grow-turn", "kind": "starlark", "source": growSource, "config": generous,
		"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
			"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}}},
		"session": map[string]any{"id": "string(session.input.account_id)"},
	}}, nil)
	acct := uuid.NewString()
	// The first event opens the session, the second is its input and
	// starts the turn.
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.put(t, "account", acct+"-again", map[string]any{"account_id": acct}, "")
	var out struct {
		Actions struct {
			Action struct {
				Session *struct {
					Status string
					Reason *string
					Turns  struct{ Nodes []struct{ Status string } }
				}
			}
		}
	}
	poll(t, "the turn to fail", func() bool {
		e.ok(t, `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) { status reason turns(first: 5) { nodes { status } } } } } }`,
			map[string]any{"a": aid, "id": acct}, &out)
		return out.Actions.Action.Session != nil && out.Actions.Action.Session.Status == "FAILED"
	})
	s := out.Actions.Action.Session
	require.Contains(t, *s.Reason, "the script exceeded its memory budget of 64 MiB")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, aid))
	require.Equal(t, 1, e.countRows(t, `SELECT attempts FROM executions WHERE action_id = $1`, aid), "a memory failure is not retried")
	start := time.Now()
	e.requireAlive(t)
	t.Logf("the next request answered in %s", time.Since(start))
}

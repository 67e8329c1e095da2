package server_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// BenchmarkApprovalCycle measures one full approval cycle through GraphQL
// with the scripted agent (P1, P5): an entry is written, its turn pauses
// before the gated tool, the seed's Approve operation answers it, and the
// answer's turn runs the tool and reports the outcome. Dispatch and turns
// run in the benchmark's goroutine (stepped), so ns/op is the service's
// own work for the cycle: three GraphQL writes and reads, two turns, one
// tool call.
func BenchmarkApprovalCycle(b *testing.B) {
	e := newSteppedEnv(b, server.Config{})
	toolID := uuid.NewString()
	e.ok(b, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account"}}}, nil)
	actionID := uuid.NewString()
	e.ok(b, createOp, map[string]any{"id": actionID, "input": agentMonitor(toolID)}, nil)
	e.put(b, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	approve := example(b, "approve.graphql")
	const pending = `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") {
	  status approvals(status: PENDING) { interruptId } } } } }`
	type view struct {
		Actions struct {
			Action struct {
				Session struct {
					Status    string
					Approvals []struct{ InterruptID string }
				}
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		e.put(b, "entry", fmt.Sprintf("e%d", i), map[string]any{"account_id": "3f0c9f8e", "amount": i}, "")
		e.step(b)
		var v view
		e.ok(b, pending, map[string]any{"a": actionID}, &v)
		require.Len(b, v.Actions.Action.Session.Approvals, 1)
		e.ok(b, approve, map[string]any{"actionId": actionID, "interruptId": v.Actions.Action.Session.Approvals[0].InterruptID}, nil)
		e.step(b)
	}
	b.StopTimer()
	var v view
	e.ok(b, pending, map[string]any{"a": actionID}, &v)
	require.Equal(b, "OPEN", v.Actions.Action.Session.Status)
	require.Equal(b, b.N, e.countRows(b, `SELECT count(*) FROM executions WHERE parent_id IS NOT NULL`))
}

package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// READ on one action does not reach another action's executions or
// sessions through tool calls: a turn's children and a CALL input's caller
// are checked against the action they belong to.
func TestAuthToolCallsDoNotCrossActions(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	toolID, callerID := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "tool", "kind": "starlark", "source": "def call(event):\n    return {\"ok\": True}\n",
		"tool":    map[string]any{"name": "t", "session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "tool.input.account_id"}}}},
		"session": map[string]any{"id": "string(session.input.account_id)"},
	}}, nil)
	def := monitorDef()
	def["kind"], def["config"] = "starlark", nil
	def["source"] = strings.ReplaceAll(`def turn(event):
    call_tool(TOOL, {"account_id": event["session"]["input"]["account_id"]})
    return {"status": "OPEN"}
`, "TOOL", `"`+toolID+`"`)
	def["permissions"] = map[string]any{"tools": []string{toolID}} // issue 11: declared to be callable
	e.ok(t, createActionOp, map[string]any{"id": callerID, "input": def}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.put(t, "entry", acct+"-1", map[string]any{"account_id": acct, "amount": 1}, "")
	e.step(t)

	_, callerReader := e.token(t, "caller-reader", pol("READ", "financial.Action.document:"+callerID))
	_, toolReader := e.token(t, "tool-reader", pol("READ", "financial.Action.document:"+toolID))
	children := `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
	  turns { nodes { execution { children { nodes { id } } } } } } } } }`
	count := func(r response) int {
		var out struct {
			Actions struct {
				Action struct {
					Session struct {
						Turns struct {
							Nodes []struct {
								Execution struct{ Children struct{ Nodes []any } }
							}
						}
					}
				}
			}
		}
		require.NoError(t, json.Unmarshal(r.Data, &out))
		n := 0
		for _, tn := range out.Actions.Action.Session.Turns.Nodes {
			n += len(tn.Execution.Children.Nodes)
		}
		return n
	}
	vars := map[string]any{"a": callerID, "s": acct}
	require.Equal(t, 1, count(e.allowed(t, adminToken, children, vars)), "the turn called the tool once")
	require.Equal(t, 0, count(e.allowed(t, callerReader, children, vars)), "the tool's execution is another action's")

	caller := `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
	  inputs { nodes { kind caller { id } } } } } } }`
	tvars := map[string]any{"a": toolID, "s": acct}
	e.allowed(t, adminToken, caller, tvars)
	e.forbidden(t, toolReader, caller, tvars)
}

package server_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Who may do what (issue 11): for every field of the namespaces that reads
// or writes, a principal holding exactly its policy passes the check, and
// neither a principal with nothing nor one holding that policy on another
// resource plus every other policy action on the right one does.
func TestAuthWhoMayDoWhat(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a, b := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": monitorDef()}, nil)
	tool := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": tool, "input": map[string]any{
		"name": "t", "kind": "starlark", "source": "def call(event):\n    return 1\n", "tool": map[string]any{"name": "t"}}}, nil)
	actionRes := func(id string) string { return "financial.Action.document:" + id }
	otherActions := []string{"READ", "WRITE", "RESPOND", "CLOSE", "CALL"}
	for _, tc := range []struct {
		field            string
		op               string
		vars             map[string]any
		action, resource string
		other            string // the same action's resource elsewhere
	}{
		{"LedgerQuery.events", `{ ledger { events(first: 1) { nodes { id } } } }`, nil, "READ", "ledger", ""},
		{"LedgerQuery.event", `query($id: UUID!) { ledger { event(id: $id) { id } } }`, map[string]any{"id": uuid.NewString()}, "READ", "ledger", ""},
		{"LedgerQuery.value", `{ ledger { value(namespace: "entry", key: "k") { key } } }`, nil, "READ", "ledger:entry", "ledger:account"},
		{"LedgerQuery.values", `{ ledger { values(namespace: "entry", first: 1) { nodes { key } } } }`, nil, "READ", "ledger:entry", "ledger:account"},
		{"LedgerMutation.putValue", `mutation { ledger { putValue(namespace: "entry", key: "k", value: {k: "k"}) { key } } }`, nil, "WRITE", "ledger:entry", "ledger:account"},
		{"LedgerMutation.appendEvent", `mutation { ledger { appendEvent(type: "note.made", data: {}) { id } } }`, nil, "WRITE", "ledger", ""},
		{"ActionsQuery.action", `query($a: UUID!) { actions { action(id: $a) { id } } }`, map[string]any{"a": a}, "READ", actionRes(a), actionRes(b)},
		{"ActionsQuery.actions", `{ actions { actions(first: 1) { nodes { id } } } }`, nil, "READ", "financial.Action.document", ""},
		{"ActionsMutation.createAction", createActionOp, map[string]any{"id": b, "input": map[string]any{
			"name": "t2", "kind": "starlark", "source": "def call(event):\n    return 1\n", "tool": map[string]any{"name": "t2"}}}, "WRITE", actionRes(b), actionRes(a)},
		{"ActionsMutation.updateAction", updateActionOp, map[string]any{"id": a, "input": map[string]any{
			"name": "t3", "kind": "starlark", "source": "def call(event):\n    return 1\n", "tool": map[string]any{"name": "t3"}}}, "WRITE", actionRes(a), actionRes(b)},
		{"ActionsMutation.setActionStatus", `mutation($a: UUID!) { actions { setActionStatus(id: $a, status: ACTIVE) { id } } }`, map[string]any{"a": a}, "WRITE", actionRes(a), actionRes(b)},
		{"ActionsMutation.closeSession", closeOp, map[string]any{"a": a, "s": "nobody"}, "CLOSE", actionRes(a), actionRes(b)},
		{"ActionsMutation.callTool", `mutation($a: UUID!) { actions { callTool(actionId: $a, input: {}) { output } } }`, map[string]any{"a": tool}, "CALL", actionRes(tool), actionRes(a)},
		{"ActionsMutation.respondToSession", `mutation($a: UUID!) { actions { respondToSession(actionId: $a, id: "s", interruptId: "00000000-0000-0000-0000-000000000000",
			response: { approval: { decision: APPROVE } }) { identity } } }`, map[string]any{"a": a}, "RESPOND", actionRes(a), actionRes(b)},
		{"AuthQuery.principals", `{ auth { principals { id } } }`, nil, "ADMIN", "*", ""},
		{"AuthMutation.createToken", `mutation { auth { createToken(principal: "someone", policies: []) { id } } }`, nil, "ADMIN", "*", ""},
		{"AuthMutation.revokeToken", `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": uuid.NewString()}, "ADMIN", "*", ""},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, none := e.token(t, "none-"+tc.field)
			wrongPolicies := []map[string]any{}
			if tc.other != "" {
				wrongPolicies = append(wrongPolicies, pol(tc.action, tc.other))
			}
			for _, x := range otherActions {
				if x != tc.action && !(tc.action == "CALL" && x == "WRITE") { // WRITE covers CALL
					wrongPolicies = append(wrongPolicies, pol(x, tc.resource))
				}
			}
			_, wrong := e.token(t, "wrong-"+tc.field, wrongPolicies...)
			_, right := e.token(t, "right-"+tc.field, pol(tc.action, tc.resource))
			e.forbidden(t, none, tc.op, tc.vars)
			e.forbidden(t, wrong, tc.op, tc.vars)
			r := e.as(t, right, tc.op, tc.vars)
			for _, ge := range r.Errors {
				require.NotEqual(t, "FORBIDDEN", ge.code(), fmt.Sprintf("%s with %s on %s: %+v", tc.field, tc.action, tc.resource, r.Errors))
			}
		})
	}
}

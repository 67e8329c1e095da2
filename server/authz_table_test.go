package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
		{"LedgerQuery.recentEvents", `{ ledger { recentEvents(last: 1) { nodes { id } } } }`, nil, "READ", "ledger", ""},
		{"LedgerQuery.value", `{ ledger { value(namespace: "entry", key: "k") { key } } }`, nil, "READ", "ledger:entry", "ledger:account"},
		{"LedgerQuery.values", `{ ledger { values(namespace: "entry", first: 1) { nodes { key } } } }`, nil, "READ", "ledger:entry", "ledger:account"},
		{"LedgerMutation.putValue", `mutation { ledger { putValue(namespace: "entry", key: "k", value: {k: "k"}) { key } } }`, nil, "WRITE", "ledger:entry", "ledger:account"},
		{"LedgerMutation.appendEvent", `mutation { ledger { appendEvent(type: "note.made", data: {}) { id } } }`, nil, "WRITE", "ledger", ""},
		{"LedgerMutation.appendEvents", `mutation { ledger { appendEvents(events: [{type: "note.made", data: {}}, {type: "note.made", data: {n: 2}}]) { id } } }`, nil, "WRITE", "ledger", ""},
		{"LedgerMutation.putValues", `mutation { ledger { putValues(records: [{namespace: "entry", key: "k1", value: {k: "k1"}}, {namespace: "entry", key: "k2", value: {k: "k2"}}]) { key } } }`, nil, "WRITE", "ledger:entry", "ledger:account"},
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
		{"ActionsMutation.retryExecution", `mutation($a: UUID!) { actions { retryExecution(actionId: $a, id: "00000000-0000-0000-0000-000000000000") { id } } }`,
			map[string]any{"a": a}, "RESPOND", actionRes(a), actionRes(b)},
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

// Who may do what beyond the namespace fields (issue 11): a bulk write is
// refused whole when one item needs a policy the caller lacks; viewer
// needs only a principal; the inbox (query and subscription) lists what
// the caller may read and refuses nobody; the other subscriptions need
// what the queries they follow need; MCP lists and calls only the tools
// the caller may CALL.
func TestAuthWhoMayDoWhatBeyondTheNamespaces(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	seed := seedInbox(t, e.env)
	e.step(t)
	actionRes := func(id string) string { return "financial.Action.document:" + id }

	t.Run("putValues mixed batch", func(t *testing.T) {
		_, entryOnly := e.token(t, "entry-writer", pol("WRITE", "ledger:entry"))
		_, both := e.token(t, "entry-payroll-writer", pol("WRITE", "ledger:entry"), pol("WRITE", "ledger:payroll"))
		const op = `mutation { ledger { putValues(records: [{namespace: "entry", key: "mixed", value: {k: 1}},
		  {namespace: "payroll", key: "ceo", value: {salary: 1}}]) { key } } }`
		e.forbidden(t, entryOnly, op, nil)
		require.Zero(t, e.countRows(t, `SELECT count(*) FROM kv_values WHERE key IN ('mixed', 'ceo')`), "nothing of the batch was written")
		e.allowed(t, both, op, nil)
		require.Equal(t, 2, e.countRows(t, `SELECT count(*) FROM kv_values WHERE key IN ('mixed', 'ceo')`))
	})

	t.Run("Query.viewer", func(t *testing.T) {
		_, nobody := e.token(t, "nobody")
		var v struct {
			Viewer struct {
				ID       string
				Policies []any
			}
		}
		require.NoError(t, json.Unmarshal(e.allowed(t, nobody, `{ viewer { id dev policies { action resource } } }`, nil).Data, &v))
		require.Equal(t, "nobody", v.Viewer.ID)
		require.Empty(t, v.Viewer.Policies)
		require.Equal(t, http.StatusUnauthorized, e.as(t, "", `{ viewer { id } }`, nil).Status)
	})

	t.Run("ActionsQuery.inbox", func(t *testing.T) {
		_, nobody := e.token(t, "inbox-nobody")
		_, reader := e.token(t, "inbox-reader", pol("READ", actionRes(seed.a)))
		_, responder := e.token(t, "inbox-responder", pol("RESPOND", actionRes(seed.a)), pol("WRITE", actionRes(seed.b)))
		const op = `{ actions { inbox { totalCount nodes { action { id } } } } }`
		count := func(token string) (int, []string) {
			var out struct{ Actions struct{ Inbox inboxPage } }
			require.NoError(t, json.Unmarshal(e.allowed(t, token, op, nil).Data, &out))
			var ids []string
			for _, n := range out.Actions.Inbox.Nodes {
				ids = append(ids, n.Action.ID)
			}
			return out.Actions.Inbox.TotalCount, ids
		}
		n, _ := count(nobody)
		require.Zero(t, n)
		n, _ = count(responder)
		require.Zero(t, n, "RESPOND or WRITE without READ lists nothing")
		n, ids := count(reader)
		require.Equal(t, 4, n)
		for _, id := range ids {
			require.Equal(t, seed.a, id)
		}
		n, _ = count(adminToken)
		require.Equal(t, 6, n)
	})

	url := e.authed.URL
	for _, tc := range []struct {
		field, op        string
		vars             map[string]any
		action, resource string
		other            string
	}{
		{"Subscription.ledgerEvents", ledgerEventsSub, map[string]any{"after": "0"}, "READ", "ledger", ""},
		{"Subscription.sessionUpdates", sessionUpdatesSub, map[string]any{"a": seed.a, "s": "a1-account"}, "READ", actionRes(seed.a), actionRes(seed.b)},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, none := e.token(t, "none-"+tc.field)
			wrongPolicies := []map[string]any{}
			if tc.other != "" {
				wrongPolicies = append(wrongPolicies, pol(tc.action, tc.other))
			}
			for _, x := range []string{"WRITE", "RESPOND", "CLOSE", "CALL"} {
				wrongPolicies = append(wrongPolicies, pol(x, tc.resource))
			}
			_, wrong := e.token(t, "wrong-"+tc.field, wrongPolicies...)
			_, right := e.token(t, "right-"+tc.field, pol(tc.action, tc.resource))
			refused(t, sse(t, url, none, tc.op, tc.vars), "FORBIDDEN")
			refused(t, sse(t, url, wrong, tc.op, tc.vars), "FORBIDDEN")
			s := sse(t, url, right, tc.op, tc.vars)
			r := s.next(t).result(t)
			require.Empty(t, r.Errors, "%s with %s on %s", tc.field, tc.action, tc.resource)
			require.NotEqual(t, "null", string(r.Data))
		})
	}
	t.Run("Subscription.inboxUpdates", func(t *testing.T) {
		_, none := e.token(t, "none-inboxUpdates")
		_, reader := e.token(t, "reader-inboxUpdates", pol("READ", actionRes(seed.b)))
		require.Zero(t, nextInboxUpdate(t, sse(t, url, none, inboxUpdatesSub, nil)).Pending, "nobody is refused; it lists nothing")
		require.Equal(t, 2, nextInboxUpdate(t, sse(t, url, reader, inboxUpdatesSub, nil)).Pending)
	})

	t.Run("MCP", func(t *testing.T) {
		tool := uuid.NewString()
		e.ok(t, createActionOp, map[string]any{"id": tool, "input": map[string]any{"name": "echo", "kind": "starlark",
			"source": "def call(event):\n    return {\"echo\": event[\"input\"]}\n", "tool": map[string]any{"name": "echo"}}}, nil)
		_, none := e.token(t, "none-mcp")
		_, wrong := e.token(t, "wrong-mcp", pol("READ", actionRes(tool)), pol("RESPOND", actionRes(tool)),
			pol("CLOSE", actionRes(tool)), pol("CALL", actionRes(seed.a)))
		_, right := e.token(t, "right-mcp", pol("CALL", actionRes(tool)))
		for _, tok := range []string{none, wrong} {
			require.Empty(t, mcpToolNames(t, url, tok))
			require.Contains(t, mcpCall(t, url, tok, "echo"), `unknown tool \"echo\"`)
		}
		require.Equal(t, []string{"echo"}, mcpToolNames(t, url, right))
		out := mcpCall(t, url, right, "echo")
		require.NotContains(t, out, `"isError":true`)
		require.Contains(t, out, `"structuredContent":{"echo":{"account_id":"x"}}`)
		require.Equal(t, http.StatusUnauthorized, mcpPost(t, url, "", "tools/list", nil).status)
	})
}

type mcpReply struct {
	status int
	body   struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
}

// mcpPost sends one JSON-RPC request to /mcp (the endpoint is stateless:
// each POST stands alone).
func mcpPost(t *testing.T, url, token, method string, params any) mcpReply {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := mcpReply{status: resp.StatusCode}
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 { // an SSE answer
		raw = raw[i+len("data: "):]
	}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func mcpToolNames(t *testing.T, url, token string) []string {
	t.Helper()
	r := mcpPost(t, url, token, "tools/list", map[string]any{})
	require.Equal(t, http.StatusOK, r.status)
	require.Nil(t, r.body.Error)
	var list struct{ Tools []struct{ Name string } }
	require.NoError(t, json.Unmarshal(r.body.Result, &list))
	names := []string{}
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// mcpCall calls tool name and returns the JSON-RPC error or the result, as JSON.
func mcpCall(t *testing.T, url, token, name string) string {
	t.Helper()
	r := mcpPost(t, url, token, "tools/call", map[string]any{"name": name, "arguments": map[string]any{"account_id": "x"}})
	if r.body.Error != nil {
		raw, err := json.Marshal(r.body.Error)
		require.NoError(t, err)
		return string(raw)
	}
	return string(r.body.Result)
}

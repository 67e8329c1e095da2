package mcp_test

// Issue 17, tools over MCP: active tool actions listed as MCP tools and
// called like GraphQL's callTool (X1-X6: a tool session records a CALL
// input whose execution is the call's), under the caller's token and
// policies, through the go-sdk client against a real server.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/mcp"
)

const freezeSource = `def call(event):
    return {"frozen": event["input"]["account_id"], "calls_before": len(event["session"]["inputs"])}
`

var accountSchema = map[string]any{"type": "object", "properties": map[string]any{"account_id": map[string]any{"type": "string"}},
	"required": []any{"account_id"}, "additionalProperties": false}

// freezeTool is a tool with a session per account (X1).
func freezeTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "Freeze an account.", "inputSchema": accountSchema,
		"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "tool.input.account_id"}}}}
}

// toolSessionDef is the session block a tool with a session needs.
var toolSessionDef = map[string]any{"inputSchema": accountSchema, "id": "string(session.input.account_id)"}

func (e *env) createSessionTool(t *testing.T, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	e.gql(t, `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { actionId } } }`,
		map[string]any{"id": id, "in": map[string]any{"name": name, "kind": "starlark", "source": freezeSource,
			"tool": freezeTool(name), "session": toolSessionDef}}, nil)
	return id
}

const echoSource = `def call(event):
    return {"echo": event["input"]}
`

func TestMCPListsAndCallsToolsLikeCallTool(t *testing.T) { // issue 17, X1-X6
	e := newEnv(t, false)
	freeze := e.createSessionTool(t, "freeze_account")
	e.createTool(t, "lookup", echoSource, map[string]any{"name": "lookup", "description": "Look up."})
	e.createTool(t, "gated", echoSource, map[string]any{"name": "gated", "approval": "REQUIRED"})
	cs := e.mustConnect(t, "/mcp", "")

	// Listed: the callable tools with their description and inputSchema; not
	// the gated one.
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	byName := map[string]*gomcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	require.ElementsMatch(t, []string{"freeze_account", "lookup"}, toolNames(t, cs))
	require.Equal(t, "Freeze an account.", byName["freeze_account"].Description)
	require.Equal(t, map[string]any{"type": "object", "properties": map[string]any{"account_id": map[string]any{"type": "string"}},
		"required": []any{"account_id"}, "additionalProperties": false}, byName["freeze_account"].InputSchema)
	require.Equal(t, map[string]any{"type": "object"}, byName["lookup"].InputSchema)
	require.Equal(t, freeze.String(), byName["freeze_account"].Meta[mcp.MetaActionID])

	// A call runs as callTool does: output, execution, CALL input in its tool session.
	r, err := call(t, cs, "freeze_account", map[string]any{"account_id": "a-1"})
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	require.JSONEq(t, `{"frozen": "a-1", "calls_before": 0}`, text(t, r))
	require.Equal(t, map[string]any{"frozen": "a-1", "calls_before": float64(0)}, r.StructuredContent)
	execID := r.Meta[mcp.MetaExecutionID].(string)
	require.Equal(t, "a-1", r.Meta[mcp.MetaSessionID])
	r, err = call(t, cs, "freeze_account", map[string]any{"account_id": "a-1"})
	require.NoError(t, err)
	require.JSONEq(t, `{"frozen": "a-1", "calls_before": 1}`, text(t, r), "the second call sees the first (X6)")

	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Inputs struct {
						Nodes []struct {
							Kind      string
							Identity  string
							Execution struct {
								ID         string
								Input      json.RawMessage
								Invocation struct{ Output json.RawMessage }
							}
						}
					}
				}
			}
		}
	}
	e.gql(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "a-1") { inputs { nodes { kind identity execution { id input invocation { output } } } } } } } }`,
		map[string]any{"a": freeze}, &out)
	nodes := out.Actions.Action.Session.Inputs.Nodes
	require.Len(t, nodes, 2)
	require.Equal(t, "CALL", nodes[0].Kind)
	require.Equal(t, execID, nodes[0].Execution.ID, "X4: the CALL input's execution is the MCP call's")
	require.JSONEq(t, `{"account_id": "a-1"}`, string(nodes[0].Execution.Input))
	require.JSONEq(t, `{"frozen": "a-1", "calls_before": 0}`, string(nodes[0].Execution.Invocation.Output))

	// Errors the model can read: the tool's input refused, with its code and field.
	r, err = call(t, cs, "freeze_account", map[string]any{"account": "a-1"})
	require.NoError(t, err)
	require.True(t, r.IsError)
	require.True(t, strings.HasPrefix(text(t, r), "BAD_USER_INPUT: input: "), text(t, r))
	require.Equal(t, "BAD_USER_INPUT", r.StructuredContent.(map[string]any)["error"].(map[string]any)["code"])
	require.Equal(t, "input", r.StructuredContent.(map[string]any)["error"].(map[string]any)["field"])

	// A tool whose owner requires approval is not called: no direct call can
	// wait for a person (see the package doc).
	r, err = call(t, cs, "gated", map[string]any{})
	require.NoError(t, err)
	require.True(t, r.IsError)
	require.Equal(t, "APPROVAL_REQUIRED", r.Meta[mcp.MetaCode])

	// An unknown tool is a JSON-RPC error (invalid params).
	_, err = call(t, cs, "no_such_tool", map[string]any{})
	require.ErrorContains(t, err, `unknown tool "no_such_tool"`)

	// A disabled tool is no longer listed.
	e.gql(t, `mutation($id: UUID!) { actions { setActionStatus(id: $id, status: DISABLED) { status } } }`, map[string]any{"id": freeze}, nil)
	require.Equal(t, []string{"lookup"}, toolNames(t, cs))
}

func TestMCPToolNamesStayUnique(t *testing.T) { // issue 17
	e := newEnv(t, false)
	a := e.createTool(t, "one", echoSource, map[string]any{"name": "lookup"})
	b := e.createTool(t, "two", echoSource, map[string]any{"name": "lookup"})
	cs := e.mustConnect(t, "/mcp", "")
	na, nb := "lookup__"+a.String()[:8], "lookup__"+b.String()[:8]
	require.ElementsMatch(t, []string{na, nb}, toolNames(t, cs))
	r, err := call(t, cs, nb, map[string]any{"x": 1})
	require.NoError(t, err)
	require.Equal(t, b.String(), r.Meta[mcp.MetaActionID])
	require.JSONEq(t, `{"echo": {"x": 1}}`, text(t, r))

	// /mcp/actions/{id} serves that action alone, under its own name.
	one := e.mustConnect(t, mcp.Endpoint(a), "")
	require.Equal(t, []string{"lookup"}, toolNames(t, one))
	r, err = call(t, one, "lookup", map[string]any{"y": 2})
	require.NoError(t, err)
	require.Equal(t, a.String(), r.Meta[mcp.MetaActionID])
}

func TestMCPAuthUsesTheGraphQLTokenAndPolicies(t *testing.T) { // issue 17, issue 6
	e := newEnv(t, true)
	mine := e.createTool(t, "mine", echoSource, map[string]any{"name": "mine"})
	e.createTool(t, "other", echoSource, map[string]any{"name": "other"})

	// No token: HTTP 401 with WWW-Authenticate and a JSON-RPC error body.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/mcp", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, `Bearer realm="actionsledger"`, resp.Header.Get("WWW-Authenticate"))
	var rpc struct {
		Error struct {
			Code int
			Data struct{ Code string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &rpc), "%s", raw)
	require.Equal(t, mcp.CodeUnauthenticated, rpc.Error.Code)
	require.Equal(t, "UNAUTHENTICATED", rpc.Error.Data.Code)
	_, err = e.connect(t, "/mcp", "")
	require.Error(t, err, "the go-sdk client cannot connect without a token")
	_, err = e.connect(t, "/mcp", "not-a-token")
	require.Error(t, err)

	// A token lists (and calls) only the tools its policies let it CALL.
	tok := e.token(t, "agent-desktop", [2]string{"CALL", "financial.Action.document:" + mine.String()})
	cs := e.mustConnect(t, "/mcp", tok)
	require.Equal(t, []string{"mine"}, toolNames(t, cs))
	r, err := call(t, cs, "mine", map[string]any{"a": true})
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))
	_, err = call(t, cs, "other", map[string]any{})
	require.ErrorContains(t, err, `unknown tool "other"`, "a tool the token may not call reads as unknown")

	// READ alone calls nothing; the admin token calls everything.
	reader := e.mustConnect(t, "/mcp", e.token(t, "reader", [2]string{"READ", "*"}))
	require.Empty(t, toolNames(t, reader))
	admin := e.mustConnect(t, "/mcp", adminToken)
	require.ElementsMatch(t, []string{"mine", "other"}, toolNames(t, admin))

	// A revoked token stops working at its next request.
	id, tok2 := e.tokenWithID(t, "revoked", [2]string{"CALL", "*"})
	cs2 := e.mustConnect(t, "/mcp", tok2)
	require.Len(t, toolNames(t, cs2), 2)
	e.gql(t, `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": id}, nil)
	_, err = call(t, cs2, "mine", map[string]any{})
	require.Error(t, err)
}

// Issue 17 (I4's `calls`, the action's MCP endpoint): a CALL input counts
// the tool calls its execution made; an action shows the path that serves
// it alone when it is a tool.
func TestMCPCallsAndEndpointInGraphQL(t *testing.T) {
	e := newEnv(t, false)
	inner := e.createTool(t, "inner", echoSource, map[string]any{"name": "inner"})
	outer := uuid.New()
	src := `def call(event):
    a = call_tool("` + inner.String() + `", {"n": 1})
    b = call_tool("` + inner.String() + `", {"n": 2})
    return {"a": a, "b": b}
`
	e.gql(t, `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { actionId } } }`,
		map[string]any{"id": outer, "in": map[string]any{"name": "outer", "kind": "starlark", "source": src,
			"tool":    map[string]any{"name": "outer", "inputSchema": accountSchema, "session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "tool.input.account_id"}}}},
			"session": toolSessionDef, "permissions": map[string]any{"tools": []string{inner.String()}}}}, nil)
	cs := e.mustConnect(t, "/mcp", "")
	r, err := call(t, cs, "outer", map[string]any{"account_id": "a-9"})
	require.NoError(t, err)
	require.False(t, r.IsError, "%s", text(t, r))

	var out struct {
		Actions struct {
			Outer struct {
				McpEndpoint *string
				Session     struct {
					Inputs struct {
						Nodes []struct {
							Kind  string
							Calls *int
						}
					}
				}
			}
			Inner struct{ McpEndpoint *string }
		}
	}
	e.gql(t, `query($o: UUID!, $i: UUID!) { actions {
		outer: action(id: $o) { mcpEndpoint session(id: "a-9") { inputs { nodes { kind calls } } } }
		inner: action(id: $i) { mcpEndpoint } } }`, map[string]any{"o": outer, "i": inner}, &out)
	require.Equal(t, mcp.Endpoint(outer), *out.Actions.Outer.McpEndpoint)
	require.Equal(t, "/mcp/actions/"+inner.String(), *out.Actions.Inner.McpEndpoint)
	nodes := out.Actions.Outer.Session.Inputs.Nodes
	require.Len(t, nodes, 1)
	require.Equal(t, "CALL", nodes[0].Kind)
	require.Equal(t, 2, *nodes[0].Calls)
}

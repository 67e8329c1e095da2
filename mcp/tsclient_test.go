package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tsDir is the npm project of the TypeScript MCP client (the official
// @modelcontextprotocol/sdk, which nobody on the project wrote).
var tsDir = filepath.Join("testdata", "tsclient")

// requireNode returns the node binary, with the client's npm packages
// installed (npm ci, as make test does, when they are missing). Without
// node the test is skipped, with a message, except in CI (CI set), where
// it fails.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is missing (CI is set: .ci/run and make test must provide Node.js and npm)")
		}
		t.Skip("node is missing: the TypeScript MCP client cannot run; install Node.js and npm (docs/development.md)")
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(tsDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
			return
		}
		cmd := exec.Command(filepath.Join("..", "scripts", "npm.sh"), "ci", "--no-audit", "--no-fund")
		cmd.Env = append(os.Environ(), "NPM_DIR="+filepath.Join("mcp", "testdata", "tsclient"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			npmErr = err.Error() + ": " + string(out)
		}
	})
	require.Empty(t, npmErr, "npm ci in %s failed", tsDir)
	return node
}

var (
	npmOnce sync.Once
	npmErr  string
)

// tsStep is one step the client runs.
type tsStep struct {
	Op        string         `json:"op"`
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// tsResult is what the client got for a step.
type tsResult struct {
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any   `json:"structuredContent"`
	Meta              map[string]any   `json:"meta"`
	Progress          []map[string]any `json:"progress"`
	Error             *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type tsRun struct {
	Connected bool       `json:"connected"`
	Error     string     `json:"error"`
	Results   []tsResult `json:"results"`
}

// runTS runs the TypeScript client against url with token ("" for none).
func runTS(t *testing.T, node, url, token string, steps ...tsStep) tsRun {
	t.Helper()
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", url, token, string(raw))
	cmd.Dir = tsDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "client.mjs failed: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var run tsRun
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &run), "client.mjs printed %s", out)
	return run
}

// Issue 17: the official TypeScript SDK lists our tools and calls one over
// streamable HTTP, end to end on a real server with AUTH on; without a
// token it is refused.
func TestMCPTypeScriptClient(t *testing.T) {
	node := requireNode(t)
	e := newEnv(t, true)
	freeze := e.createSessionTool(t, "freeze_account")
	e.createTool(t, "gated", echoSource, map[string]any{"name": "gated", "approval": "REQUIRED"})
	tok := e.token(t, "desktop", [2]string{"CALL", "*"})

	run := runTS(t, node, e.srv.URL+"/mcp", tok,
		tsStep{Op: "list"},
		tsStep{Op: "call", Name: "freeze_account", Arguments: map[string]any{"account_id": "a-1"}},
		tsStep{Op: "call", Name: "freeze_account", Arguments: map[string]any{}},
		tsStep{Op: "call", Name: "gated"},
		tsStep{Op: "call", Name: "nope"})
	require.True(t, run.Connected, run.Error)
	list := run.Results[0]
	require.Len(t, list.Tools, 1)
	require.Equal(t, "freeze_account", list.Tools[0].Name)
	require.Equal(t, "Freeze an account.", list.Tools[0].Description)
	require.Equal(t, "object", list.Tools[0].InputSchema["type"])

	ok := run.Results[1]
	require.False(t, ok.IsError, "%+v", ok)
	require.JSONEq(t, `{"frozen": "a-1", "calls_before": 0}`, ok.Content[0].Text)
	require.Equal(t, "a-1", ok.StructuredContent["frozen"])
	require.Equal(t, freeze.String(), ok.Meta["actionsledger/actionId"])

	bad := run.Results[2]
	require.True(t, bad.IsError)
	require.True(t, strings.HasPrefix(bad.Content[0].Text, "BAD_USER_INPUT: "), bad.Content[0].Text)
	require.True(t, run.Results[3].IsError)
	require.True(t, strings.HasPrefix(run.Results[3].Content[0].Text, "APPROVAL_REQUIRED: "))
	require.NotNil(t, run.Results[4].Error)
	require.Contains(t, run.Results[4].Error.Message, `unknown tool "nope"`)

	// The call is the tool session's CALL input, as with callTool.
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Inputs struct {
						Nodes []struct {
							Kind      string
							Execution struct{ ID string }
						}
					}
				}
			}
		}
	}
	e.gql(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "a-1") { inputs { nodes { kind execution { id } } } } } } }`,
		map[string]any{"a": freeze}, &out)
	require.Len(t, out.Actions.Action.Session.Inputs.Nodes, 1)
	require.Equal(t, "CALL", out.Actions.Action.Session.Inputs.Nodes[0].Kind)
	require.Equal(t, ok.Meta["actionsledger/executionId"], out.Actions.Action.Session.Inputs.Nodes[0].Execution.ID)

	refused := runTS(t, node, e.srv.URL+"/mcp", "", tsStep{Op: "list"})
	require.False(t, refused.Connected)
	require.Contains(t, refused.Error, "UNAUTHENTICATED")
}

// Issue 17 (I4): the official TypeScript SDK asks an agent served over MCP,
// sees the wait in progress notifications, gets the agent's reply, and the
// session query shows the REQUEST input with its execution and calls. A
// token without CALL on the agent does not see it.
func TestMCPTypeScriptClientAsksAnAgent(t *testing.T) {
	node := requireNode(t)
	e := newEnv(t, true)
	lookup := e.createTool(t, "lookup", echoSource, map[string]any{"name": "lookup"})
	agent := e.createAction(t, servedAgent("researcher", []any{map[string]any{"action": lookup.String()}}, []any{
		step(0, "", toolCall("lookup", map[string]any{"q": "ts"})),
		step(1, "Answered for the desktop.", reportOpen),
	}, nil))
	tok := e.token(t, "desktop", [2]string{"CALL", "financial.Action.document:" + agent.String()})

	run := runTS(t, node, e.srv.URL+"/mcp", tok,
		tsStep{Op: "list"},
		tsStep{Op: "call", Name: "researcher", Arguments: map[string]any{"case_id": "ts-1", "message": "what do we know?"}},
		tsStep{Op: "call", Name: "researcher", Arguments: map[string]any{"message": "no case"}})
	require.True(t, run.Connected, run.Error)
	require.Len(t, run.Results[0].Tools, 1, "the token may call the agent alone")
	require.Equal(t, "researcher", run.Results[0].Tools[0].Name)
	require.Equal(t, []any{"case_id", "message"}, run.Results[0].Tools[0].InputSchema["required"])

	ask := run.Results[1]
	require.False(t, ask.IsError, "%+v", ask)
	require.Equal(t, "Answered for the desktop.", ask.Content[0].Text)
	require.Equal(t, "ts-1", ask.Meta["actionsledger/sessionId"])
	require.NotEmpty(t, ask.Progress, "the wait was reported")
	require.Contains(t, ask.Progress[0]["message"], `delivered to session "ts-1"`)
	require.True(t, run.Results[2].IsError)
	require.True(t, strings.HasPrefix(run.Results[2].Content[0].Text, "BAD_USER_INPUT: "), run.Results[2].Content[0].Text)

	ins := e.requestInputs(t, agent, "ts-1")
	require.Len(t, ins, 1)
	require.Equal(t, "REQUEST", ins[0].Kind)
	require.Equal(t, ask.Meta["actionsledger/input"], ins[0].Identity)
	require.Equal(t, ask.Meta["actionsledger/executionId"], ins[0].Execution.ID)
	require.Equal(t, 1, *ins[0].Calls)

	// Without CALL on the agent it is no tool of the token's.
	other := runTS(t, node, e.srv.URL+"/mcp", e.token(t, "reader", [2]string{"READ", "*"}),
		tsStep{Op: "list"}, tsStep{Op: "call", Name: "researcher", Arguments: map[string]any{"case_id": "ts-2", "message": "?"}})
	require.True(t, other.Connected, other.Error)
	require.Empty(t, other.Results[0].Tools)
	require.NotNil(t, other.Results[1].Error)
	require.Contains(t, other.Results[1].Error.Message, `unknown tool "researcher"`)
}

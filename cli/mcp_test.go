package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
)

// bridged runs `actionsledger mcp` in-process with args, its stdin and
// stdout on pipes, and connects a go-sdk client to it: the way a desktop
// client starts the bridge as a subprocess. It returns the client session
// and a function that ends stdin and returns the bridge's exit code.
func bridged(t *testing.T, args ...string) (*gomcp.ClientSession, func() int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		var g grammar
		c := cli.Execute(context.Background(), &g, &g.Globals, append([]string{"mcp"}, args...),
			cli.IO{Stdin: inR, Stdout: outW, Stderr: io.Discard})
		outW.Close()
		code <- c
	}()
	c := gomcp.NewClient(&gomcp.Implementation{Name: "desktop-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &gomcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	return cs, func() int {
		_ = cs.Close()
		inW.Close()
		return <-code
	}
}

// Issue 17: a desktop client reaches our tools through the stdio bridge:
// it lists them with their descriptions and schemas, calls one (which
// runs as a tool call on the server and writes its record), and gets the
// server's error for a tool that does not exist. Closing stdin ends the
// bridge with exit 0.
func TestMCPBridgeListsAndCallsTools(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	require.Contains(t, r.ok(t, "apply", "-f", "testdata/freeze-tool.yaml"), "created: version 1")
	cs, stop := bridged(t, "--server", r.srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 1)
	tool := list.Tools[0]
	require.Equal(t, "freeze_account", tool.Name)
	require.Equal(t, "Freeze an account.", tool.Description)
	schema, err := json.Marshal(tool.InputSchema)
	require.NoError(t, err)
	require.Contains(t, string(schema), `"required":["account_id"]`)

	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "freeze_account",
		Arguments: map[string]any{"account_id": "acct-7", "reason": "bridge"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	raw, err := json.Marshal(res.Content)
	require.NoError(t, err)
	require.Contains(t, string(raw), "acct-7")
	var out struct {
		Ledger struct {
			Value struct{ Value json.RawMessage }
		}
	}
	postGraphQL(t, r.srv.URL, `{ ledger { value(namespace: "frozen", key: "acct-7") { value } } }`, &out)
	require.JSONEq(t, `{"reason": "bridge", "requested_by": ""}`, string(out.Ledger.Value.Value))

	_, err = cs.CallTool(ctx, &gomcp.CallToolParams{Name: "thaw_account", Arguments: map[string]any{}})
	require.ErrorContains(t, err, "thaw_account")

	require.Equal(t, cli.ExitOK, stop())
}

// Issue 17 (done when): a desktop-style client asks an agent through the
// bridge, gets the turn's reply, and the session query shows the REQUEST
// input with its execution and calls (I4).
func TestMCPBridgeAsksAnAgent(t *testing.T) {
	t.Parallel()
	r := newLiveRig(t)
	r.ok(t, "apply", "-f", "testdata/freeze-tool.yaml")
	r.ok(t, "apply", "-f", "testdata/served-agent.yaml")
	cs, stop := bridged(t, "--server", r.srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "ask_case",
		Arguments: map[string]any{"case_id": "case-9", "message": "Freeze it?"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Len(t, res.Content, 1)
	require.Equal(t, "Frozen case-9.", res.Content[0].(*gomcp.TextContent).Text)

	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Inputs struct {
						Nodes []struct {
							Kind      string
							Calls     *int
							Execution *struct{ Status string }
						}
					}
				}
			}
		}
	}
	postGraphQL(t, r.srv.URL, `{ actions { action(id: "7b1d3e5f-2a4c-4e6f-9a8b-0c1d2e3f4a5b") { session(id: "case-9") {
		inputs(first: 10) { nodes { kind calls execution { status } } } } } } }`, &out)
	ins := out.Actions.Action.Session.Inputs.Nodes
	require.Len(t, ins, 1)
	require.Equal(t, "REQUEST", ins[0].Kind)
	require.NotNil(t, ins[0].Execution)
	require.Equal(t, "SUCCEEDED", ins[0].Execution.Status)
	require.NotNil(t, ins[0].Calls)
	require.Equal(t, 1, *ins[0].Calls, "the freeze_account call")
	require.Equal(t, cli.ExitOK, stop())
}

// postGraphQL posts query to the server at base and decodes its data.
func postGraphQL(t *testing.T, base, query string, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	require.NoError(t, err)
	resp, err := http.Post(base+"/graphql", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	defer resp.Body.Close()
	var gr struct {
		Data   json.RawMessage
		Errors []any
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&gr))
	require.Empty(t, gr.Errors)
	require.NoError(t, json.Unmarshal(gr.Data, out), "%s", gr.Data)
}

// Issue 17: the bridge connects before it serves, so a server that does
// not answer is exit 3 and a refused token exit 2, each with a message.
func TestMCPBridgeRefusals(t *testing.T) {
	t.Parallel()
	res := execute(context.Background(), "", nil, nil, "mcp", "--server", notGraphQL(t))
	require.Equal(t, cli.ExitUnreachable, res.code, res.String())

	r := newRig(t, true)
	res = r.run(t, "mcp", "--token", "not-a-token")
	require.Equal(t, cli.ExitRefused, res.code, res.String())
	require.Contains(t, res.errOut, "HTTP 401")
	res = r.run(t, "mcp")
	require.Equal(t, cli.ExitRefused, res.code, res.String())

	res = r.run(t, "mcp", "--action", "nope")
	require.Equal(t, cli.ExitUsage, res.code, res.String())
}

package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

func codeConfig(code string, after ...any) map[string]any {
	cfg := gatedConfig(append([]any{step(0, map[string]any{"toolCalls": []any{callTo(toolRunCode, map[string]any{"code": code})}})}, after...)...)
	cfg["programmatic"] = true
	return cfg
}

// TestRunCode: a snippet calls a plain tool by name and catches the error
// of a gated one, which it cannot call (P4).
func TestRunCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := &spy{}
	h := b.handler(t, codeConfig(`
found = []
for q in ["a", "b"]:
    found.append(call_tool("lookup", {"q": q})["input"]["q"])
sent = catch(call_tool, "send_money", {"amount": 1})
result = {"found": found, "sent": sent.value, "error": sent.error}
`, step(1, map[string]any{"when": "requires approval", "toolCalls": []any{report("OPEN", "", nil)}})))
	sp.next, h.provider = h.provider, sp
	out, rec, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.Equal(t, []call{{Action: lookupID.String(), Input: `{"q":"a"}`}, {Action: lookupID.String(), Input: `{"q":"b"}`}}, b.env.recorded())

	msgs := sp.requests()[1].Messages
	res := msgs[len(msgs)-1].ToolResults[0]
	require.False(t, res.IsError)
	require.JSONEq(t, `{"found":["a","b"],"sent":null,"error":"tool send_money requires approval: call it directly, not from code"}`, res.Content)

	var o map[string]any
	require.NoError(t, json.Unmarshal(out.Output, &o))
	require.EqualValues(t, 2, o["tool_calls"])
	calls := rec.of("tool_call")
	require.Len(t, calls, 3)
	require.Equal(t, toolRunCode, calls[0]["tool"])
	require.Equal(t, toolRunCode, calls[1]["via"])
	require.Equal(t, "call_0_0/1", calls[1]["call_id"])

	specs := sp.requests()[0].Tools
	code := specs[len(specs)-1]
	require.Equal(t, toolRunCode, code.Name)
	require.Contains(t, code.Description, "these tools and returns its output: lookup.")
}

// TestRunCodeErrors: snippet failures are error results; a failure that
// is not the tool's own fails the attempt.
func TestRunCodeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`result = call_tool("send_money", {})`:  "tool send_money requires approval",
		`result = call_tool("nope", {})`:        `there is no tool named "nope"`,
		`result = call_tool("run_code", {})`:    "run_code cannot be called from code",
		`result = 1 +`:                          "got end of file",
		`fail("my own error")`:                  "my own error",
		`result = catch(fail, "not catchable")`: "not catchable",
		// Snippets have the sandbox's default memory budget (issue 10 item 2).
		"x = []\nfor i in range(100):\n    x.append(\"x\" * 999999)": "the script exceeded its memory budget of 64 MiB",
	} {
		h := b.handler(t, codeConfig(code, step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}})))
		_, rec, err := run(t, h, b.request())
		require.NoError(t, err, code)
		results := rec.of("tool_result")
		last := results[len(results)-1]
		require.Equal(t, true, last["is_error"], code)
		require.Contains(t, last["content"], want, code)
	}

	b.env.tools[lookupID.String()] = func(jsonvalue.Value) (jsonvalue.Value, error) {
		return nil, errDatabase
	}
	h := b.handler(t, codeConfig(`result = catch(call_tool, "lookup", {})`))
	_, _, err := run(t, h, b.request())
	require.ErrorIs(t, err, errDatabase)
}

var errDatabase = jsonError("database is down")

type jsonError string

func (e jsonError) Error() string { return string(e) }

// TestRunCodeOnlyWhenProgrammatic: without programmatic, run_code is not
// a tool.
func TestRunCodeOnlyWhenProgrammatic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := codeConfig(`result = 1`, step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	delete(cfg, "programmatic")
	h := b.handler(t, cfg)
	_, rec, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Contains(t, rec.of("tool_result")[0]["content"], `there is no tool named "run_code"`)
}

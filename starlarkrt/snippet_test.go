package starlarkrt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

// snippetHost serves tools by name: "double" doubles input.n, "gated"
// fails catchably, "broken" fails with a plain error.
type snippetHost struct{ calls []string }

func (h *snippetHost) CallTool(ctx context.Context, name string, input jsonvalue.Value) (jsonvalue.Value, error) {
	h.calls = append(h.calls, name+" "+string(input))
	switch name {
	case "double":
		v, err := input.Decode()
		if err != nil {
			return nil, err
		}
		n := v.(map[string]any)["n"]
		return jsonvalue.Value(fmt.Sprintf(`{"n":%s,"twice":%s}`, n, n)), nil
	case "gated":
		return nil, fmt.Errorf("wrapped: %w", &starlarkrt.CatchableError{Message: "tool gated requires approval"})
	default:
		return nil, errors.New("database is down")
	}
}

func (h *snippetHost) Now() time.Time { return testNow }

// TestRunSnippet covers the snippet dialect and call_tool by name (P4).
func TestRunSnippet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("top-level control flow and result", func(t *testing.T) {
		t.Parallel()
		h := &snippetHost{}
		out, err := starlarkrt.RunSnippet(ctx, "code.star", `
total = 0
for i in range(4):
    if i % 2 == 0:
        total += i
r = call_tool("double", {"n": total})
result = {"total": total, "tool": r}
`, h, starlarkrt.Limits{})
		require.NoError(t, err)
		require.JSONEq(t, `{"total": 2, "tool": {"n": 2, "twice": 2}}`, string(out))
		require.Equal(t, []string{`double {"n":2}`}, h.calls)
	})

	t.Run("no result is null", func(t *testing.T) {
		t.Parallel()
		out, err := starlarkrt.RunSnippet(ctx, "code.star", "x = 1\n", &snippetHost{}, starlarkrt.Limits{})
		require.NoError(t, err)
		require.Equal(t, "null", string(out))
	})

	t.Run("catch returns a catchable error", func(t *testing.T) {
		t.Parallel()
		out, err := starlarkrt.RunSnippet(ctx, "code.star", `
bad = catch(call_tool, "gated", {})
good = catch(call_tool, name="double", input={"n": 3})
result = {"bad": bad, "good": good.value}
`, &snippetHost{}, starlarkrt.Limits{})
		require.NoError(t, err)
		require.JSONEq(t, `{"bad": {"value": null, "error": "tool gated requires approval"}, "good": {"n": 3, "twice": 3}}`, string(out))
	})

	t.Run("catch through a function", func(t *testing.T) {
		t.Parallel()
		out, err := starlarkrt.RunSnippet(ctx, "code.star", `
def f(x):
    return call_tool("gated", {"x": x})
result = catch(f, 1).error
`, &snippetHost{}, starlarkrt.Limits{})
		require.NoError(t, err)
		require.JSONEq(t, `"tool gated requires approval"`, string(out))
	})

	t.Run("other errors propagate through catch", func(t *testing.T) {
		t.Parallel()
		for _, src := range []string{
			`result = catch(call_tool, "broken", {})`,
			`result = catch(fail, "boom")`,
		} {
			_, err := starlarkrt.RunSnippet(ctx, "code.star", src, &snippetHost{}, starlarkrt.Limits{})
			var se *starlarkrt.ScriptError
			require.ErrorAs(t, err, &se, src)
		}
		_, err := starlarkrt.RunSnippet(ctx, "code.star", `result = catch(call_tool, "broken", {})`, &snippetHost{}, starlarkrt.Limits{})
		require.ErrorContains(t, err, "database is down")
		require.Equal(t, starlarkrt.KindHost, err.(*starlarkrt.ScriptError).Kind)
	})

	t.Run("uncaught catchable error fails the snippet", func(t *testing.T) {
		t.Parallel()
		_, err := starlarkrt.RunSnippet(ctx, "code.star", `result = call_tool("gated", {})`, &snippetHost{}, starlarkrt.Limits{})
		var ce *starlarkrt.CatchableError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, starlarkrt.KindHost, err.(*starlarkrt.ScriptError).Kind)
	})

	t.Run("no ledger or session; limits apply", func(t *testing.T) {
		t.Parallel()
		_, err := starlarkrt.RunSnippet(ctx, "code.star", `result = ledger.get("a", "b")`, &snippetHost{}, starlarkrt.Limits{})
		require.ErrorContains(t, err, "undefined: ledger")
		_, err = starlarkrt.RunSnippet(ctx, "code.star", "n = 0\nfor i in range(1000000):\n    n += 1\n", &snippetHost{}, starlarkrt.Limits{MaxSteps: 1000})
		require.Equal(t, starlarkrt.KindSteps, err.(*starlarkrt.ScriptError).Kind)
	})

	t.Run("scripts keep their dialect", func(t *testing.T) {
		t.Parallel()
		// The same source compiled as a script (a separate cache entry)
		// still refuses top-level for and catch.
		src := "for i in [1]:\n    pass\ndef f(e):\n    return catch\n"
		_, err := starlarkrt.RunSnippet(ctx, "same.star", src, &snippetHost{}, starlarkrt.Limits{})
		require.NoError(t, err)
		require.Error(t, starlarkrt.Check("same.star", src, "f"))
	})
}

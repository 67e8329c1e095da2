package expr_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// allocated returns the bytes the process has allocated on the heap so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStaticCost_Issue10 covers issue 10 item 3 at compile: expressions
// whose cost grows faster than the data, or exceeds the limit whatever the
// data, are refused with the estimate and the limit; ordinary ones, and
// ones whose cost follows the data, are accepted.
func TestStaticCost_Issue10(t *testing.T) {
	t.Parallel()
	accepted := []struct {
		role expr.Role
		src  string
	}{
		{expr.StartPredicate, `event.type == "x" && event.data.a == "b"`},
		{expr.StartPredicate, `event.data.items.exists(i, i.name == "x")`},
		{expr.StartPredicate, `event.data.items.exists(i, i.tags.exists(t, t == "x"))`},
		{expr.StartPredicate, `event.data.rows.all(r, r.cells.all(c, c > 0))`},
		{expr.StartPredicate, `event.data.s.lowerAscii().contains("abc") && event.data.s.split(",").size() > 3`},
		{expr.StartPredicate, `["urgent", "fraud"].exists(k, event.data.text.contains(k))`},
		{expr.StartPredicate, `event.data["s"].replace("a", "bb") == "x"`},
		{expr.StartPredicate, `"%s-%s".format([event.data.a, event.data.b]) == "a-b"`},
		{expr.StartPredicate, `event.data.items.join(",").size() > 3`},
		{expr.StartMapping, `event.data.tags.map(x, x + "!")`},
		{expr.ResumePredicate, `event.type == "e" && session.input.account_id == string(event.data.account_id)`},
		{expr.Ends, `session.started_at + duration(string(session.input.days * 24) + "h")`},
		// Proportional to the data, just expensive per element: refused at
		// run time on an event too large for it, not at create.
		{expr.StartPredicate, perItem},
		// Quadratic in each element only: left to the run-time bounds.
		{expr.StartPredicate, `event.data.items.map(i, i.replace("", i)).size() > 0`},
	}
	for _, tc := range accepted {
		_, err := expr.Compile(tc.role, tc.src)
		require.NoError(t, err, tc.src)
	}

	refused := []struct {
		role     expr.Role
		src      string
		contains string
	}{
		// The issue's predicate.
		{expr.StartPredicate, `event.data.s.replace("", event.data.s).size() > 0`,
			"on the largest event (1048576 bytes) this expression may cost 1099513829796 units, on one of 32768 bytes 1073810647"},
		{expr.StartPredicate, `event.data["s"].replace("", event.data["s"]).size() > 0`, "grows faster than the data"},
		{expr.StartPredicate, `event.data.s.replace(event.data.a, event.data.b) == "x"`, "grows faster than the data"},
		{expr.StartPredicate, `event.data.items.join(event.data.sep) == "x"`, "grows faster than the data"},
		{expr.StartPredicate, `event.data.items.all(a, event.data.items.exists(b, a.id == b.id))`, "grows faster than the data"},
		{expr.StartPredicate, `event.data.keywords.exists(k, event.data.text.contains(k))`, "grows faster than the data"},
		{expr.StartPredicate, `event.data.s.matches(event.data.p)`, "the limit of one evaluation is 1000000"},
		{expr.StartMapping, `event.data.items.map(x, event.data.items.map(y, [x, y]))`, "grows faster than the data"},
		// Beyond what the estimator counts: said so, not as 2^64-1 units.
		{expr.StartPredicate, `event.data.items.map(x, event.data.items.map(y, event.data.items.map(z, [x, y, z]))).size() > 0`,
			"this expression may cost without bound, on one of 32768 bytes"},
		{expr.ResumePredicate, `event.type == "e" && session.input.s.replace("", session.input.s) == ""`,
			"on the largest event or session input (1048576 bytes)"},
		{expr.SessionID, `session.input.a.replace("", session.input.a)`, "on the largest session input"},
		{expr.ToolMapping, `tool.input.a.replace("", tool.input.a)`, "on the largest tool input"},
		{expr.StartPredicate, blowup, "every evaluation of this expression costs at least 2466653 units; the limit is 1000000"},
	}
	for _, tc := range refused {
		_, err := expr.Compile(tc.role, tc.src)
		require.Error(t, err, tc.src)
		requireFault(t, err, fault.InvalidExpression, tc.contains)
		require.Contains(t, err.Error(), "1000000", "the message gives the limit")
	}
}

// TestSizeLimitBeforeAllocation_Issue10 covers issue 10 item 3 at run time:
// calls that would build more than MaxBuildBytes are refused with
// ErrSizeLimit before they allocate. Each case passes the static check (or
// is built to), and the heap grows by a few megabytes at most where the
// unbounded calls would take hundreds. Not parallel: it measures the
// process's allocations.
func TestSizeLimitBeforeAllocation_Issue10(t *testing.T) {
	s40k := strings.Repeat("a", 40_000)
	items := make([]any, 1000)
	for i := range items {
		items[i] = json.Number("1")
	}
	cases := []struct {
		name string
		role expr.Role
		src  string
		data map[string]any
		want string
	}{
		{"replace in each element", expr.StartPredicate, `event.data.items.map(i, i.replace("", i)).size() > 0`,
			map[string]any{"items": []any{s40k}}, "replace would need at least 1600080000 bytes, more than the 16777216 left of 16777216 (line 1, column 34)"},
		{"join of repeated strings", expr.StartPredicate, `[` + strings.Repeat("event.data.s, ", 49) + `event.data.s].join("").size() > 0`,
			map[string]any{"s": strings.Repeat("a", 400_000)}, "join would need at least 16800000 bytes, more than the 16777216 left"},
		{"format of repeated strings", expr.StartPredicate, `"%s".format([event.data.items.map(i, event.data.s)]).size() > 0`,
			map[string]any{"items": items, "s": s40k}, "format would need"},
		{"split into characters", expr.StartPredicate, `event.data.s.split("").size() > 0`,
			map[string]any{"s": strings.Repeat("é", 600_000)}, "split would need at least 19200000 bytes"},
		{"concatenation after a split", expr.StartPredicate, `event.data.t.split("").size() > 0 && (event.data.s + event.data.s).size() > 0`,
			map[string]any{"t": strings.Repeat("x", 470_000), "s": strings.Repeat("x", 1_000_000)}, "_+_ would need at least 2000000 bytes, more than the 1737216 left"},
		{"regular expression from data", expr.StartPredicate, `event.data.patterns.exists(p, "x".matches(p))`,
			map[string]any{"patterns": []any{strings.Repeat("x{1000}", 500)}}, "compiles to about"},
		{"long regular expression from data", expr.StartPredicate, `event.data.patterns.exists(p, "x".matches(p))`,
			map[string]any{"patterns": []any{strings.Repeat("x", 5000)}}, "regular expression is 5000 bytes long; the limit is 4096"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := expr.Compile(tc.role, tc.src)
			require.NoError(t, err)
			v := vars(t)
			v.Event.Data = tc.data
			before := allocated()
			_, err = p.Eval(ctx, v)
			grown := allocated() - before
			require.ErrorIs(t, err, expr.ErrSizeLimit)
			require.Contains(t, err.Error(), tc.want)
			require.Nil(t, fault.As(err), "eval errors are plain errors")
			require.Less(t, grown, uint64(3*expr.MaxBuildBytes), "allocated %d bytes", grown)
		})
	}

	// Within the budget, the same calls work.
	p, err := expr.Compile(expr.StartMapping, `[event.data.s.replace("", "-"), event.data.items.join("+"), "%s=%d".format(["n", 2]), event.data.s + "!"]`)
	require.NoError(t, err)
	v := vars(t)
	v.Event.Data = map[string]any{"s": "abc", "items": []any{"x", "y"}}
	out, err := p.Eval(ctx, v)
	require.NoError(t, err)
	require.Equal(t, []any{"-a-b-c-", "x+y", "n=2", "abc!"}, out)
}

// TestResultSizeLimit_Issue10: a mapping's result is bounded by the largest
// stored value before it is converted or encoded, however cheaply it was
// built from repeated references.
func TestResultSizeLimit_Issue10(t *testing.T) {
	t.Parallel()
	p, err := expr.Compile(expr.StartMapping, `event.data.items.map(i, event.data.s)`)
	require.NoError(t, err)
	v := vars(t)
	items := make([]any, 100)
	for i := range items {
		items[i] = json.Number("1")
	}
	v.Event.Data = map[string]any{"items": items, "s": strings.Repeat("a", 40_000)}
	_, err = p.Eval(context.Background(), v)
	require.ErrorContains(t, err, "the result is larger than 1048576 bytes of JSON")
	require.Nil(t, fault.As(err))

	v.Event.Data = map[string]any{"items": items[:2], "s": "ab"}
	out, err := p.Eval(context.Background(), v)
	require.NoError(t, err)
	require.Equal(t, []any{"ab", "ab"}, out)
}

// TestRegexConstants_Issue10: a regular expression written in the
// expression is sized at compile, before the program compiles it.
func TestRegexConstants_Issue10(t *testing.T) {
	t.Parallel()
	_, err := expr.Compile(expr.StartPredicate, `event.data.s.matches("`+strings.Repeat("x{1000}", 100)+`")`)
	requireFault(t, err, fault.InvalidExpression, "regular expression compiles to about 300202 instructions; the limit is 10000")
	_, err = expr.Compile(expr.StartPredicate, `matches(event.data.s, "`+strings.Repeat("[a-z]{1000}", 20)+`")`)
	requireFault(t, err, fault.InvalidExpression, "the limit is 10000")
	// Found by FuzzCEL: a literal that does not parse failed while the
	// program was built, as an internal error.
	_, err = expr.Compile(expr.StartMapping, `event.data.matches("(")`)
	requireFault(t, err, fault.InvalidExpression, "not a regular expression: error parsing regexp: missing closing )")
	p, err := expr.Compile(expr.StartPredicate, `event.data.id.matches("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")`)
	require.NoError(t, err)
	v := vars(t)
	v.Event.Data = map[string]any{"id": "5b0b3c1e-8f5a-4a53-9a57-8b1f0a3c2d11"}
	ok, err := p.EvalBool(context.Background(), v)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestConstantFoldingBounded_Issue10: the resume rule folds constant parts
// at compile, with the same size checks as evaluation and one budget for
// all its attempts, so a constant that grows without bound costs at most
// MaxBuildBytes at create (107 MB before); evaluating it is refused every
// time. (The static check does not see through constants: cel-go's cost
// model for replace has no exact size for them.)
func TestConstantFoldingBounded_Issue10(t *testing.T) {
	kb := strings.Repeat("a", 1024)
	src := `event.type == "e" && session.id == "x" && "` + kb + `".replace("", "` + kb + `").replace("", "` + kb + `") != ""`
	before := allocated()
	p, err := expr.Compile(expr.ResumePredicate, src)
	grown := allocated() - before
	require.NoError(t, err)
	if !raceEnabled { // see race_test.go: each attempt counts the 1 MiB string's runes in a []rune
		require.Less(t, grown, uint64(2*expr.MaxBuildBytes), "allocated %d bytes (107 MB before the budget)", grown)
	}
	v := vars(t)
	v.Event.Type, v.Session.ID = "e", "x"
	before = allocated()
	_, err = p.Eval(context.Background(), v)
	grown = allocated() - before
	// The first replace (1 MiB) is over MaxCost once done, the second
	// (1 GiB) is refused before it runs: whichever comes first.
	require.True(t, errors.Is(err, expr.ErrCostLimit) || errors.Is(err, expr.ErrSizeLimit), "%v", err)
	require.Less(t, grown, uint64(expr.MaxBuildBytes), "allocated %d bytes", grown)
}

// TestConstantFoldingCheap_Issue10: folding a constant part that costs
// more than a small limit gives up at once instead of running it to the
// evaluation limit on each of cel-go's hundred passes (23 s of CPU for one
// createAction before). Measured in allocations, which follow the work.
func TestConstantFoldingCheap_Issue10(t *testing.T) {
	const nest = `[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, ` +
		`[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))`
	before := allocated()
	_, err := expr.Compile(expr.ResumePredicate, `event.type == "e" && session.id == "x" && `+nest)
	grown := allocated() - before
	require.NoError(t, err)
	t.Logf("compile allocated %d bytes", grown)
	if !raceEnabled {
		require.Less(t, grown, uint64(16<<20), "allocated %d bytes", grown)
	}
}

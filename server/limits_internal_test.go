package server

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/graph"
)

// Shapes of GraphQL documents that cost a naive walk or gqlparser's
// validation far more than their size (issue 10 item 1). The fuzz target's
// seeds and the HTTP tests use the same builders.

// fragmentBomb is `query { ...F0 }` with levels fragments, each spreading
// the next twice, the last selecting leaf: 2^levels copies of leaf once
// expanded.
func fragmentBomb(op, on string, levels int, leaf string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s { ...F0 }", op)
	for i := range levels {
		fmt.Fprintf(&b, " fragment F%d on %s { ...F%d ...F%d }", i, on, i+1, i+1)
	}
	fmt.Fprintf(&b, " fragment F%d on %s { %s }", levels, on, leaf)
	return b.String()
}

// sameNameFields is k fields sharing the response name a in one set.
func sameNameFields(k int) string {
	return "{" + strings.Repeat(" a: __typename", k) + " }"
}

// sideBySideFragments spreads k distinct one-field fragments in one set.
func sideBySideFragments(k int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range k {
		fmt.Fprintf(&b, " ...F%d", i)
	}
	b.WriteString(" }")
	for i := range k {
		fmt.Fprintf(&b, " fragment F%d on Query { a%d: __typename }", i, i)
	}
	return b.String()
}

// nestedSameName is k fields a, each with m fields b below.
func nestedSameName(k, m int) string {
	one := ` a: event(id: "00000000-0000-0000-0000-000000000000") {` + strings.Repeat(" b: id", m) + " }"
	return "{ ledger {" + strings.Repeat(one, k) + " } }"
}

func schema() *ast.Schema {
	return graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}).Schema()
}

// validDoc parses and validates q as gqlgen does before the extensions run.
func validDoc(t *testing.T, q string) *ast.QueryDocument {
	t.Helper()
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: q}, MaxTokens)
	require.NoError(t, err)
	require.Empty(t, validator.ValidateWithRules(schema(), doc, validationRules()))
	return doc
}

// Issue 10 item 1: every walk that runs before execution visits a fragment
// once, whatever its expansion: a 70-level bomb (2^70 leaves) is weighed
// exactly, the complexity saturating rather than overflowing.
func TestLimitWalksAreLinearOnFragmentBombs(t *testing.T) {
	t.Parallel()
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}, Complexity: complexity()})
	for _, tc := range []struct {
		levels     int
		complexity int
	}{
		{levels: 30, complexity: 1 << 30},
		{levels: 70, complexity: math.MaxInt},
	} {
		doc := validDoc(t, fragmentBomb("query", "Query", tc.levels, "__typename"))
		op := doc.Operations[0]
		require.Equal(t, tc.complexity, operationComplexity(context.Background(), es, op, doc.Fragments, nil))
		require.Equal(t, 1, selectionDepth(op.SelectionSet, doc.Fragments))
		require.False(t, introspects(op.SelectionSet, doc.Fragments))
	}
	doc := validDoc(t, fragmentBomb("query", "Query", 70, "__schema { queryType { name } }"))
	require.True(t, introspects(doc.Operations[0].SelectionSet, doc.Fragments))
	require.Equal(t, 3, selectionDepth(doc.Operations[0].SelectionSet, doc.Fragments))

	// Under a list, the page size multiplies a saturated child without
	// wrapping round to a small or negative weight.
	doc = validDoc(t, `{ ledger { events(first: 500) { nodes { ...F0 } } } }`+
		strings.TrimPrefix(fragmentBomb("", "Event", 70, "id"), " { ...F0 }"))
	require.Equal(t, math.MaxInt, operationComplexity(context.Background(), es, doc.Operations[0], doc.Fragments, nil))
}

// Issue 10 item 8: mutation fields are counted through aliases, inline
// fragments and fragments (a fragment once per spread), __typename aside;
// a mutation bomb saturates instead of overflowing.
func TestMutationFieldsCountedThroughFragments(t *testing.T) {
	t.Parallel()
	l := &mutationLimit{}
	require.NoError(t, l.Validate(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}})))
	require.Equal(t, map[string]bool{"LedgerMutation": true, "ActionsMutation": true, "AuthMutation": true}, l.namespaces)
	for _, tc := range []struct {
		q    string
		want int
	}{
		{`mutation { ledger { __typename a: appendEvent(type: "t", data: 1) { id } b: appendEvent(type: "t", data: 2) { id } } }`, 2},
		{`mutation { ledger { ... on LedgerMutation { appendEvent(type: "t", data: 1) { id } } } x: ledger { ...W ...W } } fragment W on LedgerMutation { putValue(namespace: "n", key: "k", value: 1) { key } }`, 3},
		{`mutation { ...M } fragment M on Mutation { actions { setActionStatus(id: "00000000-0000-0000-0000-000000000000", status: ACTIVE) { id } } ledger { appendEvent(type: "t", data: 1) { id } } }`, 2},
		{fragmentBomb("mutation", "Mutation", 70, `ledger { appendEvent(type: "t", data: 1) { id } }`), math.MaxInt},
	} {
		doc := validDoc(t, tc.q)
		require.Equal(t, tc.want, mutationFields(doc.Operations[0].SelectionSet, doc.Fragments, l.namespaces), tc.q)
	}
}

// Issue 10 item 1: gqlparser's OverlappingFieldsCanBeMerged is quadratic in
// fields sharing a response name and in fragments spread side by side (an
// 80 KB document of either took it 2-3 s). validationWork refuses those
// shapes at full size, from its own bounded walk, and passes the service's
// real operations with room to spare. The log shows what validating the
// largest accepted variant of each shape costs gqlparser (measured: 1-20 ms
// on the 2-core box, from 2-3 s for the refused sizes).
func TestValidationWorkRefusesQuadraticShapes(t *testing.T) {
	t.Parallel()
	shapes := []struct {
		name           string
		refused, taken string
	}{
		{"same response name", sameNameFields(6000), sameNameFields(315)},
		{"fragments side by side", sideBySideFragments(1400), sideBySideFragments(63)},
		{"nested same names", nestedSameName(60, 60), nestedSameName(17, 17)},
		{"fragment bomb", fragmentBomb("query", "Query", 30, "__typename"), fragmentBomb("query", "Query", 4, "__typename")},
	}
	for _, s := range shapes {
		doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: s.refused}, MaxTokens)
		require.NoError(t, err, s.name)
		start := time.Now()
		require.Greater(t, validationWork(doc, MaxValidationSteps), MaxValidationSteps, s.name)
		walk := time.Since(start)

		doc, err = parser.ParseQueryWithTokenLimit(&ast.Source{Input: s.taken}, MaxTokens)
		require.NoError(t, err, s.name)
		steps := validationWork(doc, MaxValidationSteps)
		require.LessOrEqual(t, steps, MaxValidationSteps, s.name)
		start = time.Now()
		validator.ValidateWithRules(schema(), doc, validationRules())
		t.Logf("%s: refused after a %v walk; largest taken (%d steps) validates in %v", s.name, walk, steps, time.Since(start))
	}

	files, err := fs.Glob(examples.FS, "*.graphql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := fs.ReadFile(examples.FS, f)
		require.NoError(t, err)
		doc := validDoc(t, string(b))
		require.Less(t, validationWork(doc, MaxValidationSteps), 1000, f)
	}
}

// Issue 12: the stream caps' defaults: half of the connections for streams
// (256 of 512), 100 subscriptions per WebSocket; set values are kept.
func TestLiveLimitDefaults(t *testing.T) {
	t.Parallel()
	d := Limits{}.withDefaults()
	require.Equal(t, 512, d.MaxConns)
	require.Equal(t, 256, d.MaxStreams)
	require.Equal(t, MaxConnSubscriptions, d.MaxSocketSubscriptions)
	require.Equal(t, 50, Limits{MaxConns: 100}.withDefaults().MaxStreams)
	require.Equal(t, 1, Limits{MaxConns: 1}.withDefaults().MaxStreams)
	set := Limits{MaxConns: 100, MaxStreams: 7, MaxSocketSubscriptions: 3}.withDefaults()
	require.Equal(t, 7, set.MaxStreams)
	require.Equal(t, 3, set.MaxSocketSubscriptions)
}

// Issue 10 item 1 with issue 14's bulk writes: a bulk write weighs one
// node per item (at most ledger.MaxBulk), counted from the raw argument,
// whether the list comes in a variable or as a literal; a single value
// where the list is due counts as a list of one.
func TestBulkWritesWeighedByTheirItems(t *testing.T) {
	t.Parallel()
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}, Complexity: complexity()})
	records := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = map[string]any{"namespace": "acct", "key": fmt.Sprint(i), "value": map[string]any{"n": i}}
		}
		return l
	}
	const byVariable = `mutation ($r: [ValueInput!]!) { ledger { putValues(records: $r) { key version } } }`
	for _, tc := range []struct {
		name  string
		query string
		vars  map[string]any
		want  int // 1 for ledger + items × (1 + 2 leaves)
	}{
		{"variable", byVariable, map[string]any{"r": records(3)}, 1 + 3*3},
		{"over the bulk limit", byVariable, map[string]any{"r": records(1500)}, 1 + 1000*3},
		{"one value for the list", byVariable, map[string]any{"r": records(1)[0]}, 1 + 3},
		{"literal", `mutation { ledger { appendEvents(events: [{type: "a.b", data: {}}, {type: "a.c", data: 1}]) { id position } } }`, nil, 1 + 2*3},
		{"empty", `mutation { ledger { appendEvents(events: []) { id position } } }`, nil, 1 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := validDoc(t, tc.query)
			require.Equal(t, tc.want, operationComplexity(context.Background(), es, doc.Operations[0], doc.Fragments, tc.vars))
		})
	}
}

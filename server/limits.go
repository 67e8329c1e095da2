package server

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
)

// The walks below run before any field does. Each visits a fragment's
// selections once per operation however often it is spread (memo), so
// their work is linear in the document: a fragment bomb, whose expansion
// doubles with every fragment, costs them what its text does (issue 10
// item 1). gqlparser's validation runs before them and is bounded by
// validationBudget.

// limitError returns a request-level refusal carrying code.
func limitError(code, format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	err.Extensions = map[string]any{"code": code}
	return err
}

// memo computes a value per fragment once: spread returns the value of of
// over the named fragment's selections, computing it on first use. A
// fragment reached again while its own value is being computed (a cycle,
// which validation refuses) and an unknown fragment count as the zero value.
type memo[T any] struct {
	frags map[string]*ast.FragmentDefinition
	done  map[string]T
	busy  map[string]bool
	of    func(ast.SelectionSet) T
}

func newMemo[T any](frags ast.FragmentDefinitionList, of func(ast.SelectionSet) T) *memo[T] {
	return &memo[T]{frags: fragmentsByName(frags), done: map[string]T{}, busy: map[string]bool{}, of: of}
}

func (m *memo[T]) spread(name string) T {
	if v, ok := m.done[name]; ok {
		return v
	}
	var v T
	f := m.frags[name]
	if f == nil || m.busy[name] {
		return v
	}
	m.busy[name] = true
	v = m.of(f.SelectionSet)
	delete(m.busy, name)
	m.done[name] = v
	return v
}

// fragmentsByName indexes fragment definitions; the first of a name wins
// (validation refuses duplicates).
func fragmentsByName(list ast.FragmentDefinitionList) map[string]*ast.FragmentDefinition {
	m := make(map[string]*ast.FragmentDefinition, len(list))
	for _, f := range list {
		if _, ok := m[f.Name]; !ok {
			m[f.Name] = f
		}
	}
	return m
}

// satAdd and satMul are saturating: a sum or product past math.MaxInt is
// math.MaxInt, so 2^40 copies of a field cannot wrap round to a small
// complexity. Negative operands count as 0.
func satAdd(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

func satMul(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// depthLimit refuses operations nested deeper than max selections
// (DEPTH_LIMIT_EXCEEDED); a fragment counts where it is spread.
type depthLimit struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (d depthLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, oc.Doc.Fragments); depth > d.max {
		return limitError(fault.DepthLimit, "operation is nested %d levels deep; the limit is %d", depth, d.max)
	}
	return nil
}

// selectionDepth returns how deeply set's fields nest, fragments expanded.
func selectionDepth(set ast.SelectionSet, frags ast.FragmentDefinitionList) int {
	var m *memo[int]
	var depth func(ast.SelectionSet) int
	depth = func(set ast.SelectionSet) int {
		d := 0
		for _, s := range set {
			switch x := s.(type) {
			case *ast.Field:
				d = max(d, 1+depth(x.SelectionSet))
			case *ast.InlineFragment:
				d = max(d, depth(x.SelectionSet))
			case *ast.FragmentSpread:
				d = max(d, m.spread(x.Name))
			}
		}
		return d
	}
	m = newMemo(frags, depth)
	return depth(set)
}

// noIntrospection refuses operations that select __schema or __type (the
// introspection fields, valid only on the query root) when introspection is
// turned off. __typename stays available.
type noIntrospection struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = noIntrospection{}

func (noIntrospection) ExtensionName() string                   { return "NoIntrospection" }
func (noIntrospection) Validate(graphql.ExecutableSchema) error { return nil }
func (noIntrospection) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	oc.DisableIntrospection = true
	if oc.Operation == nil || !introspects(oc.Operation.SelectionSet, oc.Doc.Fragments) {
		return nil
	}
	return limitError(fault.IntrospectionDisabled, "introspection is turned off on this server")
}

// introspects reports whether a root selection set selects __schema or
// __type, directly or through fragments.
func introspects(set ast.SelectionSet, frags ast.FragmentDefinitionList) bool {
	var m *memo[bool]
	var root func(ast.SelectionSet) bool
	root = func(set ast.SelectionSet) bool {
		for _, s := range set {
			switch x := s.(type) {
			case *ast.Field:
				if x.Name == "__schema" || x.Name == "__type" {
					return true
				}
			case *ast.InlineFragment:
				if root(x.SelectionSet) {
					return true
				}
			case *ast.FragmentSpread:
				if m.spread(x.Name) {
					return true
				}
			}
		}
		return false
	}
	m = newMemo(frags, root)
	return root(set)
}

// complexityLimit refuses operations whose complexity exceeds max
// (COMPLEXITY_LIMIT_EXCEEDED). It computes what gqlgen's
// extension.FixedComplexityLimit does, with the weights of the generated
// ComplexityRoot (see complexity), but once per fragment and with
// saturating sums, so a fragment bomb is refused in microseconds instead of
// walked (issue 10 item 1).
type complexityLimit struct {
	max int
	es  graphql.ExecutableSchema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &complexityLimit{}

func (*complexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *complexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	return nil
}

func (c *complexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if n := operationComplexity(ctx, c.es, oc.Operation, oc.Doc.Fragments, oc.Variables); n > c.max {
		return limitError(fault.ComplexityLimit, "operation has complexity %d, which exceeds the limit of %d", n, c.max)
	}
	return nil
}

// bulkFields are the fields weighed by the length of a list argument
// (bulkComplexity), keyed by type and field, naming the argument. They are
// weighed from the raw argument, not through the generated Complexity,
// which would decode every item (up to ledger.MaxBulk records) into its Go
// type only to count them, and then the resolver decodes them again (issue
// 14: 5 % of a bulk write's CPU).
var bulkFields = map[[2]string]string{
	{"LedgerMutation", "appendEvents"}: "events",
	{"LedgerMutation", "putValues"}:    "records",
}

// bulkComplexity weighs a bulk write, which returns one node per item;
// more than ledger.MaxBulk items are refused by the resolver, so it
// weighs at most that many.
func bulkComplexity(childComplexity, items int) int {
	return satMul(min(max(items, 1), ledger.MaxBulk), satAdd(childComplexity, 1))
}

// operationComplexity returns op's complexity as gqlgen's complexity.Calculate
// does: a field weighs its ComplexityRoot function's answer, else 1 plus its
// children; an interface field its costliest implementation; __schema
// nothing. Fragments are weighed once each; the total saturates at
// math.MaxInt.
func operationComplexity(ctx context.Context, es graphql.ExecutableSchema, op *ast.OperationDefinition, frags ast.FragmentDefinitionList, vars map[string]any) int {
	schema := es.Schema()
	weigh := func(def *ast.Definition, field string, child int, args map[string]any) int {
		if arg, ok := bulkFields[[2]string{def.Name, field}]; ok {
			items := 1 // one value where a list is due is coerced to a list of one
			if l, ok := args[arg].([]any); ok {
				items = len(l)
			}
			return bulkComplexity(child, items)
		}
		if n, ok := es.Complexity(ctx, def.Name, field, child, args); ok && n >= 1 {
			return n
		}
		return satAdd(1, child)
	}
	var m *memo[int]
	var cost func(ast.SelectionSet) int
	cost = func(set ast.SelectionSet) int {
		total := 0
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.Definition == nil || s.ObjectDefinition == nil {
					continue
				}
				typ := schema.Types[s.Definition.Type.Name()]
				if typ == nil || typ.Name == "__Schema" {
					continue
				}
				child := 0
				switch typ.Kind {
				case ast.Object, ast.Interface, ast.Union:
					child = cost(s.SelectionSet)
				}
				args := s.ArgumentMap(vars)
				n := 0
				if s.ObjectDefinition.Kind == ast.Interface {
					for _, impl := range schema.GetPossibleTypes(s.ObjectDefinition) {
						n = max(n, weigh(impl, s.Name, child, args))
					}
				} else {
					n = weigh(s.ObjectDefinition, s.Name, child, args)
				}
				total = satAdd(total, n)
			case *ast.InlineFragment:
				total = satAdd(total, cost(s.SelectionSet))
			case *ast.FragmentSpread:
				total = satAdd(total, m.spread(s.Name))
			}
		}
		return total
	}
	m = newMemo(frags, cost)
	return cost(op.SelectionSet)
}

// mutationLimit refuses a mutation that selects more than max fields of the
// mutation namespaces (the types of the Mutation root's fields: ledger,
// actions, auth), counted through aliases, fragments and inline fragments,
// before any of them runs (MUTATION_LIMIT_EXCEEDED; issue 10 item 8). Each
// such field is a write in a transaction of its own. A fragment spread
// twice counts twice, even where GraphQL would merge the copies into one.
type mutationLimit struct {
	max        int
	namespaces map[string]bool
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &mutationLimit{}

func (*mutationLimit) ExtensionName() string { return "MutationLimit" }

func (l *mutationLimit) Validate(es graphql.ExecutableSchema) error {
	l.namespaces = map[string]bool{}
	if root := es.Schema().Mutation; root != nil {
		for _, f := range root.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				l.namespaces[f.Type.Name()] = true
			}
		}
	}
	return nil
}

func (l *mutationLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Mutation || l.max <= 0 {
		return nil
	}
	if n := mutationFields(oc.Operation.SelectionSet, oc.Doc.Fragments, l.namespaces); n > l.max {
		err := limitError(fault.MutationLimit,
			"the operation selects %d mutation fields; one request may run at most %d (send the rest in further requests)", n, l.max)
		err.Extensions["count"], err.Extensions["limit"] = n, l.max
		return err
	}
	return nil
}

// mutationFields counts the fields of the namespace types in set, fragments
// expanded; the count saturates at math.MaxInt.
func mutationFields(set ast.SelectionSet, frags ast.FragmentDefinitionList, namespaces map[string]bool) int {
	var m *memo[int]
	var count func(ast.SelectionSet) int
	count = func(set ast.SelectionSet) int {
		n := 0
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.ObjectDefinition != nil && namespaces[s.ObjectDefinition.Name] && !strings.HasPrefix(s.Name, "__") {
					n = satAdd(n, 1)
				}
				n = satAdd(n, count(s.SelectionSet))
			case *ast.InlineFragment:
				n = satAdd(n, count(s.SelectionSet))
			case *ast.FragmentSpread:
				n = satAdd(n, m.spread(s.Name))
			}
		}
		return n
	}
	m = newMemo(frags, count)
	return count(set)
}

// validationBudget refuses, before gqlparser validates it, a document whose
// validation would take more than max steps (COMPLEXITY_LIMIT_EXCEEDED). Most
// rules are linear in the document, but OverlappingFieldsCanBeMerged compares
// every pair of fields that share a response name in one selection set, and
// every pair of fragments spread in one: an 80 KB document of 6,000 aliased
// `a: __typename` fields, or of 1,400 fragments spread side by side, took it
// 2-3 s of CPU (issue 10 item 1). The check parses the document (linear) and
// estimates that work with validationWork, stopping as soon as it passes max.
// A document in gqlgen's query cache passed it before and is not checked
// again; one that does not parse is left to gqlgen, which reports why.
type validationBudget struct {
	cache  graphql.Cache[*ast.QueryDocument] // gqlgen's query cache
	tokens int                               // gqlgen's parser token limit
	max    int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = validationBudget{}

func (validationBudget) ExtensionName() string                   { return "ValidationBudget" }
func (validationBudget) Validate(graphql.ExecutableSchema) error { return nil }
func (b validationBudget) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if p.Query == "" {
		return nil
	}
	if _, ok := b.cache.Get(ctx, p.Query); ok {
		return nil
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, b.tokens)
	if err != nil {
		return nil
	}
	if validationWork(doc, b.max) > b.max {
		return limitError(fault.ComplexityLimit,
			"the operation is too large to validate: with its fragments expanded it takes more than %d steps (repeated fields and fragment spreads cost most)", b.max)
	}
	return nil
}

// fragmentPairSteps is what comparing two fragments spread in one selection
// set costs OverlappingFieldsCanBeMerged, in steps of comparing two fields:
// measured at about 25 (2.6 µs against 0.1 µs).
const fragmentPairSteps = 25

// validationWork returns an upper estimate, in steps, of the work gqlparser's
// validation does on doc, or a number above limit once it passes limit. It
// walks each operation and fragment definition with fragments expanded
// where spread (unlike gqlparser, which compares each pair of fragments
// once), charging a step per selection visited, per pair of fields with one
// response name in a merged selection set (and recursively for their
// sub-selections), and fragmentPairSteps per pair of fragment spreads whose
// fields are compared. Stopping at limit keeps its own work below limit
// steps, fragment bombs included.
func validationWork(doc *ast.QueryDocument, limit int) int {
	w := &workWalk{frags: fragmentsByName(doc.Fragments), busy: map[string]bool{}, limit: limit}
	for _, op := range doc.Operations {
		w.set(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		w.set(f.SelectionSet)
	}
	return w.steps
}

type workWalk struct {
	frags map[string]*ast.FragmentDefinition
	busy  map[string]bool // fragments being expanded: a cycle stops there
	steps int
	limit int
}

func (w *workWalk) over() bool { return w.steps > w.limit }

// flatten appends the fields of set as they merge into one response
// object, inline fragments and fragment spreads expanded, and counts the
// spreads met.
func (w *workWalk) flatten(set ast.SelectionSet, fields []*ast.Field, spreads int) ([]*ast.Field, int) {
	for _, s := range set {
		if w.over() {
			break
		}
		w.steps++
		switch x := s.(type) {
		case *ast.Field:
			fields = append(fields, x)
		case *ast.InlineFragment:
			fields, spreads = w.flatten(x.SelectionSet, fields, spreads)
		case *ast.FragmentSpread:
			spreads++
			if f := w.frags[x.Name]; f != nil && !w.busy[x.Name] {
				w.busy[x.Name] = true
				fields, spreads = w.flatten(f.SelectionSet, fields, spreads)
				delete(w.busy, x.Name)
			}
		}
	}
	return fields, spreads
}

// set charges validating one selection set: pairs within it, then each
// field's own selections.
func (w *workWalk) set(sel ast.SelectionSet) {
	fields, spreads := w.flatten(sel, nil, 0)
	w.steps = satAdd(w.steps, satMul(fragmentPairSteps, satMul(spreads, spreads-1)/2))
	for _, group := range byResponseName(fields) {
		for i := range group {
			for j := i + 1; j < len(group); j++ {
				if w.over() {
					return
				}
				w.steps++
				w.cross(group[i].SelectionSet, group[j].SelectionSet)
			}
		}
	}
	for _, f := range fields {
		if w.over() {
			return
		}
		if len(f.SelectionSet) > 0 {
			w.set(f.SelectionSet)
		}
	}
}

// cross charges comparing the sub-selections of two fields that share a
// response name.
func (w *workWalk) cross(a, b ast.SelectionSet) {
	if len(a) == 0 || len(b) == 0 || w.over() {
		return
	}
	fa, sa := w.flatten(a, nil, 0)
	fb, sb := w.flatten(b, nil, 0)
	w.steps = satAdd(w.steps, satMul(fragmentPairSteps, satMul(sa, sb)))
	named := byResponseName(fb)
	for _, f := range fa {
		for _, g := range named[responseName(f)] {
			if w.over() {
				return
			}
			w.steps++
			w.cross(f.SelectionSet, g.SelectionSet)
		}
	}
}

func responseName(f *ast.Field) string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

func byResponseName(fields []*ast.Field) map[string][]*ast.Field {
	m := make(map[string][]*ast.Field, len(fields))
	for _, f := range fields {
		n := responseName(f)
		m[n] = append(m[n], f)
	}
	return m
}

// complexity weighs list fields by their page size so one request cannot
// ask for an unbounded amount of work.
func complexity() graph.ComplexityRoot {
	var c graph.ComplexityRoot
	page := func(childComplexity int, first *int) int {
		// An out-of-range first is refused by the resolver (BAD_USER_INPUT,
		// field first), never served: weigh it as the largest page, so the
		// client learns what is wrong with it rather than a complexity total.
		n := graph.DefaultPage
		if first != nil && *first > 0 {
			n = min(*first, graph.MaxPage)
		}
		return satMul(n, satAdd(childComplexity, 1))
	}
	c.LedgerQuery.Events = func(cc int, first *int, _ *string, _ *string) int { return page(cc, first) }
	c.LedgerQuery.Values = func(cc int, _ string, first *int, _ *string) int { return page(cc, first) }
	c.ActionsQuery.Actions = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.ActionsQuery.Inbox = func(cc int, first *int, _ *string, _ *model.InterruptKind, _ *uuid.UUID) int { return page(cc, first) }
	c.Action.Sessions = func(cc int, first *int, _ *string, _ *model.SessionStatus, _ *bool) int { return page(cc, first) }
	c.Action.IntakeRecords = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.ActionSession.Turns = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.ActionSession.Inputs = func(cc int, first *int, _ *string, _ *model.InputStatus) int { return page(cc, first) }
	c.Execution.Children = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.Invocation.Transcript = func(cc int, first *int, _ *string) int { return page(cc, first) }
	// The bulk writes are weighed by operationComplexity (bulkFields).
	// a turn's inputs are bounded by maxInputs (at most 1000); weigh them as a default page
	c.ActionSessionTurn.Inputs = func(cc int) int { return satMul(graph.DefaultPage, satAdd(cc, 1)) }
	return c
}

// validationRules are gqlparser's rules plus numberLiterals.
func validationRules() *rules.Rules {
	r := rules.NewDefaultRules()
	r.AddRule("NumberLiteralsInRange", numberLiterals)
	return r
}

// numberLiterals refuses Int and Float literals that do not fit int64 and
// float64. gqlparser converts literals to those types when it reads
// arguments and panics when one overflows; its own validation range-checks
// only Int arguments, not literals inside a JSON argument. Large numbers keep
// their exact value when sent in variables.
func numberLiterals(observers *core.Events, addError core.AddErrFunc) {
	observers.OnValue(func(_ *core.Walker, v *ast.Value) {
		var err error
		switch v.Kind {
		case ast.IntValue:
			_, err = strconv.ParseInt(v.Raw, 10, 64)
		case ast.FloatValue:
			_, err = strconv.ParseFloat(v.Raw, 64)
		default:
			return
		}
		if err != nil {
			addError(core.Message("the number %s is out of range for a literal; send it in a variable to keep its exact value", v.Raw), core.At(v.Position))
		}
	})
}

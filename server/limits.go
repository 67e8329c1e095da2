package server

import (
	"context"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// depthLimit refuses operations nested deeper than max selections.
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
	if depth := selectionDepth(oc.Operation.SelectionSet, oc.Doc.Fragments, 0); depth > d.max {
		err := gqlerror.Errorf("operation is nested %d levels deep; the limit is %d", depth, d.max)
		err.Extensions = map[string]any{"code": "DEPTH_LIMIT_EXCEEDED"}
		return err
	}
	return nil
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
	if oc.Operation == nil || !introspects(oc.Operation.SelectionSet, oc.Doc.Fragments, 0) {
		return nil
	}
	err := gqlerror.Errorf("introspection is turned off on this server")
	err.Extensions = map[string]any{"code": fault.IntrospectionDisabled}
	return err
}

// introspects reports whether a root selection set selects __schema or __type.
func introspects(set ast.SelectionSet, frags ast.FragmentDefinitionList, seen int) bool {
	if seen > 100 {
		return false // fragment cycles are rejected by validation
	}
	for _, s := range set {
		switch x := s.(type) {
		case *ast.Field:
			if x.Name == "__schema" || x.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if introspects(x.SelectionSet, frags, seen+1) {
				return true
			}
		case *ast.FragmentSpread:
			if f := frags.ForName(x.Name); f != nil && introspects(f.SelectionSet, frags, seen+1) {
				return true
			}
		}
	}
	return false
}

func selectionDepth(set ast.SelectionSet, frags ast.FragmentDefinitionList, seen int) int {
	if seen > 100 {
		return seen // fragment cycles are rejected by validation; stop anyway
	}
	max := 0
	for _, s := range set {
		var d int
		switch x := s.(type) {
		case *ast.Field:
			if len(x.SelectionSet) == 0 {
				d = 1
			} else {
				d = 1 + selectionDepth(x.SelectionSet, frags, seen+1)
			}
		case *ast.InlineFragment:
			d = selectionDepth(x.SelectionSet, frags, seen+1)
		case *ast.FragmentSpread:
			if f := frags.ForName(x.Name); f != nil {
				d = selectionDepth(f.SelectionSet, frags, seen+1)
			}
		}
		if d > max {
			max = d
		}
	}
	return max
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
		return n * (childComplexity + 1)
	}
	c.LedgerQuery.Events = func(cc int, first *int, _ *string, _ *string) int { return page(cc, first) }
	c.LedgerQuery.Values = func(cc int, _ string, first *int, _ *string) int { return page(cc, first) }
	c.ActionsQuery.Actions = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.Action.Sessions = func(cc int, first *int, _ *string, _ *model.SessionStatus) int { return page(cc, first) }
	c.Action.IntakeRecords = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.ActionSession.Turns = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.ActionSession.Inputs = func(cc int, first *int, _ *string, _ *model.InputStatus) int { return page(cc, first) }
	c.Execution.Children = func(cc int, first *int, _ *string) int { return page(cc, first) }
	c.Invocation.Transcript = func(cc int, first *int, _ *string) int { return page(cc, first) }
	// a turn's inputs are bounded by maxInputs (at most 1000); weigh them as a default page
	c.ActionSessionTurn.Inputs = func(cc int) int { return graph.DefaultPage * (cc + 1) }
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

package expr

import (
	"fmt"
	"math"
	"regexp/syntax"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Static cost check (issue 10 item 3). Compile estimates, with cel-go's
// cost estimator, what an expression costs on the largest data it can be
// given, and refuses it when the estimate shows that it cannot work:
//
//   - every evaluation costs more than MaxCost (a nest of comprehensions
//     over constant lists): it fails whatever the data;
//   - on the largest data it costs more than MaxCost, and its cost grows
//     faster than the data: more than growthLimit times the cost on data
//     growthStep times smaller. A cost proportional to the data grows
//     growthStep times; one that grows with the square of the data
//     (replace with an empty pattern, a loop inside a loop over the data, a
//     regular expression taken from the data) up to growthStep² times, and
//     fails on events of a few tens of kilobytes.
//
// The largest data is a value of jsonvalue.MaxBytes (1 MiB): event.data,
// session.input and tool.input, and every string, list and map read from
// them, are taken to be that large. Elements reached by iterating (the i of
// event.data.items.exists(i, ...)) are taken as small (elemHint): the
// estimator cannot know that a list's elements share its megabyte, and
// pricing each as a megabyte would make every pass over an event list look
// quadratic. So the estimate covers one long string, one long list of short
// values, and loops over one that read another
// (items.exists(i, text.contains(i)), refused).
//
// An expression whose cost is proportional to the data is accepted even if
// the largest data would take it over MaxCost: such an evaluation alone is
// refused at run time (a trigger diagnostic or intake record). Whatever the
// estimate misses stays bounded at run time by MaxCost and MaxBuildBytes.
const (
	// maxDataBytes is the largest event.data, session.input or tool.input.
	maxDataBytes = jsonvalue.MaxBytes
	// elemHint is the size given to values reached by iteration.
	elemHint = 8
	// growthStep and growthLimit: the estimate on maxDataBytes may be at
	// most growthLimit times the estimate on maxDataBytes/growthStep.
	growthStep  = 32
	growthLimit = 2 * growthStep
)

// sizeHints tells cel-go's cost estimator how large the data read by an
// expression can be: up to max bytes.
type sizeHints struct{ max uint64 }

// EstimateCallCost sizes an index step into the data (event.data["s"],
// event.data.items[0]) like a field selection: as large as the data, not as
// a (small) element. Everything else is left to cel-go's cost models.
func (h sizeHints) EstimateCallCost(function, _ string, _ *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	if (function != operators.Index && function != operators.OptIndex) || len(args) != 2 {
		return nil
	}
	if root, iter := reach(args[0]); !root || iter {
		return nil
	}
	elem := cost.SizeEstimate{Max: elemHint}
	size := cost.SizeEstimate{Max: h.max, Key: &elem, Elem: &elem}
	return &cost.CallEstimate{CostEstimate: cost.FixedCostEstimate(1), ResultSize: &size}
}

func (h sizeHints) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if t := n.Type(); t != nil {
		switch t.Kind() {
		case types.StringKind, types.BytesKind, types.ListKind, types.MapKind, types.DynKind, types.AnyKind:
		default:
			return nil
		}
	}
	elem := cost.SizeEstimate{Max: elemHint}
	if _, iter := reach(n); iter {
		return &cost.SizeEstimate{Max: elemHint, Key: &elem, Elem: &elem}
	}
	// Anything else whose size cel-go cannot derive is as large as the
	// data: the data itself, and values computed from it (a call's result
	// of type dyn, a conversion, ...).
	return &cost.SizeEstimate{Max: h.max, Key: &elem, Elem: &elem}
}

// reach tells whether n reads a variable of the role (root) and whether it
// is reached through a comprehension variable (iterated): the estimator's
// path starts at a variable and has an @items, @keys, @values or @indices
// step; where index steps (event.data["s"]) lost the path, n's selections
// and index steps lead to a variable of the role, or to another identifier
// (a comprehension variable).
func reach(n cost.AstNode) (root, iterated bool) {
	if path := n.Path(); len(path) > 0 {
		for _, p := range path[1:] {
			if strings.HasPrefix(p, "@") {
				return true, true
			}
		}
		return isVar(path[0]), false
	}
	if n.Expr() == nil {
		return false, false
	}
	for e := n.Expr(); ; {
		switch e.Kind() {
		case ast.SelectKind:
			e = e.AsSelect().Operand()
			continue
		case ast.CallKind:
			c := e.AsCall()
			switch c.FunctionName() {
			case operators.Index, operators.OptIndex, operators.OptSelect:
				if len(c.Args()) == 2 {
					e = c.Args()[0]
					continue
				}
			}
		case ast.IdentKind:
			if isVar(e.AsIdent()) {
				return true, false
			}
			return true, true
		}
		return false, false
	}
}

func isVar(name string) bool {
	return name == varEvent || name == varSession || name == varTool || name == varRequest
}

// checkCost applies the static cost check to a checked expression.
func checkCost(env *cel.Env, spec roleSpec, checked *cel.Ast) error {
	large, err := env.EstimateCost(checked, sizeHints{max: maxDataBytes})
	if err != nil {
		return fault.New(fault.InvalidExpression, "", "the cost of this expression cannot be estimated: %v", err)
	}
	if large.Min > MaxCost {
		return fault.New(fault.InvalidExpression, "",
			"every evaluation of this expression costs at least %d units; the limit is %d", large.Min, MaxCost)
	}
	if large.Max <= MaxCost {
		return nil
	}
	small, err := env.EstimateCost(checked, sizeHints{max: maxDataBytes / growthStep})
	if err != nil {
		return fault.New(fault.InvalidExpression, "", "the cost of this expression cannot be estimated: %v", err)
	}
	if large.Max/growthLimit > small.Max || large.Max >= unbounded {
		return fault.New(fault.InvalidExpression, "",
			"on the largest %s (%d bytes) this expression may cost %s, on one of %d bytes %s: "+
				"its cost grows faster than the data (as with replace(\"\", ...), a loop inside a loop over the data, "+
				"or a regular expression taken from the data); the limit of one evaluation is %d units",
			spec.data(), maxDataBytes, costUnits(large.Max), maxDataBytes/growthStep, costUnits(small.Max), MaxCost)
	}
	return nil
}

// checkRegexes refuses a regular expression written in the expression that
// does not parse or would compile beyond MaxRegexInsts: programs compile
// such constants when they are built, at create.
func checkRegexes(e ast.Expr) error {
	var found error
	visit := ast.NewExprVisitor(func(e ast.Expr) {
		if found != nil || e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		if c.FunctionName() != "matches" {
			return
		}
		args := c.Args()
		if c.IsMemberFunction() {
			args = append([]ast.Expr{c.Target()}, args...)
		}
		if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
			return
		}
		if p, ok := args[1].AsLiteral().(types.String); ok {
			if _, err := syntax.Parse(string(p), syntax.Perl); err != nil {
				found = fault.New(fault.InvalidExpression, "", "not a regular expression: %v", err)
			} else if _, err := regexInsts(string(p)); err != nil {
				found = fault.New(fault.InvalidExpression, "", "%v", err)
			}
		}
	})
	ast.PostOrderVisit(e, visit)
	return found
}

// unbounded is where the cost estimator's figures stop meaning units: an
// estimate this large has no bound.
const unbounded = math.MaxUint64 / 2

// costUnits is an estimated cost for a message: the units, or that it has
// no bound (the estimator's ceiling).
func costUnits(n uint64) string {
	if n >= unbounded {
		return "without bound"
	}
	return fmt.Sprintf("%d units", n)
}

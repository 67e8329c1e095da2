package expr

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// resumeHint is the message for a resume predicate that does not constrain
// the events it selects.
const resumeHint = "a resume predicate must constrain the events it selects: " +
	`add a condition on event fields alone, joined to the rest with &&, such as event.type == "..." ` +
	"(a condition that also reads session, or that is always true, does not count)"

// ValidateResumeConstraint applies the SPEC A3 rule that a resume predicate
// must constrain the events it selects through event fields, so that it can
// never select every event. Split at top-level && into conjuncts, the
// predicate needs at least one conjunct that reads event, does not read
// session, and is not constant once constant parts are folded (so
// `event.type == "a" || true` does not count).
//
// Compile applies this rule to every ResumePredicate, so a compiled resume
// predicate always passes; the function is exported to check other
// predicates against the same rule. It returns a *fault.Error with code
// fault.InvalidAction that says how to fix the predicate.
func ValidateResumeConstraint(p *Program) error {
	all, err := envs()
	if err != nil {
		return err
	}
	_, err = resumeConstraint(all[p.role], p.ast)
	return err
}

// Folding evaluates constant parts at create, and cel-go retries a fold
// that fails on each of its passes: the evaluations are kept small so that
// validating a definition stays cheap whatever its constants.
const (
	// maxFoldCost is the cost limit of one folding evaluation; a constant
	// part that costs more is left unfolded (judged as written).
	maxFoldCost = 10_000
	// maxFoldPasses bounds cel-go's folding passes.
	maxFoldPasses = 10
	// maxFoldCalls bounds the function calls of all the evaluations of
	// one fold (every pass, every constant part): past it each folding
	// evaluation gives up at its first call. A few milliseconds of CPU.
	maxFoldCalls = 50_000
)

// foldLib gives folding programs their lower cost limit and the call
// counter of one fold.
type foldLib struct{ calls *foldCalls }

func (foldLib) LibraryName() string             { return "actionsledger.fold" }
func (foldLib) CompileOptions() []cel.EnvOption { return nil }
func (l foldLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostLimit(maxFoldCost), cel.CostTracking(l.calls)}
}

// foldCalls counts the calls of one fold's evaluations (cel-go evaluates
// on another goroutine, hence atomic). Past maxFoldCalls it prices every
// call over maxFoldCost, which stops the evaluation.
type foldCalls struct{ n atomic.Int64 }

var overFoldCost = uint64(maxFoldCost + 1)

// CallCost implements cost.ActualCostEstimator; nil keeps cel-go's price.
func (c *foldCalls) CallCost(_, _ string, _ []ref.Val, _ ref.Val) *uint64 {
	if c.n.Add(1) > maxFoldCalls {
		return &overFoldCost
	}
	return nil
}

// foldEnvs holds, per role environment, a pool of its extensions for
// folding, each with its own call counter (one fold at a time uses one).
var foldEnvs sync.Map // *cel.Env -> *sync.Pool of *foldEnv

type foldEnv struct {
	env   *cel.Env
	calls *foldCalls
}

// takeFoldEnv returns a folding extension of env with its counter at 0;
// give it back with foldEnvPool(env).Put.
func takeFoldEnv(env *cel.Env) (*foldEnv, *sync.Pool, error) {
	v, _ := foldEnvs.LoadOrStore(env, &sync.Pool{})
	pool := v.(*sync.Pool)
	if fe, ok := pool.Get().(*foldEnv); ok {
		fe.calls.n.Store(0)
		return fe, pool, nil
	}
	calls := &foldCalls{}
	e, err := env.Extend(cel.Lib(foldLib{calls}))
	if err != nil {
		return nil, nil, err
	}
	return &foldEnv{env: e, calls: calls}, pool, nil
}

// resumeConstraint applies the rule of ValidateResumeConstraint and returns
// the folded AST it judged (checked itself when folding failed).
func resumeConstraint(env *cel.Env, checked *cel.Ast) (*cel.Ast, error) {
	folded, err := fold(env, checked)
	if err != nil {
		// Folding evaluates the constant parts, and one of them fails as
		// a whole; judge the expression as written.
		folded = checked
	}
	for _, c := range conjuncts(folded.NativeRep().Expr(), nil) {
		r := reads(c)
		if r[varEvent] && !r[varSession] {
			return folded, nil
		}
	}
	return folded, &fault.Error{Code: fault.InvalidAction, Message: resumeHint, Err: errors.New("no event-only conjunct")}
}

// conjuncts splits e at top-level && operators.
func conjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if e.Kind() == ast.CallKind {
		if c := e.AsCall(); c.FunctionName() == operators.LogicalAnd {
			for _, a := range c.Args() {
				out = conjuncts(a, out)
			}
			return out
		}
	}
	return append(out, e)
}

// reads returns the role variables e reads. It runs on checked (or folded)
// expressions, which already passed scan.
func reads(e ast.Expr) map[string]bool {
	found := map[string]bool{}
	var visit func(e ast.Expr, b bound)
	visit = func(e ast.Expr, b bound) {
		switch e.Kind() {
		case ast.IdentKind:
			if isRoot(e.AsIdent(), b) {
				found[e.AsIdent()] = true
			}
		case ast.SelectKind:
			visit(e.AsSelect().Operand(), b)
		case ast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				visit(c.Target(), b)
			}
			for _, a := range c.Args() {
				visit(a, b)
			}
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				visit(el, b)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				visit(en.AsMapEntry().Key(), b)
				visit(en.AsMapEntry().Value(), b)
			}
		case ast.ComprehensionKind:
			c := e.AsComprehension()
			visit(c.IterRange(), b)
			visit(c.AccuInit(), b)
			names := []string{c.IterVar(), c.AccuVar()}
			if c.HasIterVar2() {
				names = append(names, c.IterVar2())
			}
			inner := b.with(names...)
			visit(c.LoopCondition(), inner)
			visit(c.LoopStep(), inner)
			visit(c.Result(), inner)
		}
	}
	visit(e, nil)
	return found
}

// pinnedTypes finds the event types that top-level conjuncts pin (see
// Program.EventTypes).
func pinnedTypes(e ast.Expr) ([]string, bool) {
	var out []string
	pinned := false
	for _, c := range conjuncts(e, nil) {
		ts, ok := pinsType(c)
		if !ok {
			continue
		}
		if !pinned {
			out, pinned = dedupe(ts), true
			continue
		}
		out = slices.DeleteFunc(out, func(t string) bool { return !slices.Contains(ts, t) })
	}
	return out, pinned
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// pinsType matches event.type == "x", "x" == event.type and
// event.type in ["x", ...].
func pinsType(e ast.Expr) ([]string, bool) {
	if e.Kind() != ast.CallKind {
		return nil, false
	}
	c := e.AsCall()
	args := c.Args()
	if c.IsMemberFunction() || len(args) != 2 {
		return nil, false
	}
	switch c.FunctionName() {
	case operators.Equals:
		for i := range 2 {
			if isEventType(args[i]) {
				if s, ok := stringLit(args[1-i]); ok {
					return []string{s}, true
				}
			}
		}
	case operators.In:
		if !isEventType(args[0]) || args[1].Kind() != ast.ListKind {
			return nil, false
		}
		var out []string
		for _, el := range args[1].AsList().Elements() {
			s, ok := stringLit(el)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

func isEventType(e ast.Expr) bool {
	if e.Kind() != ast.SelectKind {
		return false
	}
	s := e.AsSelect()
	op := s.Operand()
	return !s.IsTestOnly() && s.FieldName() == "type" && op.Kind() == ast.IdentKind && op.AsIdent() == varEvent
}

func stringLit(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// budgetOnly is an activation with a size budget and no variables.
type budgetOnly struct{ b *budget }

func (a budgetOnly) ResolveName(name string) (any, bool) {
	if name == budgetVar {
		return a.b, true
	}
	return nil, false
}

func (budgetOnly) Parent() interpreter.Activation { return nil }

package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Const is what an expression gives whatever its variables hold: one that,
// once its constant parts are folded, reads none of event, session, tool
// and request (see Program.Constant).
type Const struct {
	// Value is the result as Eval returns it (nil when Err is set).
	Value any
	// Err is the error every evaluation of the expression gives (a
	// division by zero, an index out of range, a failed conversion, a
	// result JSON cannot represent, ErrCostLimit, ErrSizeLimit), or nil.
	Err error
}

// constantState caches what folding a Program's constant parts found. It is
// computed once, on the first call of Constant or NeverTrue, so loading a
// stored definition (which asks neither) never folds.
type constantState struct {
	constOnce sync.Once
	folded    *cel.Ast // the checked AST with constant parts folded; the checked AST when folding failed
	konst     Const
	isConst   bool
	spent     uint64 // cost units evaluateClosed has used, up to maxClosedCost
	neverWhy  string // NeverTrue's
	never     bool
	fails     error // Fails'
	offset    time.Duration
	hasOffset bool // StartOffset's
}

// maxClosedCost bounds the cost of all the evaluations of constant parts
// of one Program (the whole expression, or each condition of a predicate)
// at MaxCost, about 50 ms of CPU; parts left when it is spent are
// not judged.
const maxClosedCost = MaxCost

// errUnjudged stops judging once maxClosedCost is spent.
var errUnjudged = errors.New("expr: constant evaluation budget spent")

// Constant tells whether the expression reads nothing from its variables
// once constant parts are folded (`1 + 2`, `string(1 / 0)`,
// `false ? event.id : "x"`), and if so what every evaluation gives. ok is
// false for anything that reads a variable where it may matter: such an
// expression is never judged here. Issue 10: an expression that fails
// whatever it reads is refused at create.
//
// Folding runs each constant part under a cost limit of 10,000 units
// (maxFoldCost), at most 10 passes, with the size budget of one evaluation
// (MaxBuildBytes); what is left is evaluated once under MaxCost, as Eval
// would. The work is bounded by the expression's checked cost, which
// Compile keeps under MaxCost.
func (p *Program) Constant() (k Const, ok bool) {
	p.constOnce.Do(p.foldConstants)
	return p.konst, p.isConst
}

// NeverTrue tells whether a predicate (StartPredicate, ResumePredicate) is
// true for no event and no session: it, or one of its conditions joined
// with && at the top level, is false or fails whatever it reads, once
// constant parts are folded; a condition joined with || counts when every
// alternative does. why says which condition and how, for users. A
// predicate any part of which reads event or session where it may matter
// is never reported. For other roles never is false.
func (p *Program) NeverTrue() (why string, never bool) {
	p.constOnce.Do(p.foldConstants)
	return p.neverWhy, p.never
}

// neverTrueAll is NeverTrue's work, done once.
func (p *Program) neverTrueAll() (why string, never bool) {
	if p.role != StartPredicate && p.role != ResumePredicate {
		return "", false
	}
	root := p.folded.NativeRep().Expr()
	cs := conjuncts(root, nil)
	for i, c := range cs {
		if why, never := p.neverTrue(c); never {
			if len(cs) == 1 {
				return "it " + why, true
			}
			return fmt.Sprintf("its condition %s %s", p.where(i, len(cs), c), why), true
		}
	}
	return "", false
}

// neverTrue judges one condition of a predicate (see NeverTrue).
func (p *Program) neverTrue(e ast.Expr) (string, bool) {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.LogicalOr {
		for _, d := range disjuncts(e, nil) {
			if _, never := p.neverTrue(d); !never {
				return "", false
			}
		}
		return "is false or fails whatever the event, in every alternative", true
	}
	if len(reads(e)) > 0 {
		if err := p.strictFailure(e); err != nil {
			return "fails whatever the event: " + err.Error(), true
		}
		return "", false
	}
	v, err := p.evalClosed(e)
	if errors.Is(err, errUnjudged) {
		return "", false
	}
	if err != nil {
		return "fails whatever the event: " + err.Error(), true
	}
	if v == types.False {
		return "is false whatever the event", true
	}
	return "", false
}

// Fails returns the error every evaluation of the expression gives, or nil
// when some evaluation may succeed as far as folding shows: the whole
// expression is constant and fails (see Constant), or a constant part that
// every evaluation runs fails (`string(event.data.n) + string(1 / 0)`,
// `session.started_at + duration(string(1 / 0))`). A part runs on every
// evaluation when nothing may skip it: an argument of a function other
// than &&, ||, ?: (whose condition does run), or and orValue (whose target
// does), an operand of a field selection, an element of a list or map
// literal, the range and initial value of a comprehension. Issue 10: such
// an expression is refused at create. For predicates Fails is nil unless
// the whole predicate is constant: NeverTrue judges them.
func (p *Program) Fails() error {
	p.constOnce.Do(p.foldConstants)
	return p.fails
}

// strictFailure returns the error of the first constant part of e that
// every evaluation of e runs and that fails, or nil. Parts are evaluated
// within maxClosedCost; what is left then is not judged.
func (p *Program) strictFailure(e ast.Expr) error {
	if len(reads(e)) == 0 {
		if e.Kind() == ast.LiteralKind {
			return nil
		}
		if _, err := p.evalClosed(e); err != nil && !errors.Is(err, errUnjudged) {
			return err
		}
		return nil
	}
	var strict []ast.Expr
	switch e.Kind() {
	case ast.SelectKind:
		strict = append(strict, e.AsSelect().Operand())
	case ast.CallKind:
		c := e.AsCall()
		switch c.FunctionName() {
		case operators.LogicalAnd, operators.LogicalOr, operators.NotStrictlyFalse, operators.OldNotStrictlyFalse:
		case operators.Conditional:
			strict = append(strict, c.Args()[0])
		case "or", "orValue":
			if c.IsMemberFunction() {
				strict = append(strict, c.Target())
			}
		default:
			if c.IsMemberFunction() {
				strict = append(strict, c.Target())
			}
			strict = append(strict, c.Args()...)
		}
	case ast.ListKind:
		l := e.AsList()
		for i, el := range l.Elements() {
			if !l.IsOptional(int32(i)) {
				strict = append(strict, el)
			}
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			if !me.IsOptional() {
				strict = append(strict, me.Key(), me.Value())
			}
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		strict = append(strict, c.IterRange(), c.AccuInit())
	}
	for _, s := range strict {
		if err := p.strictFailure(s); err != nil {
			return err
		}
	}
	return nil
}

// disjuncts splits e at top-level || operators.
func disjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if e.Kind() == ast.CallKind {
		if c := e.AsCall(); c.FunctionName() == operators.LogicalOr {
			for _, a := range c.Args() {
				out = disjuncts(a, out)
			}
			return out
		}
	}
	return append(out, e)
}

// where names a condition for users: its place among the conditions and,
// when the folded node keeps its position in the source, line and column.
func (p *Program) where(i, n int, e ast.Expr) string {
	return fmt.Sprintf("%d of %d joined with &&%s", i+1, n, p.at(e.ID()))
}

// foldConstants fills constantState: it folds, then judges the whole
// expression (Constant), its conditions (NeverTrue), its strict constant
// parts (Fails) and its offset from the start (StartOffset), all within one
// maxClosedCost. Program is shared between goroutines, so everything that
// evaluates happens here, once.
func (p *Program) foldConstants() {
	if p.folded == nil { // a resume predicate's was folded by Compile
		p.folded = p.ast
		if f, err := fold(p.env, p.ast); err == nil {
			p.folded = f
		}
	}
	p.konst, p.isConst = p.constant()
	p.neverWhy, p.never = p.neverTrueAll()
	switch {
	case p.isConst:
		p.fails = p.konst.Err
	case p.role != StartPredicate && p.role != ResumePredicate:
		p.fails = p.strictFailure(p.folded.NativeRep().Expr())
	}
	p.offset, p.hasOffset = p.startOffset()
}

// constant is Constant's work, done once.
func (p *Program) constant() (Const, bool) {
	root := p.folded.NativeRep().Expr()
	if len(reads(root)) > 0 {
		return Const{}, false
	}
	v, err := p.evalClosed(root)
	if errors.Is(err, errUnjudged) {
		return Const{}, false
	}
	if err != nil {
		return Const{Err: err}, true
	}
	left := int64(MaxResultBytes)
	out, err := toJSON(v, &left)
	if err != nil {
		return Const{Err: err}, true
	}
	return Const{Value: out}, true
}

// evalClosed evaluates a node of the folded AST that reads no variable,
// under the limits of Eval.
func (p *Program) evalClosed(e ast.Expr) (ref.Val, error) {
	if e.Kind() == ast.LiteralKind {
		return e.AsLiteral(), nil
	}
	folded := p.folded.NativeRep()
	sub := ast.NewCheckedAST(ast.NewAST(e, folded.SourceInfo()), folded.TypeMap(), folded.ReferenceMap())
	pb, err := ast.ToProto(sub)
	if err != nil {
		return nil, fmt.Errorf("expr: constant part: %w", err)
	}
	if p.spent >= maxClosedCost {
		return nil, errUnjudged
	}
	prg, err := p.env.Program(cel.CheckedExprToAst(pb),
		cel.CostLimit(MaxCost),
		cel.InterruptCheckFrequency(interruptEvery),
	)
	if err != nil {
		return nil, err
	}
	b := newBudget()
	out, det, err := prg.ContextEval(context.Background(), budgetOnly{b})
	if c := det.ActualCost(); c != nil {
		p.spent += *c
	} else {
		p.spent += MaxCost
	}
	if err != nil {
		return nil, p.evalError(context.Background(), err, b)
	}
	if types.IsError(out) {
		return nil, errors.New(out.(*types.Err).Error())
	}
	return out, nil
}

// fold returns checked with its constant parts folded (cel-go's constant
// folding optimizer), each folding evaluation under maxFoldCost and all of
// them under one size budget and maxFoldCalls calls in all, at most
// maxFoldPasses passes. A part whose
// evaluation fails or costs more is left as written. The error is cel-go's
// when folding fails as a whole.
func fold(env *cel.Env, checked *cel.Ast) (*cel.Ast, error) {
	fe, pool, err := takeFoldEnv(env)
	if err != nil {
		return nil, err
	}
	defer pool.Put(fe)
	return foldWith(fe, checked)
}

// foldWith is fold with the folding extension given.
func foldWith(fe *foldEnv, checked *cel.Ast) (*cel.Ast, error) {
	folder, err := cel.NewConstantFoldingOptimizer(
		cel.FoldKnownValues(budgetOnly{newBudget()}),
		cel.MaxConstantFoldIterations(maxFoldPasses))
	if err != nil {
		return nil, err
	}
	opt, err := cel.NewStaticOptimizer(folder)
	if err != nil {
		return nil, err
	}
	folded, iss := opt.Optimize(fe.env, checked)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return folded, nil
}

// StartOffset tells whether an end (Ends) is, once constant parts are
// folded, session.started_at moved by a constant duration
// (`session.started_at + duration('720h')`, `session.started_at`,
// `duration('-1h') + session.started_at`, `session.started_at - x` with x
// constant), and if so by how much (negative: before the start). Issue 10:
// an end at or before the start is refused at create.
func (p *Program) StartOffset() (d time.Duration, ok bool) {
	p.constOnce.Do(p.foldConstants)
	return p.offset, p.hasOffset
}

// startOffset is StartOffset's work, done once.
func (p *Program) startOffset() (d time.Duration, ok bool) {
	if p.role != Ends {
		return 0, false
	}
	root := p.folded.NativeRep().Expr()
	if isStartedAt(root) {
		return 0, true
	}
	if root.Kind() != ast.CallKind {
		return 0, false
	}
	c := root.AsCall()
	args := c.Args()
	if c.IsMemberFunction() || len(args) != 2 {
		return 0, false
	}
	var off ast.Expr
	sign := time.Duration(1)
	switch {
	case c.FunctionName() == operators.Add && isStartedAt(args[0]):
		off = args[1]
	case c.FunctionName() == operators.Add && isStartedAt(args[1]):
		off = args[0]
	case c.FunctionName() == operators.Subtract && isStartedAt(args[0]):
		off, sign = args[1], -1
	default:
		return 0, false
	}
	if len(reads(off)) > 0 {
		return 0, false
	}
	v, err := p.evalClosed(off)
	if err != nil {
		return 0, false
	}
	dv, isDur := v.(types.Duration)
	if !isDur || (sign < 0 && dv.Duration == math.MinInt64) {
		return 0, false
	}
	return sign * dv.Duration, true
}

// isStartedAt matches session.started_at.
func isStartedAt(e ast.Expr) bool {
	if e.Kind() != ast.SelectKind {
		return false
	}
	s := e.AsSelect()
	op := s.Operand()
	return !s.IsTestOnly() && s.FieldName() == "started_at" && op.Kind() == ast.IdentKind && op.AsIdent() == varSession
}

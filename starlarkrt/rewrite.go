package starlarkrt

import (
	"fmt"

	"go.starlark.net/syntax"
)

// starlark-go evaluates x + y, x * y and x % y inside its interpreter,
// with no hook: "x" * (1 << 29) builds half a gigabyte and [0] * (1 << 29)
// eight, in one step, and repeated doubling (s = s + s) gets there in a
// few dozen steps. It also builds literals, comprehensions, slices and
// closures, and stores into lists and dicts, without telling anyone, so
// nothing could count the memory a script takes (issue 10 item 2). So
// before resolving, the syntax tree is rewritten so that these go through
// hidden builtins that check sizes (guard.go) and charge the call's memory
// budget (memory.go):
//
//	x + y           =>  +(x, y)           (likewise *, %, | and <<)
//	x += y          =>  x += op=(y)       (likewise *= and |=; see augOperand)
//	x %= y          =>  x = %(x, y)       (only for a plain name; likewise <<=)
//	x.join          =>  .join(x)          (a guarded method as a value)
//	x.append(v)     =>  .append()(x, v)   (a guarded method called)
//	[a, b]          =>  <new>([a, b])     (likewise tuples, dicts, lambdas)
//	def g(): ...    =>  def g(): ...; <new>(g)   (a def inside a block)
//	[e for x in y]  =>  <comp>([<elem>(e) for x in y])
//	{k: v for ...}  =>  <comp>({k: <entry>(v) for ...})
//	x[a:b]          =>  <slice>(x)[a:b]   (see sliceOperand)
//	x[k] = v        =>  <setitem>(v, x, k)  (the statement; same order of evaluation)
//	a, x[k] = ...   =>  a, <set>(x)[k] = ...  (any other target; see setTarget)
//	f(*a, **kw)     =>  f(*<spread>(a), **<spread>(kw))
//
// The builtins' names are not Starlark identifiers, so scripts can neither
// call nor shadow them. Each call is placed at the operator's position, so
// errors and backtraces point where they did before; evaluation order is
// unchanged. An operator with a number literal operand that cannot build a
// large value (i + 1, n += 1, x % 2, x * 0.5, 1 << n) is left alone: the
// guards cost a builtin call each, which makes an arithmetic loop about two
// and a half times slower (BenchmarkGuardedArithmetic against
// BenchmarkPlainArithmetic), and one or two extra steps of the step budget.
const (
	opAdd    = "+"
	opMul    = "*"
	opMod    = "%"
	opPipe   = "|"
	opShift  = "<<"
	opAug    = "op="
	opNew    = "<new>"
	opElem   = "<elem>"
	opEntry  = "<entry>"
	opComp   = "<comp>"
	opSlice  = "<slice>"
	opSet    = "<set>"
	opSetItm = "<setitem>"
	opSpread = "<spread>"
)

// guardedMethods are the methods routed through a guard (see
// methodGuards): those that build a value or grow their receiver.
var guardedMethods = map[string]bool{
	"join": true, "replace": true, "format": true, "extend": true,
	"append": true, "insert": true, "update": true, "setdefault": true,
	"items": true, "keys": true, "values": true, "popitem": true,
	"upper": true, "lower": true, "title": true, "capitalize": true,
	"split": true, "rsplit": true, "splitlines": true, "partition": true, "rpartition": true,
}

// methodName is the hidden builtin for x.name as a value; callName for
// x.name(...) called at once.
func methodName(name string) string { return "." + name }
func callName(name string) string   { return "." + name + "()" }

type rewriter struct {
	err error
}

// rewriteFile rewrites f in place. It fails (with a *compileError) only
// for %= or <<= on something other than a plain name.
func rewriteFile(f *syntax.File) error {
	r := &rewriter{}
	f.Stmts = r.stmts(f.Stmts, false)
	return r.err
}

func hidden(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{
		Fn:     &syntax.Ident{NamePos: pos, Name: name},
		Lparen: pos,
		Args:   args,
		Rparen: pos,
	}
}

func start(e syntax.Expr) syntax.Position {
	pos, _ := e.Span()
	return pos
}

// stmts rewrites a block; nested is false only for the file's top level,
// whose def statements run once per call.
func (r *rewriter) stmts(stmts []syntax.Stmt, nested bool) []syntax.Stmt {
	out := stmts[:0:0]
	for _, s := range stmts {
		out = append(out, r.stmt(s, nested))
		if def, ok := s.(*syntax.DefStmt); ok && nested {
			// A def inside a function or a loop makes a new function
			// value every time it runs.
			out = append(out, &syntax.ExprStmt{X: hidden(opNew, def.Def, &syntax.Ident{NamePos: def.Name.NamePos, Name: def.Name.Name})})
		}
	}
	return out
}

func (r *rewriter) stmt(s syntax.Stmt, nested bool) syntax.Stmt {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		if ix, ok := unparen(s.LHS).(*syntax.IndexExpr); ok && s.Op == syntax.EQ {
			// x[k] = v evaluates v, x, k in that order, as the call does.
			return &syntax.ExprStmt{X: hidden(opSetItm, ix.Lbrack, r.expr(s.RHS), r.expr(ix.X), r.expr(ix.Y))}
		}
		r.target(s.LHS, s.Op == syntax.EQ)
		s.RHS = r.expr(s.RHS)
		switch s.Op {
		case syntax.PLUS_EQ, syntax.PIPE_EQ:
			if !isNumber(s.RHS) {
				s.RHS = hidden(opAug, s.OpPos, s.RHS)
			}
		case syntax.STAR_EQ:
			if !isFloat(s.RHS) {
				s.RHS = hidden(opAug, s.OpPos, s.RHS)
			}
		case syntax.PERCENT_EQ, syntax.LTLT_EQ:
			op, name := opMod, "%="
			if s.Op == syntax.LTLT_EQ {
				op, name = opShift, "<<="
			}
			id, ok := unparen(s.LHS).(*syntax.Ident)
			if !ok {
				if r.err == nil {
					r.err = &compileError{pos: s.OpPos, msg: fmt.Sprintf("%s is supported only on a plain name; write x[k] = x[k] %s y", name, name[:len(name)-1])}
				}
				return s
			}
			// For a name, x %= y and x = x % y resolve and run alike.
			s.Op = syntax.EQ
			s.RHS = hidden(op, s.OpPos, &syntax.Ident{NamePos: id.NamePos, Name: id.Name}, s.RHS)
		}
	case *syntax.DefStmt:
		r.exprs(s.Params)
		s.Body = r.stmts(s.Body, true)
	case *syntax.ExprStmt:
		s.X = r.expr(s.X)
	case *syntax.ForStmt:
		r.target(s.Vars, true)
		s.X = r.expr(s.X)
		s.Body = r.stmts(s.Body, true)
	case *syntax.WhileStmt:
		s.Cond = r.expr(s.Cond)
		s.Body = r.stmts(s.Body, true)
	case *syntax.IfStmt:
		s.Cond = r.expr(s.Cond)
		s.True = r.stmts(s.True, nested)
		s.False = r.stmts(s.False, nested)
	case *syntax.ReturnStmt:
		s.Result = r.expr(s.Result)
	}
	return s
}

// target rewrites the expressions inside an assignment target (indexes,
// the operands of x[i] and x.f) but never the target itself; with set, an
// indexed target x[k] stores through <set>(x).
func (r *rewriter) target(e syntax.Expr, set bool) {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X = r.expr(e.X)
		e.Y = r.expr(e.Y)
		if set {
			e.X = hidden(opSet, e.Lbrack, e.X)
		}
	case *syntax.DotExpr:
		e.X = r.expr(e.X)
	case *syntax.ParenExpr:
		r.target(e.X, set)
	case *syntax.TupleExpr:
		for _, x := range e.List {
			r.target(x, set)
		}
	case *syntax.ListExpr:
		for _, x := range e.List {
			r.target(x, set)
		}
	}
}

func (r *rewriter) exprs(list []syntax.Expr) {
	for i, e := range list {
		list[i] = r.expr(e)
	}
}

func (r *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		// Also keyword arguments and parameter defaults (Op EQ), whose X
		// is a name and stays one.
		e.X = r.expr(e.X)
		e.Y = r.expr(e.Y)
		// With a number literal on either side, + and % cannot build a
		// large value (it is arithmetic, or % with one number argument),
		// and neither can * with a float, | with a number, or << of a
		// number literal (the interpreter shifts by at most 511 bits):
		// keep the fast built-in path.
		switch {
		case e.Op == syntax.PLUS && !isNumber(e.X) && !isNumber(e.Y):
			return hidden(opAdd, e.OpPos, e.X, e.Y)
		case e.Op == syntax.STAR && !isFloat(e.X) && !isFloat(e.Y):
			return hidden(opMul, e.OpPos, e.X, e.Y)
		case e.Op == syntax.PERCENT && !isNumber(e.Y):
			return hidden(opMod, e.OpPos, e.X, e.Y)
		case e.Op == syntax.PIPE && !isNumber(e.X) && !isNumber(e.Y):
			return hidden(opPipe, e.OpPos, e.X, e.Y)
		case e.Op == syntax.LTLT && !isNumber(e.X):
			return hidden(opShift, e.OpPos, e.X, e.Y)
		}
	case *syntax.CallExpr:
		for i, a := range e.Args {
			switch {
			case isSpread(a): // *args, **kwargs
				u := a.(*syntax.UnaryExpr)
				u.X = hidden(opSpread, u.OpPos, r.expr(u.X))
			case isKeyword(a): // name=value
				b := a.(*syntax.BinaryExpr)
				b.Y = r.expr(b.Y)
			default:
				e.Args[i] = r.expr(a)
			}
		}
		if dot, ok := e.Fn.(*syntax.DotExpr); ok && guardedMethods[dot.Name.Name] && positional(e.Args) < 254 {
			// x.m(args) => .m()(x, args): one builtin call instead of an
			// attribute and a call.
			return &syntax.CallExpr{
				Fn:     &syntax.Ident{NamePos: dot.Dot, Name: callName(dot.Name.Name)},
				Lparen: e.Lparen,
				Args:   append([]syntax.Expr{r.expr(dot.X)}, e.Args...),
				Rparen: e.Rparen,
			}
		}
		e.Fn = r.expr(e.Fn)
	case *syntax.DotExpr:
		e.X = r.expr(e.X)
		if guardedMethods[e.Name.Name] {
			return hidden(methodName(e.Name.Name), e.Dot, e.X)
		}
	case *syntax.Comprehension:
		if entry, ok := e.Body.(*syntax.DictEntry); ok {
			entry.Key = r.expr(entry.Key)
			entry.Value = hidden(opEntry, start(entry.Value), r.expr(entry.Value))
		} else {
			e.Body = hidden(opElem, start(e.Body), r.expr(e.Body))
		}
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				r.target(c.Vars, true)
				c.X = r.expr(c.X)
			case *syntax.IfClause:
				c.Cond = r.expr(c.Cond)
			}
		}
		return hidden(opComp, e.Lbrack, e)
	case *syntax.CondExpr:
		e.Cond = r.expr(e.Cond)
		e.True = r.expr(e.True)
		e.False = r.expr(e.False)
	case *syntax.DictExpr:
		for _, x := range e.List {
			if entry, ok := x.(*syntax.DictEntry); ok {
				entry.Key = r.expr(entry.Key)
				entry.Value = r.expr(entry.Value)
			}
		}
		return hidden(opNew, e.Lbrace, e)
	case *syntax.IndexExpr:
		e.X = r.expr(e.X)
		e.Y = r.expr(e.Y)
	case *syntax.LambdaExpr:
		r.exprs(e.Params)
		e.Body = r.expr(e.Body)
		return hidden(opNew, e.Lambda, e)
	case *syntax.ListExpr:
		r.exprs(e.List)
		return hidden(opNew, e.Lbrack, e)
	case *syntax.TupleExpr:
		r.exprs(e.List)
		return hidden(opNew, start(e), e)
	case *syntax.ParenExpr:
		e.X = r.expr(e.X)
	case *syntax.SliceExpr:
		e.X = hidden(opSlice, e.Lbrack, r.expr(e.X))
		e.Lo = r.expr(e.Lo)
		e.Hi = r.expr(e.Hi)
		e.Step = r.expr(e.Step)
	case *syntax.UnaryExpr:
		e.X = r.expr(e.X)
	}
	return e
}

// positional counts the positional arguments of a call.
func positional(args []syntax.Expr) int {
	n := 0
	for _, a := range args {
		if !isSpread(a) && !isKeyword(a) {
			n++
		}
	}
	return n
}

func isSpread(e syntax.Expr) bool {
	u, ok := e.(*syntax.UnaryExpr)
	return ok && (u.Op == syntax.STAR || u.Op == syntax.STARSTAR)
}

func isKeyword(e syntax.Expr) bool {
	b, ok := e.(*syntax.BinaryExpr)
	return ok && b.Op == syntax.EQ
}

// isNumber reports whether e is a number literal, possibly signed or
// parenthesised.
func isNumber(e syntax.Expr) bool {
	switch e := unparen(e).(type) {
	case *syntax.Literal:
		return e.Token == syntax.INT || e.Token == syntax.FLOAT
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && isNumber(e.X)
	}
	return false
}

// isFloat reports whether e is a float literal, possibly signed or
// parenthesised.
func isFloat(e syntax.Expr) bool {
	switch e := unparen(e).(type) {
	case *syntax.Literal:
		return e.Token == syntax.FLOAT
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && isFloat(e.X)
	}
	return false
}

func unparen(e syntax.Expr) syntax.Expr {
	for {
		p, ok := e.(*syntax.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

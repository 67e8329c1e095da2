package starlarkrt

import (
	"go.starlark.net/syntax"
)

// starlark-go evaluates x + y, x * y and x % y inside its interpreter,
// with no hook: "x" * (1 << 29) builds half a gigabyte and [0] * (1 << 29)
// eight, in one step, and repeated doubling (s = s + s) gets there in a
// few dozen steps. So before resolving, the syntax tree is rewritten so
// that these operators, and the few methods that can grow a value a lot
// in one call, go through guarded builtins (guard.go):
//
//	x + y         =>  +(x, y)        (likewise * and %)
//	x += y        =>  x += op=(y)    (likewise *=; see augOperand)
//	x %= y        =>  x = %(x, y)    (only for a plain name; refused otherwise)
//	x.join        =>  .join(x)       (likewise replace, format, extend)
//
// The builtins' names are not Starlark identifiers, so scripts can neither
// call nor shadow them. Each call is placed at the operator's position, so
// errors and backtraces point where they did before. An operator with a
// number literal operand that cannot build a large value (i + 1, n += 1,
// x % 2, x * 0.5) is left alone: the guards cost a builtin call each,
// which makes an arithmetic loop about two and a half times slower
// (BenchmarkGuardedArithmetic against BenchmarkPlainArithmetic), and one
// or two extra steps of the step budget.
const (
	opAdd = "+"
	opMul = "*"
	opMod = "%"
	opAug = "op="
)

// guardedMethods are the methods routed through a guard (see methodGuard).
var guardedMethods = map[string]bool{"join": true, "replace": true, "format": true, "extend": true}

func methodName(name string) string { return "." + name }

type rewriter struct {
	err error
}

// rewriteFile rewrites f in place. It fails (with a *compileError) only
// for %= on something other than a plain name.
func rewriteFile(f *syntax.File) error {
	r := &rewriter{}
	r.stmts(f.Stmts)
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

func (r *rewriter) stmts(stmts []syntax.Stmt) {
	for _, s := range stmts {
		r.stmt(s)
	}
}

func (r *rewriter) stmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		r.target(s.LHS)
		s.RHS = r.expr(s.RHS)
		switch s.Op {
		case syntax.PLUS_EQ:
			if !isNumber(s.RHS) {
				s.RHS = hidden(opAug, s.OpPos, s.RHS)
			}
		case syntax.STAR_EQ:
			if !isFloat(s.RHS) {
				s.RHS = hidden(opAug, s.OpPos, s.RHS)
			}
		case syntax.PERCENT_EQ:
			id, ok := unparen(s.LHS).(*syntax.Ident)
			if !ok {
				if r.err == nil {
					r.err = &compileError{pos: s.OpPos, msg: "%= is supported only on a plain name; write x[k] = x[k] % y"}
				}
				return
			}
			// For a name, x %= y and x = x % y resolve and run alike.
			s.Op = syntax.EQ
			s.RHS = hidden(opMod, s.OpPos, &syntax.Ident{NamePos: id.NamePos, Name: id.Name}, s.RHS)
		}
	case *syntax.DefStmt:
		r.exprs(s.Params)
		r.stmts(s.Body)
	case *syntax.ExprStmt:
		s.X = r.expr(s.X)
	case *syntax.ForStmt:
		r.target(s.Vars)
		s.X = r.expr(s.X)
		r.stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = r.expr(s.Cond)
		r.stmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = r.expr(s.Cond)
		r.stmts(s.True)
		r.stmts(s.False)
	case *syntax.ReturnStmt:
		s.Result = r.expr(s.Result)
	}
}

// target rewrites the expressions inside an assignment target (indexes,
// the operands of x[i] and x.f) but never the target itself.
func (r *rewriter) target(e syntax.Expr) {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X = r.expr(e.X)
		e.Y = r.expr(e.Y)
	case *syntax.DotExpr:
		e.X = r.expr(e.X)
	case *syntax.ParenExpr:
		r.target(e.X)
	case *syntax.TupleExpr:
		for _, x := range e.List {
			r.target(x)
		}
	case *syntax.ListExpr:
		for _, x := range e.List {
			r.target(x)
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
		// and neither can * with a float: keep the fast built-in path.
		switch {
		case e.Op == syntax.PLUS && !isNumber(e.X) && !isNumber(e.Y):
			return hidden(opAdd, e.OpPos, e.X, e.Y)
		case e.Op == syntax.STAR && !isFloat(e.X) && !isFloat(e.Y):
			return hidden(opMul, e.OpPos, e.X, e.Y)
		case e.Op == syntax.PERCENT && !isNumber(e.Y):
			return hidden(opMod, e.OpPos, e.X, e.Y)
		}
	case *syntax.CallExpr:
		e.Fn = r.expr(e.Fn)
		r.exprs(e.Args)
	case *syntax.DotExpr:
		e.X = r.expr(e.X)
		if guardedMethods[e.Name.Name] {
			return hidden(methodName(e.Name.Name), e.Dot, e.X)
		}
	case *syntax.Comprehension:
		e.Body = r.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				r.target(c.Vars)
				c.X = r.expr(c.X)
			case *syntax.IfClause:
				c.Cond = r.expr(c.Cond)
			}
		}
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
	case *syntax.IndexExpr:
		e.X = r.expr(e.X)
		e.Y = r.expr(e.Y)
	case *syntax.LambdaExpr:
		r.exprs(e.Params)
		e.Body = r.expr(e.Body)
	case *syntax.ListExpr:
		r.exprs(e.List)
	case *syntax.TupleExpr:
		r.exprs(e.List)
	case *syntax.ParenExpr:
		e.X = r.expr(e.X)
	case *syntax.SliceExpr:
		e.X = r.expr(e.X)
		e.Lo = r.expr(e.Lo)
		e.Hi = r.expr(e.Hi)
		e.Step = r.expr(e.Step)
	case *syntax.UnaryExpr:
		e.X = r.expr(e.X)
	}
	return e
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

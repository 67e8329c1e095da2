package expr

import (
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// scan walks a parsed expression before type checking. It enforces the
// role's variable and field rules with messages a user can act on, rewrites
// event["type"] into event.type (so the checker sees a field selection
// whichever way it is written), and records which variables the expression
// reads and which paths it reads under session.input or tool.input.
type scan struct {
	spec  roleSpec
	fac   ast.ExprFactory
	reads map[string]bool
	paths [][]string
}

func newScan(spec roleSpec) *scan {
	return &scan{spec: spec, fac: ast.NewExprFactory(), reads: map[string]bool{}}
}

// bound is the set of comprehension variables in scope; they shadow the
// role's variables.
type bound map[string]bool

func (b bound) with(names ...string) bound {
	out := make(bound, len(b)+len(names))
	for n := range b {
		out[n] = true
	}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// isRoot tells whether name, at this point, refers to one of the variables
// expressions may have (declared in this role or not).
func isRoot(name string, b bound) bool {
	return (name == varEvent || name == varSession || name == varTool || name == varRequest) && !b[name]
}

// step is one selection in a chain such as session.input.a["b"][i].
type step struct {
	node     ast.Expr // the select or index expression
	key      string   // field name or constant key
	constant bool     // key is known (a field name or a constant index)
	isString bool     // key is a field name or a string constant
	arg      ast.Expr // the index argument, for index steps
}

// unwind splits e into the root expression and the selections applied to it,
// outermost last.
func unwind(e ast.Expr) (ast.Expr, []step) {
	var rev []step
	for {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			rev = append(rev, step{node: e, key: s.FieldName(), constant: true, isString: true})
			e = s.Operand()
			continue
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == operators.Index && !c.IsMemberFunction() && len(c.Args()) == 2 {
				st := step{node: e, arg: c.Args()[1]}
				st.key, st.constant, st.isString = constKey(st.arg)
				rev = append(rev, st)
				e = c.Args()[0]
				continue
			}
		}
		slices.Reverse(rev)
		return e, rev
	}
}

// constKey returns the text of a constant index.
func constKey(e ast.Expr) (key string, constant, isString bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false, false
	}
	switch v := e.AsLiteral().(type) {
	case types.String:
		return string(v), true, true
	case types.Int:
		return strconv.FormatInt(int64(v), 10), true, false
	case types.Uint:
		return strconv.FormatUint(uint64(v), 10), true, false
	}
	return "", false, false
}

func (s *scan) walk(e ast.Expr, b bound) error {
	if root, steps := unwind(e); len(steps) > 0 && root.Kind() == ast.IdentKind && isRoot(root.AsIdent(), b) {
		return s.access(root, steps, b)
	}
	switch e.Kind() {
	case ast.IdentKind:
		if name := strings.TrimPrefix(e.AsIdent(), "."); name != e.AsIdent() && isRoot(name, nil) {
			// .event names the global even under a comprehension variable
			// called event; keeping to plain names keeps the analysis simple.
			return fault.New(fault.InvalidExpression, "", "write %s instead of .%s", name, name)
		}
		if name := e.AsIdent(); isRoot(name, b) {
			if !s.spec.declares(name) {
				return s.cannotRead(name)
			}
			return fault.New(fault.InvalidExpression, "",
				"%s cannot be used as a whole: read one of its fields, such as %s.%s",
				name, name, s.spec.fieldNames(name)[0])
		}
	case ast.SelectKind:
		return s.walk(e.AsSelect().Operand(), b)
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			if err := s.walk(c.Target(), b); err != nil {
				return err
			}
		}
		for _, a := range c.Args() {
			if err := s.walk(a, b); err != nil {
				return err
			}
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if err := s.walk(el, b); err != nil {
				return err
			}
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			if err := s.walk(me.Key(), b); err != nil {
				return err
			}
			if err := s.walk(me.Value(), b); err != nil {
				return err
			}
		}
	case ast.StructKind:
		return fault.New(fault.InvalidExpression, "",
			"object construction (%s{...}) is not supported in expressions; use a map such as {\"key\": value}",
			e.AsStruct().TypeName())
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		if err := s.walk(c.IterRange(), b); err != nil {
			return err
		}
		if err := s.walk(c.AccuInit(), b); err != nil {
			return err
		}
		names := []string{c.IterVar(), c.AccuVar()}
		if c.HasIterVar2() {
			names = append(names, c.IterVar2())
		}
		inner := b.with(names...)
		for _, x := range []ast.Expr{c.LoopCondition(), c.LoopStep(), c.Result()} {
			if err := s.walk(x, inner); err != nil {
				return err
			}
		}
	}
	return nil
}

// access checks a chain of selections rooted at one of the role variables.
func (s *scan) access(root ast.Expr, steps []step, b bound) error {
	name := root.AsIdent()
	if !s.spec.declares(name) {
		return s.cannotRead(name)
	}
	first := steps[0]
	if !first.isString {
		return fault.New(fault.InvalidExpression, "",
			"%s fields must be named literally, e.g. %s.%s or %s[%q]",
			name, name, s.spec.fieldNames(name)[0], name, s.spec.fieldNames(name)[0])
	}
	if _, ok := s.spec.fieldTypes(name)[first.key]; !ok {
		code := fault.InvalidExpression
		if name == varSession {
			code = fault.InvalidAction // A3: only some session fields are readable
		}
		return fault.New(code, "", "%s", s.spec.badField(name, first.key))
	}
	if first.node.Kind() != ast.SelectKind {
		// event["type"] -> event.type, keeping the node id (and so its position).
		first.node.SetKindCase(s.fac.NewSelect(first.node.ID(), root, first.key))
	}
	s.reads[name] = true

	if (name == varSession || name == varTool) && first.key == "input" {
		var path []string
		for _, st := range steps[1:] {
			if !st.constant {
				break
			}
			path = append(path, st.key)
		}
		s.addPath(path)
	}
	for _, st := range steps[1:] {
		if st.arg != nil {
			if err := s.walk(st.arg, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *scan) addPath(path []string) {
	if len(path) == 0 {
		return
	}
	for _, p := range s.paths {
		if slices.Equal(p, path) {
			return
		}
	}
	s.paths = append(s.paths, path)
}

func (s *scan) cannotRead(name string) error {
	code := fault.InvalidExpression
	if name == varSession {
		code = fault.InvalidAction // A3: start expressions cannot read session
	}
	return fault.New(code, "", "%s", s.spec.cannotRead(name))
}

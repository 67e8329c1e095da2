package expr

import (
	"errors"
	"fmt"
	"math"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// Limits on what one evaluation may build (issue 10 item 3). cel-go prices
// a call after it returns, so MaxCost alone lets a single call allocate
// without bound first (s.replace("", s) is quadratic in s). The calls that
// can build more than a small multiple of their inputs are therefore sized
// from their evaluated arguments before they run, and refused when the
// size would not fit.
//
// What cel-go v0.33 offers does not refuse before the allocation:
// CostLimit, CostTrackerOptions/OverloadTracker and the cost models of
// ext.Strings price a call from its result; MemoryLimit samples values once
// they exist; RegexProgramSizeLimit measures a pattern by compiling it. So a
// planner decorator (cel.CustomDecoratorV2) wraps the calls instead, and
// CostLimit stays for CPU.
const (
	// MaxBuildBytes is how many bytes the size-checked calls of one
	// evaluation may build in all: strings and bytes joined by +, replace,
	// join, format and strings.quote, the pieces of split, and regular
	// expressions compiled from data by matches. 16 MiB is sixteen times
	// the largest event, so ordinary concatenation and formatting of event
	// fields never come near it.
	MaxBuildBytes = 16 << 20
	// MaxRegexInsts is the largest program a regular expression may compile
	// to, in instructions (Go's regexp uses about 250 bytes per instruction
	// while compiling). A UUID or e-mail pattern needs under 200.
	MaxRegexInsts = 10_000
	// MaxRegexBytes is the longest regular expression matches accepts from
	// data, in bytes; patterns written in the expression are limited by
	// MaxSourceBytes.
	MaxRegexBytes = 4 << 10
)

// regexInstBytes is what one regexp instruction is charged against
// MaxBuildBytes.
const regexInstBytes = 256

// ErrSizeLimit is returned (wrapped) by Eval when a call would build more
// than MaxBuildBytes in one evaluation, or compile a regular expression
// beyond MaxRegexInsts or MaxRegexBytes; the call is refused before it
// allocates.
var ErrSizeLimit = errors.New("expression would build too much data (size limit)")

// budgetVar names the per-evaluation budget in the activation. It is not a
// CEL identifier, so no expression can read it.
const budgetVar = "@actionsledger.budget"

// budget is what is left of MaxBuildBytes in one evaluation, and the call
// that was refused, if any.
type budget struct {
	left    int64
	refused *refusal
}

// refusal describes a call refused before it ran.
type refusal struct {
	node int64
	msg  string
}

func newBudget() *budget { return &budget{left: MaxBuildBytes} }

// sizer returns an upper bound of the bytes a call would allocate given its
// evaluated arguments, or a refusal message when it must not run at all.
type sizer func(args []ref.Val, left int64) (bytes int64, refuse string)

// sizers are the size-checked functions, by name. Every other function
// builds at most a small multiple of its inputs (lowerAscii, substring,
// indexOf, ...), and every input is bounded (the event, session input and
// tool input by jsonvalue.MaxBytes, anything built by MaxBuildBytes), so
// MaxCost bounds them. So does it bound the map and filter macros, which add
// one reference per iteration, and list +, which cel-go concatenates lazily.
var sizers = map[string]sizer{
	operators.Add:   addSize,
	"replace":       replaceSize,
	"join":          joinSize,
	"format":        formatCallSize,
	"split":         splitSize,
	"strings.quote": quoteSize,
	"matches":       matchesSize,
}

// boundLib puts the size checks into every program of an environment,
// including those cel-go builds to fold constants while optimising, so a
// definition cannot allocate without bound while it is being validated.
type boundLib struct{ dec *decorator }

func (boundLib) LibraryName() string             { return "actionsledger.bound" }
func (boundLib) CompileOptions() []cel.EnvOption { return nil }
func (l boundLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.CostLimit(MaxCost),
		cel.CustomDecoratorV2(l.dec.decorate),
	}
}

// decorator wraps the calls of sizers in boundedCall when a program is
// planned. impls are the environment's function bindings by overload id and
// function name, as cel-go's dispatcher holds them; set once the
// environment exists, before any program is planned.
type decorator struct {
	impls map[string]*functions.Overload
}

func (d *decorator) init(env *cel.Env) error {
	d.impls = map[string]*functions.Overload{}
	for _, fn := range env.Functions() {
		bs, err := fn.Bindings()
		if err != nil {
			return err
		}
		for _, b := range bs {
			d.impls[b.Operator] = b
		}
	}
	return nil
}

func (d *decorator) decorate(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	size, ok := sizers[call.Function()]
	if !ok {
		return i, nil
	}
	if call.Function() == "matches" {
		// A pattern written in the expression is checked by Compile and
		// compiled once when the program is planned.
		if args := call.Args(); len(args) == 2 {
			if _, isConst := args[1].(interpreter.InterpretableConst); isConst {
				return i, nil
			}
		}
	}
	// The planner looks the implementation up the same way.
	impl := d.impls[call.OverloadID()]
	if impl == nil {
		impl = d.impls[call.Function()]
	}
	if impl != nil && (impl.Async != nil || impl.LateBound || impl.NonStrict) {
		return i, nil // none of the sized functions is planned so
	}
	return &boundedCall{InterpretableCall: call, impl: impl, size: size}, nil
}

// boundedCall evaluates a call's arguments once, sizes the call from them
// and charges the evaluation's budget, and only then runs the overload,
// exactly as cel-go's own call nodes would (strict arguments, operand
// trait, receiver fallback, cost tracking).
type boundedCall struct {
	interpreter.InterpretableCall
	impl *functions.Overload
	size sizer
}

// Eval implements interpreter.Interpretable.
func (c *boundedCall) Eval(vars interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(vars, c.Exec)
}

// Exec implements interpreter.InterpretableV2.
func (c *boundedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args := c.Args()
	vals := make([]ref.Val, len(args))
	for i, a := range args {
		v := a.Exec(frame)
		if types.IsUnknownOrError(v) {
			return v
		}
		vals[i] = v
	}
	if res := c.charge(frame, vals); res != nil {
		return res
	}
	res := types.LabelErrNode(c.ID(), c.call(vals))
	if costs := frame.CostTracker(); costs != nil {
		costs.EvalVarArgs(frame, c.ID(), c, vals, res)
	}
	return res
}

// charge sizes the call and takes the size from the budget. A call that
// does not fit cancels the evaluation (the budget keeps why); outside an
// evaluation of ours (cel-go planning constants) it is an error value.
func (c *boundedCall) charge(frame *interpreter.ExecutionFrame, vals []ref.Val) ref.Val {
	var b *budget
	if v, ok := frame.ResolveName(budgetVar); ok {
		b, _ = v.(*budget)
	}
	left := int64(MaxBuildBytes)
	if b != nil {
		left = b.left
	}
	n, refuse := c.size(vals, left)
	if refuse == "" && n <= left {
		if b != nil {
			b.left -= n
		}
		return nil
	}
	if refuse == "" {
		refuse = fmt.Sprintf("%s would need at least %d bytes, more than the %d left of %d", c.Function(), n, left, MaxBuildBytes)
	}
	if b == nil {
		return types.NewErrWithNodeID(c.ID(), "%s", refuse)
	}
	b.left = 0
	b.refused = &refusal{node: c.ID(), msg: refuse}
	panic(interpreter.EvalCancelledError{Cause: interpreter.MemoryLimitExceeded, Message: refuse})
}

func (c *boundedCall) call(vals []ref.Val) ref.Val {
	fn := c.impl
	if fn != nil && (fn.OperandTrait == 0 || vals[0].Type().HasTrait(fn.OperandTrait)) {
		switch {
		case len(vals) == 1 && fn.Unary != nil:
			return fn.Unary(vals[0])
		case len(vals) == 2 && fn.Binary != nil:
			return fn.Binary(vals[0], vals[1])
		case fn.Function != nil:
			return fn.Function(vals...)
		}
	}
	if len(vals) > 0 && vals[0].Type().HasTrait(traits.ReceiverType) {
		return vals[0].(traits.Receiver).Receive(c.Function(), c.OverloadID(), vals[1:])
	}
	return types.NewErr("no such overload: %s", c.Function())
}

// Sizes of the size-checked calls, in bytes allocated. Arguments of other
// types than the overloads take are sized 0: the call then fails on its own.

func addSize(args []ref.Val, _ int64) (int64, string) {
	if len(args) != 2 {
		return 0, ""
	}
	return flatLen(args[0]) + flatLen(args[1]), "" // list + list is lazy in cel-go: O(1)
}

// flatLen is the length of a string or bytes value, 0 for anything else.
func flatLen(v ref.Val) int64 {
	switch x := v.(type) {
	case types.String:
		return int64(len(x))
	case types.Bytes:
		return int64(len(x))
	}
	return 0
}

func replaceSize(args []ref.Val, _ int64) (int64, string) {
	if len(args) < 3 {
		return 0, ""
	}
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return 0, ""
	}
	k := int64(strings.Count(string(s), string(old))) // no allocation; rune count + 1 for ""
	if len(args) == 4 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && int64(n) < k {
			k = int64(n)
		}
	}
	grow := int64(len(repl)) - int64(len(old))
	if grow <= 0 {
		return int64(len(s)), ""
	}
	return satAdd(int64(len(s)), satMul(k, grow)), ""
}

func joinSize(args []ref.Val, left int64) (int64, string) {
	list, ok := args[0].(traits.Lister)
	if !ok {
		return 0, ""
	}
	var sep int64
	if len(args) == 2 {
		sep = flatLen(args[1])
	}
	var n int64
	first := true
	for it := list.Iterator(); it.HasNext() == types.True; {
		if !first {
			n = satAdd(n, sep)
		}
		first = false
		n = satAdd(n, flatLen(it.Next()))
		if 2*n > left {
			break // refused anyway; don't walk the rest
		}
	}
	return satMul(2, n), "" // the builder grows by doubling
}

func formatCallSize(args []ref.Val, left int64) (int64, string) {
	if len(args) != 2 {
		return 0, ""
	}
	f, ok := args[0].(types.String)
	list, ok2 := args[1].(traits.Lister)
	if !ok || !ok2 {
		return 0, ""
	}
	// Each verb formats one argument; arguments past the verbs are unused.
	verbs := strings.Count(string(f), "%")
	n := int64(len(f))
	i := 0
	for it := list.Iterator(); i < verbs && it.HasNext() == types.True; i++ {
		n = satAdd(n, formatSize(it.Next(), left/2-n))
		if 2*n > left {
			break
		}
	}
	return satMul(2, n), "" // each argument is formatted to a string, then appended
}

// formatSize bounds the bytes format writes for one argument under any
// verb: %x doubles strings and bytes, %b writes 64 digits for an int, %f
// up to 100 decimals after as many digits as the double has. Containers
// add their separators; the walk stops once n passes limit.
func formatSize(v ref.Val, limit int64) int64 {
	switch x := v.(type) {
	case types.String, types.Bytes:
		return 2 * flatLen(x)
	case types.Double:
		f := math.Abs(float64(x))
		if f < 1e16 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 128
		}
		return 128 + int64(math.Log10(f))
	case traits.Lister:
		n := int64(2)
		for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
			n = satAdd(n, 2+formatSize(it.Next(), limit-n))
		}
		return n
	case traits.Mapper:
		n := int64(2)
		for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
			k := it.Next()
			n = satAdd(n, 4+formatSize(k, limit-n))
			if val, found := x.Find(k); found {
				n = satAdd(n, formatSize(val, limit-n))
			}
		}
		return satMul(2, n) // keys and values become strings first
	}
	return 128
}

func splitSize(args []ref.Val, _ int64) (int64, string) {
	if len(args) < 2 {
		return 0, ""
	}
	s, ok1 := args[0].(types.String)
	sep, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return 0, ""
	}
	var pieces int64
	if sep == "" {
		pieces = int64(utf8.RuneCountInString(string(s)))
	} else {
		pieces = int64(strings.Count(string(s), string(sep))) + 1
	}
	if len(args) == 3 {
		if n, ok := args[2].(types.Int); ok && n >= 0 && int64(n) < pieces {
			pieces = int64(n)
		}
	}
	return satMul(pieces, 32), "" // a string header and its CEL value per piece
}

func quoteSize(args []ref.Val, _ int64) (int64, string) {
	if len(args) != 1 {
		return 0, ""
	}
	// An invalid byte becomes U+FFFD (3 bytes), an escape 2; the builder
	// grows by doubling.
	return satAdd(satMul(6, flatLen(args[0])), 4), ""
}

func matchesSize(args []ref.Val, _ int64) (int64, string) {
	if len(args) != 2 {
		return 0, ""
	}
	p, ok := args[1].(types.String)
	if !ok {
		return 0, ""
	}
	insts, err := regexInsts(string(p))
	if err != nil {
		return 0, err.Error()
	}
	return satMul(insts, regexInstBytes), ""
}

// regexInsts returns about how many instructions pattern compiles to, by
// Go's rules (each repetition copies its operand), without compiling it:
// compiling is what allocates. A pattern that does not parse counts 0 (the
// call then reports the syntax error); one longer than MaxRegexBytes or
// beyond MaxRegexInsts is an error.
func regexInsts(pattern string) (int64, error) {
	if len(pattern) > MaxRegexBytes {
		return 0, fmt.Errorf("regular expression is %d bytes long; the limit is %d", len(pattern), MaxRegexBytes)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, nil
	}
	n := progSize(re)
	if n > MaxRegexInsts {
		return 0, fmt.Errorf("regular expression compiles to about %d instructions; the limit is %d (repetition counts such as {1000} multiply)", n, MaxRegexInsts)
	}
	return n, nil
}

// progSize counts instructions as regexp/syntax.Compile emits them after
// Simplify, saturating well above MaxRegexInsts.
func progSize(re *syntax.Regexp) int64 {
	const ceiling = 1 << 40
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune)) + 1
	case syntax.OpCharClass:
		return 1 + int64(len(re.Rune))/2
	case syntax.OpRepeat:
		sub := progSize(re.Sub[0])
		copies := int64(re.Max)
		if copies < 0 {
			copies = int64(re.Min) + 1
		}
		return min(satAdd(satMul(max(copies, 1), sub+1), 1), ceiling)
	}
	n := int64(2)
	for _, s := range re.Sub {
		n = min(satAdd(n, progSize(s)+1), ceiling)
	}
	return n
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

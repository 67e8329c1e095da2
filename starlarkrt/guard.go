package starlarkrt

import (
	"fmt"
	"math/bits"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Guards: the operators and builtins that could build something huge in
// one step check the size of what they would build against MaxAlloc
// first. See rewrite.go for how operators reach them.

// maxIntBits bounds the integers * may build: 131,072 decimal digits, the
// most PostgreSQL's numeric (and so the ledger) can hold.
const maxIntBits = 435_412

func intBits(x starlark.Int) int {
	if i, ok := x.Int64(); ok {
		if i < 0 {
			i = -i
		}
		return bits.Len64(uint64(i))
	}
	return x.BigInt().BitLen()
}

// seqLen returns the length of a string, bytes, list or tuple.
func seqLen(v starlark.Value) (int, bool) {
	switch v := v.(type) {
	case starlark.String:
		return len(v), true
	case starlark.Bytes:
		return len(v), true
	case *starlark.List:
		return v.Len(), true
	case starlark.Tuple:
		return len(v), true
	}
	return 0, false
}

func unit(v starlark.Value) string {
	switch v.(type) {
	case starlark.String, starlark.Bytes:
		return "bytes"
	}
	return "elements"
}

// binary is x op y with the size checks, charging the call's memory
// budget for what it builds.
func (st *callState) binary(op syntax.Token, x, y starlark.Value) (starlark.Value, error) {
	limit := st.lim.MaxAlloc
	switch op {
	case syntax.PLUS:
		n, okx := seqLen(x)
		m, oky := seqLen(y)
		if okx && oky && x.Type() == y.Type() {
			if n+m > limit {
				return nil, allocErrorf("%s + %s would build %d %s; the limit is %d (MaxAlloc)", x.Type(), y.Type(), n+m, unit(x), limit)
			}
			if err := st.charge(seqCost(x, n+m)); err != nil {
				return nil, err
			}
		}
	case syntax.STAR:
		xi, xInt := x.(starlark.Int)
		yi, yInt := y.(starlark.Int)
		switch {
		case xInt && yInt:
			bits := intBits(xi) + intBits(yi)
			if bits > maxIntBits {
				return nil, allocErrorf("int * int would have more than %d bits (about 131072 digits), the most an integer may have", maxIntBits)
			}
			if bits > 64 {
				if err := st.charge(costBigInt + int64(bits+7)/8); err != nil {
					return nil, err
				}
			}
		case xInt:
			if err := st.repeat(y, xi, limit); err != nil {
				return nil, err
			}
		case yInt:
			if err := st.repeat(x, yi, limit); err != nil {
				return nil, err
			}
		}
	case syntax.PERCENT:
		if format, ok := x.(starlark.String); ok {
			n, deep := interpolateSize(string(format), y, limit)
			if err := textCheck("%", n, deep, limit); err != nil {
				return nil, err
			}
			return st.built(starlark.Binary(op, x, y))
		}
	case syntax.PIPE:
		xd, okx := x.(*starlark.Dict)
		yd, oky := y.(*starlark.Dict)
		if okx && oky {
			if err := st.charge(dictCost(xd.Len() + yd.Len())); err != nil {
				return nil, err
			}
		}
	case syntax.LTLT:
		xi, xInt := x.(starlark.Int)
		yi, yInt := y.(starlark.Int)
		if xInt && yInt && xi.Sign() != 0 {
			if n, ok := yi.Int64(); ok && n > 0 && int64(intBits(xi))+min(n, maxIntBits) > maxIntBits {
				return nil, allocErrorf("int << %d would have more than %d bits (about 131072 digits), the most an integer may have", n, maxIntBits)
			}
		}
	}
	return starlark.Binary(op, x, y)
}

// built charges for v, just built, and returns it.
func (st *callState) built(v starlark.Value, err error) (starlark.Value, error) {
	if err != nil {
		return nil, err
	}
	if err := st.charge(built(v)); err != nil {
		return nil, err
	}
	return v, nil
}

// seqCost is the charge for a string, bytes, list or tuple like x of n
// bytes or elements built by copying.
func seqCost(x starlark.Value, n int) int64 {
	switch x.(type) {
	case starlark.String, starlark.Bytes:
		return textCost(n)
	case starlark.Tuple:
		return costTuple + int64(n)*costSlot
	}
	return costList + int64(n)*costSlot
}

// repeat checks and charges seq * count.
func (st *callState) repeat(seq starlark.Value, count starlark.Int, limit int) error {
	if err := repeatCheck(seq, count, limit); err != nil {
		return err
	}
	n, ok := seqLen(seq)
	c, _ := count.Int64()
	if !ok || n == 0 || c <= 0 {
		return nil
	}
	return st.charge(seqCost(seq, n*int(c)))
}

func repeatCheck(seq starlark.Value, count starlark.Int, limit int) error {
	n, ok := seqLen(seq)
	if !ok || n == 0 || count.Sign() <= 0 {
		return nil
	}
	c, ok := count.Int64()
	if !ok || c > int64(limit/n) {
		return allocErrorf("repeating a %s of %d %s %s times would build more than %d %s (MaxAlloc)", seq.Type(), n, unit(seq), count, limit, unit(seq))
	}
	return nil
}

func textCheck(what string, n int, deep bool, limit int) error {
	if deep {
		return allocErrorf("%s: the value nests more than %d levels deep", what, maxNesting)
	}
	if n > limit {
		return allocErrorf("%s would build a text of more than %d bytes (MaxAlloc)", what, limit)
	}
	return nil
}

func binaryBuiltin(name string, op syntax.Token) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return stateOf(thread).binary(op, args[0], args[1])
	})
}

// augOperand wraps the right operand of x += y and x *= y. The
// interpreter finds no built-in meaning for x op augOperand and asks the
// operand's Binary method, which applies the guarded operator; for a list,
// += extends it in place, as the interpreter itself does. Wrapping the
// operand (rather than rewriting the statement) keeps the target, such as
// d[k()], evaluated once.
type augOperand struct {
	v  starlark.Value
	st *callState
}

var _ starlark.HasBinary = augOperand{}

func (a augOperand) String() string        { return a.v.String() }
func (a augOperand) Type() string          { return a.v.Type() }
func (a augOperand) Freeze()               { a.v.Freeze() }
func (a augOperand) Truth() starlark.Bool  { return a.v.Truth() }
func (a augOperand) Hash() (uint32, error) { return a.v.Hash() }

func (a augOperand) Binary(op syntax.Token, x starlark.Value, side starlark.Side) (starlark.Value, error) {
	if side == starlark.Left {
		return nil, nil // never: the operand is always on the right
	}
	if l, ok := x.(*starlark.List); ok && op == syntax.PLUS {
		if iterable, ok := a.v.(starlark.Iterable); ok {
			return a.extend(l, iterable)
		}
	}
	if d, ok := x.(*starlark.Dict); ok && op == syntax.PIPE {
		if y, ok := a.v.(*starlark.Dict); ok {
			return a.update(d, y)
		}
	}
	return a.st.binary(op, x, a.v)
}

// extend is list += iterable, in place as the interpreter does it.
func (a augOperand) extend(l *starlark.List, y starlark.Iterable) (starlark.Value, error) {
	limit := a.st.lim.MaxAlloc
	if n := starlark.Len(y); n >= 0 && l.Len()+n > limit {
		return nil, allocErrorf("list += %s would build %d elements; the limit is %d (MaxAlloc)", y.Type(), l.Len()+n, limit)
	}
	// Collect first: y may be l itself.
	elems := elements(y)
	if err := a.st.charge(int64(len(elems))*costAppend + freshOwn(y, func(i int) starlark.Value { return elems[i] }, 0, len(elems))); err != nil {
		return nil, err
	}
	for _, e := range elems {
		if err := l.Append(e); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// update is dict |= dict, in place as the interpreter does it.
func (a augOperand) update(d, y *starlark.Dict) (starlark.Value, error) {
	n := d.Len()
	for _, item := range y.Items() {
		if err := d.SetKey(item[0], item[1]); err != nil {
			return nil, err
		}
	}
	if err := a.st.charge(entriesCost(n, d.Len())); err != nil {
		return nil, err
	}
	return d, nil
}

func elements(y starlark.Iterable) []starlark.Value {
	iter := y.Iterate()
	defer iter.Done()
	var elems []starlark.Value
	var e starlark.Value
	for iter.Next(&e) {
		elems = append(elems, e)
	}
	return elems
}

var augBuiltin = starlark.NewBuiltin(opAug, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	return augOperand{v: args[0], st: stateOf(thread)}, nil
})

// methodBuiltin implements .name(x), the rewritten x.name: the attribute,
// through its guard for the guarded methods.
func methodBuiltin(name string) *starlark.Builtin {
	return starlark.NewBuiltin(methodName(name), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return stateOf(thread).attr(args[0], name)
	})
}

// callBuiltin implements .name()(x, args...), the rewritten
// x.name(args...): the method called through its guard.
func callBuiltin(name string) *starlark.Builtin {
	return starlark.NewBuiltin(callName(name), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		st := stateOf(thread)
		recv, args := args[0], args[1:]
		if l, ok := recv.(*starlark.List); ok && name == "append" && len(args) == 1 && len(kwargs) == 0 {
			// The common case, without looking the method up.
			if err := st.charge(costAppend + own(args[0])); err != nil {
				return nil, err
			}
			if err := l.Append(args[0]); err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
			return starlark.None, nil
		}
		v, err := lookup(recv, name)
		if err != nil {
			return nil, err
		}
		real, ok := v.(*starlark.Builtin)
		if !ok {
			return starlark.Call(thread, v, args, kwargs)
		}
		return st.guarded(thread, real, recv, name, args, kwargs)
	})
}

// lookup is x.name as the interpreter finds it.
func lookup(x starlark.Value, name string) (starlark.Value, error) {
	if ha, ok := x.(starlark.HasAttrs); ok {
		v, err := ha.Attr(name)
		if err != nil {
			return nil, err
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
}

// attr is x.name as a value: for a guarded method, a builtin that calls it
// through its guard.
func (st *callState) attr(x starlark.Value, name string) (starlark.Value, error) {
	v, err := lookup(x, name)
	if err != nil {
		return nil, err
	}
	real, ok := v.(*starlark.Builtin)
	if !ok || !guardedMethods[name] {
		return v, nil
	}
	return starlark.NewBuiltin(real.Name(), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return st.guarded(thread, real, x, name, args, kwargs)
	}), nil
}

// guarded calls real, the method name of recv, with the size checks
// first and the charges for what it builds.
func (st *callState) guarded(thread *starlark.Thread, real *starlark.Builtin, recv starlark.Value, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	call := func() (starlark.Value, error) { return starlark.Call(thread, real, args, kwargs) }
	switch recv := recv.(type) {
	case starlark.String:
		var check error
		switch name {
		case "join":
			check = st.joinCheck(string(recv), args)
		case "replace":
			check = st.replaceCheck(string(recv), args)
		case "format":
			n, deep := formatSize(string(recv), args, kwargs, st.lim.MaxAlloc)
			check = textCheck("format", n, deep, st.lim.MaxAlloc)
		}
		if check != nil {
			return nil, check
		}
		v, err := call()
		if err != nil {
			return nil, err
		}
		// Split and partition share the receiver's bytes: their cost is
		// the list or tuple and a header per part.
		cost := built(v)
		switch v := v.(type) {
		case *starlark.List:
			cost += int64(v.Len()) * costString
		case starlark.Tuple:
			cost += int64(len(v)) * costString
		}
		if err := st.charge(cost); err != nil {
			return nil, err
		}
		return v, nil
	case *starlark.List:
		return st.listMethod(recv, name, args, kwargs, call)
	case *starlark.Dict:
		return st.dictMethod(recv, name, args, call)
	}
	// Another type's method of the same name (a time's format): what it
	// returns is new.
	return st.built(call())
}

func (st *callState) listMethod(l *starlark.List, name string, args starlark.Tuple, kwargs []starlark.Tuple, call func() (starlark.Value, error)) (starlark.Value, error) {
	before := l.Len()
	n := before
	if name == "extend" && len(args) == 1 {
		if m := starlark.Len(args[0]); m >= 0 {
			if n+m > st.lim.MaxAlloc {
				return nil, allocErrorf("extend would build a list of %d elements; the limit is %d (MaxAlloc)", n+m, st.lim.MaxAlloc)
			}
			if err := st.charge(int64(m) * costAppend); err != nil {
				return nil, err
			}
			n += m // charged
		}
	}
	v, err := call()
	if err != nil {
		return nil, err
	}
	var cost int64
	if grown := l.Len() - n; grown > 0 {
		cost = int64(grown) * costAppend
	}
	switch name {
	case "append", "insert":
		if len(args) > 0 {
			cost += own(args[len(args)-1])
		}
	case "extend":
		if len(args) == 1 {
			cost += freshOwn(args[0], l.Index, before, l.Len())
		}
	}
	if err := st.charge(cost); err != nil {
		return nil, err
	}
	return v, nil
}

func (st *callState) dictMethod(d *starlark.Dict, name string, args starlark.Tuple, call func() (starlark.Value, error)) (starlark.Value, error) {
	switch name {
	case "items":
		if err := st.charge(costList + int64(d.Len())*(costSlot+costTuple+2*costSlot)); err != nil {
			return nil, err
		}
		return call()
	case "keys", "values":
		if err := st.charge(costList + int64(d.Len())*costSlot); err != nil {
			return nil, err
		}
		return call()
	}
	n := d.Len()
	v, err := call()
	if err != nil {
		return nil, err
	}
	cost := entriesCost(n, d.Len())
	switch name {
	case "setdefault":
		if d.Len() > n && len(args) == 2 {
			cost += own(args[1])
		}
	case "popitem":
		cost = built(v)
	}
	if err := st.charge(cost); err != nil {
		return nil, err
	}
	return v, nil
}

func (st *callState) joinCheck(sep string, args starlark.Tuple) error {
	if len(args) != 1 {
		return nil
	}
	iterable, ok := args[0].(starlark.Iterable)
	if !ok {
		return nil
	}
	limit := st.lim.MaxAlloc
	iter := iterable.Iterate()
	defer iter.Done()
	n, count := 0, 0
	var e starlark.Value
	for iter.Next(&e) {
		s, ok := e.(starlark.String)
		if !ok {
			return nil // join reports it
		}
		if count > 0 {
			n += len(sep)
		}
		n += len(s)
		count++
		if n > limit {
			return allocErrorf("join would build a string of more than %d bytes (MaxAlloc)", limit)
		}
	}
	return nil
}

func (st *callState) replaceCheck(s string, args starlark.Tuple) error {
	if len(args) < 2 {
		return nil
	}
	oldV, ok1 := args[0].(starlark.String)
	newV, ok2 := args[1].(starlark.String)
	if !ok1 || !ok2 || len(newV) <= len(oldV) {
		return nil
	}
	count := strings.Count(s, string(oldV))
	if len(args) == 3 {
		if c, ok := args[2].(starlark.Int); ok {
			if c64, ok := c.Int64(); ok && c64 >= 0 && c64 < int64(count) {
				count = int(c64)
			}
		}
	}
	limit := st.lim.MaxAlloc
	if int64(len(s))+int64(count)*int64(len(newV)-len(oldV)) > int64(limit) {
		return allocErrorf("replace would build a string of more than %d bytes (MaxAlloc)", limit)
	}
	return nil
}

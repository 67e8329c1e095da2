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

// binary is x op y with the size checks.
func (st *callState) binary(op syntax.Token, x, y starlark.Value) (starlark.Value, error) {
	limit := st.lim.MaxAlloc
	switch op {
	case syntax.PLUS:
		n, okx := seqLen(x)
		m, oky := seqLen(y)
		if okx && oky && x.Type() == y.Type() && n+m > limit {
			return nil, allocErrorf("%s + %s would build %d %s; the limit is %d (MaxAlloc)", x.Type(), y.Type(), n+m, unit(x), limit)
		}
	case syntax.STAR:
		xi, xInt := x.(starlark.Int)
		yi, yInt := y.(starlark.Int)
		switch {
		case xInt && yInt:
			if intBits(xi)+intBits(yi) > maxIntBits {
				return nil, allocErrorf("int * int would have more than %d bits (about 131072 digits), the most an integer may have", maxIntBits)
			}
		case xInt:
			if err := repeatCheck(y, xi, limit); err != nil {
				return nil, err
			}
		case yInt:
			if err := repeatCheck(x, yi, limit); err != nil {
				return nil, err
			}
		}
	case syntax.PERCENT:
		if format, ok := x.(starlark.String); ok {
			n, deep := interpolateSize(string(format), y, limit)
			if err := textCheck("%", n, deep, limit); err != nil {
				return nil, err
			}
		}
	}
	return starlark.Binary(op, x, y)
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
	return a.st.binary(op, x, a.v)
}

func (a augOperand) extend(l *starlark.List, y starlark.Iterable) (starlark.Value, error) {
	limit := a.st.lim.MaxAlloc
	if n := starlark.Len(y); n >= 0 && l.Len()+n > limit {
		return nil, allocErrorf("list += %s would build %d elements; the limit is %d (MaxAlloc)", y.Type(), l.Len()+n, limit)
	}
	// Collect first: y may be l itself.
	for _, e := range elements(y) {
		if err := l.Append(e); err != nil {
			return nil, err
		}
	}
	return l, nil
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
// with a size check for the guarded methods of strings and lists.
func methodBuiltin(name string) *starlark.Builtin {
	return starlark.NewBuiltin(methodName(name), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return stateOf(thread).attr(args[0], name)
	})
}

func (st *callState) attr(x starlark.Value, name string) (starlark.Value, error) {
	var v starlark.Value
	if ha, ok := x.(starlark.HasAttrs); ok {
		var err error
		if v, err = ha.Attr(name); err != nil {
			return nil, err
		}
	}
	if v == nil {
		return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
	}
	real, ok := v.(*starlark.Builtin)
	if !ok || !guardedMethods[name] {
		return v, nil
	}
	var check func(args starlark.Tuple, kwargs []starlark.Tuple) error
	switch recv := x.(type) {
	case starlark.String:
		switch name {
		case "join":
			check = func(args starlark.Tuple, _ []starlark.Tuple) error { return st.joinCheck(string(recv), args) }
		case "replace":
			check = func(args starlark.Tuple, _ []starlark.Tuple) error { return st.replaceCheck(string(recv), args) }
		case "format":
			check = func(args starlark.Tuple, kwargs []starlark.Tuple) error {
				n, deep := formatSize(string(recv), args, kwargs, st.lim.MaxAlloc)
				return textCheck("format", n, deep, st.lim.MaxAlloc)
			}
		}
	case *starlark.List:
		if name == "extend" {
			check = func(args starlark.Tuple, _ []starlark.Tuple) error {
				if len(args) == 1 {
					if n := starlark.Len(args[0]); n >= 0 && recv.Len()+n > st.lim.MaxAlloc {
						return allocErrorf("extend would build a list of %d elements; the limit is %d (MaxAlloc)", recv.Len()+n, st.lim.MaxAlloc)
					}
				}
				return nil
			}
		}
	}
	if check == nil {
		return v, nil
	}
	return starlark.NewBuiltin(real.Name(), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := check(args, kwargs); err != nil {
			return nil, err
		}
		return real.CallInternal(thread, args, kwargs)
	}), nil
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

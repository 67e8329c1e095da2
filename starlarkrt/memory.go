package starlarkrt

import (
	"fmt"
	"math"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Memory accounting (issue 10 item 2). starlark-go has no hook for
// allocation, so every operation that builds a value charges an estimate
// of the bytes it allocates to the call's budget (Limits.MaxMemory) before
// it builds when the size is known in advance, and right after otherwise
// (never more than one operation's worth, which MaxAlloc bounds). The count
// is cumulative: a value that becomes garbage is not credited back, so the
// budget bounds everything a call allocates, deterministically; the same
// script on the same input stops at the same operation.
//
// The estimates were calibrated against the Go heap (runtime.MemStats on
// amd64): a dict is a 512-byte object whose first bucket holds its first
// entries, then 120-240 bytes per entry as its table grows; a list is 32
// bytes and 16 per element (66-88 per element when grown by append,
// counting the copies); a string its bytes plus a 16-byte header.
const (
	costString    = 16  // a string or bytes header; its bytes come on top
	costList      = 32  // a list without its elements
	costTuple     = 24  // a tuple without its elements
	costDict      = 512 // a dict, with the first bucket that holds its first entries
	costSlot      = 16  // one element of a list or tuple built at its size
	costAppend    = 32  // one element appended: its slot and the room the list grows into
	costEntry     = 128 // one dict entry past the first bucket, with its share of the table
	inlineEntries = 7   // entries a dict holds before it allocates a table
	costFunction  = 128 // a function value (lambda or nested def) and its cells
	costParam     = 16  // per parameter of a function value (its default)
	costStruct    = 64  // a struct without its fields
	costField     = 80  // one field of a struct
	costBox       = 16  // a float, a string header or a small value boxed afresh
	costBigInt    = 48  // an integer outside int32, without its digits
	costBuiltin   = 96  // a bound method
	costOther     = 64  // any other value (a range, a time, an iterable view)
)

// Bounds of Limits.MaxMemory, in bytes (issue 10 item 2): the default
// budget of a call, and the most any call may be given.
const (
	DefaultMaxMemory = 64 << 20 // bytes (64 MiB)
	MaxMemoryCeiling = 1 << 30  // bytes (1 GiB); larger values are lowered to it
)

// charge adds n bytes to the call's allocation count. When that would pass
// the budget it stops the thread with KindMemory and returns the error
// instead; the bytes are not counted.
func (st *callState) charge(n int64) error {
	if n <= 0 {
		return nil
	}
	if st.mem+n <= st.lim.MaxMemory {
		st.mem += n
		return nil
	}
	msg := fmt.Sprintf("the script exceeded its memory budget of %s (it had allocated %s and needed %s more)",
		bytesText(st.lim.MaxMemory), bytesText(st.mem), bytesText(n))
	st.stop(st.thread, KindMemory, msg, nil)
	return &memoryError{msg: msg}
}

// memoryError is a charge refused by the budget.
type memoryError struct{ msg string }

func (e *memoryError) Error() string { return e.msg }

// bytesText writes n bytes in MiB (or KiB, or bytes) for messages.
func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		if n%(1<<20) == 0 {
			return fmt.Sprintf("%d MiB", n>>20)
		}
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// own is the heap a value may have taken of its own when it was made by an
// operation that charged nothing (arithmetic, indexing, a bound method):
// what storing it in a new slot of a container charges on top of the slot.
// Lists, tuples, dicts, functions and structs are charged when they are
// built, so they cost nothing here.
func own(v starlark.Value) int64 {
	switch v := v.(type) {
	case starlark.Int:
		return bigOwn(v)
	case starlark.NoneType, starlark.Bool:
		return 0
	case starlark.String, starlark.Bytes, starlark.Float:
		return costBox
	case *starlark.List, starlark.Tuple, *starlark.Dict, *starlark.Function, *starlarkstruct.Struct:
		return 0
	case *starlark.Builtin:
		return costBuiltin
	}
	return costOther
}

// bigOwn is own for integers outside int32 (which starlark-go keeps on the
// heap, as a big.Int) and 0 for everything else: what storing a value over
// an existing slot charges. Only integers can be large without having been
// charged when they were made (b + 1 on a 100,000-digit b).
func bigOwn(v starlark.Value) int64 {
	x, ok := v.(starlark.Int)
	if !ok {
		return 0
	}
	if i, ok := x.Int64(); ok {
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return 0
		}
		return costBigInt + 8
	}
	return costBigInt + int64(intBits(x)+7)/8
}

// dictCost is the charge for a dict of n entries.
func dictCost(n int) int64 { return costDict + entriesCost(0, n) }

// entriesCost is the charge for a dict growing from n to m entries.
func entriesCost(n, m int) int64 {
	return int64(max(m, inlineEntries)-max(n, inlineEntries)) * costEntry
}

// textCost is the charge for a string or bytes value of n bytes.
func textCost(n int) int64 { return costString + int64(n) }

// built is the charge for a value just built by an operation whose
// elements already existed (a literal, a copy): the container and its
// slots, and the big integers among its elements.
func built(v starlark.Value) int64 {
	switch v := v.(type) {
	case *starlark.List:
		n := int64(costList) + int64(v.Len())*costSlot
		for i := range v.Len() {
			n += bigOwn(v.Index(i))
		}
		return n
	case starlark.Tuple:
		n := int64(costTuple) + int64(len(v))*costSlot
		for _, e := range v {
			n += bigOwn(e)
		}
		return n
	case *starlark.Dict:
		return dictCost(v.Len()) + int64(v.Len())*costBox
	case *starlark.Function:
		return costFunction + int64(v.NumParams())*costParam
	case starlark.String:
		return textCost(len(v))
	case starlark.Bytes:
		return textCost(len(v))
	case *starlarkstruct.Struct:
		return costStruct + int64(len(v.AttrNames()))*costField
	}
	return own(v)
}

// treeSize is the charge for a value freshly built in full, with nothing
// shared: JSON decoded into Starlark values (the event, json.decode, what
// the host returns).
func treeSize(v starlark.Value) int64 {
	switch v := v.(type) {
	case starlark.String:
		return textCost(len(v))
	case *starlark.List:
		n := int64(costList)
		for i := range v.Len() {
			n += costSlot + treeSize(v.Index(i))
		}
		return n
	case starlark.Tuple:
		n := int64(costTuple)
		for _, e := range v {
			n += costSlot + treeSize(e)
		}
		return n
	case *starlark.Dict:
		n := dictCost(v.Len())
		for _, item := range v.Items() {
			n += treeSize(item[0]) + treeSize(item[1])
		}
		return n
	case *starlarkstruct.Struct:
		n := int64(costStruct)
		for _, name := range v.AttrNames() {
			f, _ := v.Attr(name)
			n += costField + treeSize(f)
		}
		return n
	}
	return own(v)
}

// freshOwn sums own over the elements of v from index from on: the charge
// for elements drawn from an iterable that may have made them afresh (a
// string's elems, a range of big integers). Elements copied from a list,
// tuple or dict already existed and cost nothing more.
func freshOwn(src starlark.Value, elems func(int) starlark.Value, from, to int) int64 {
	switch src := src.(type) {
	case *starlark.List, starlark.Tuple, *starlark.Dict:
		return 0
	case *longRange:
		if smallRange(src.r) {
			return 0
		}
	default:
		if smallRange(src) {
			return 0
		}
	}
	var n int64
	for i := from; i < to; i++ {
		n += own(elems(i))
	}
	return n
}

// smallRange reports whether v is a range whose integers all fit in int32
// (its ends do), so that drawing them allocates nothing.
func smallRange(v starlark.Value) bool {
	r, ok := v.(starlark.Indexable)
	if !ok || v.Type() != "range" {
		return false
	}
	n := r.Len()
	return n == 0 || bigOwn(r.Index(0)) == 0 && bigOwn(r.Index(n-1)) == 0
}

// Hidden builtins of the rewrite that charge for what the interpreter
// builds by itself (see rewrite.go). Each returns its argument.

// newBuiltin is <new>(x): x was just built by a list, tuple or dict
// literal, a lambda or a nested def.
var newBuiltin = starlark.NewBuiltin(opNew, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if err := stateOf(thread).charge(built(args[0])); err != nil {
		return nil, err
	}
	return args[0], nil
})

// elemBuiltin is <elem>(x): x is about to be appended to the list a
// comprehension builds.
var elemBuiltin = starlark.NewBuiltin(opElem, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if err := stateOf(thread).charge(costAppend + own(args[0])); err != nil {
		return nil, err
	}
	return args[0], nil
})

// entryBuiltin is <entry>(v): v is about to be stored, with a key, in the
// dict a comprehension builds.
var entryBuiltin = starlark.NewBuiltin(opEntry, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if err := stateOf(thread).charge(costEntry + costBox + own(args[0])); err != nil {
		return nil, err
	}
	return args[0], nil
})

// compBuiltin is <comp>(x): x is the list or dict a comprehension built,
// whose elements were charged one by one.
var compBuiltin = starlark.NewBuiltin(opComp, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	var n int64 = costList
	if _, ok := args[0].(*starlark.Dict); ok {
		n = costDict
	}
	if err := stateOf(thread).charge(n); err != nil {
		return nil, err
	}
	return args[0], nil
})

// spreadBuiltin is <spread>(x) for f(*x) and f(**x): the call copies x
// into a new tuple or dict.
var spreadBuiltin = starlark.NewBuiltin(opSpread, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x := args[0]
	var n int64
	switch x := x.(type) {
	case *starlark.Dict:
		n = dictCost(x.Len())
	default:
		if l := starlark.Len(x); l > 0 {
			n = costTuple + int64(l)*costSlot
		}
	}
	if err := stateOf(thread).charge(n); err != nil {
		return nil, err
	}
	return x, nil
})

// sliceBuiltin is <slice>(x) for x[lo:hi:step]: it wraps x so that the
// interpreter, which works out the indices, asks the wrapper for the
// slice, and the wrapper charges for it first.
var sliceBuiltin = starlark.NewBuiltin(opSlice, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if s, ok := args[0].(starlark.Sliceable); ok {
		return &sliceOperand{Sliceable: s, st: stateOf(thread)}, nil
	}
	return args[0], nil // the interpreter reports it
})

// sliceOperand is the x of x[lo:hi:step] on its way to the interpreter's
// SLICE; nothing else ever sees it.
type sliceOperand struct {
	starlark.Sliceable
	st *callState
}

func (s *sliceOperand) Slice(start, end, step int) starlark.Value {
	n := 0
	switch {
	case step > 0 && end > start:
		n = (end - start + step - 1) / step
	case step < 0 && start > end:
		n = (start - end - step - 1) / -step
	}
	var cost int64
	switch s.Sliceable.(type) {
	case *starlark.List:
		cost = costList + int64(n)*costSlot
	case starlark.Tuple:
		cost = costTuple // a slice with step 1 shares the elements
		if step != 1 {
			cost += int64(n) * costSlot
		}
	case starlark.String, starlark.Bytes:
		cost = costString
		if step != 1 {
			cost += int64(n)
		}
	default:
		cost = costOther + int64(n)*costSlot
	}
	if err := s.st.charge(cost); err != nil {
		// Slice cannot fail: the charge stopped the thread, which ends at
		// its next step, before anything sees this value.
		return starlark.None
	}
	return s.Sliceable.Slice(start, end, step)
}

// setBuiltin is <set>(x) for the target x[k] of an assignment: it wraps x
// so that the interpreter's SETINDEX stores through the wrapper, which
// charges for a new dict entry, or for a large integer stored over an old
// one.
var setBuiltin = starlark.NewBuiltin(opSet, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	return &setTarget{x: args[0], st: stateOf(thread)}, nil
})

// setTarget is the x of x[k] = v on its way to the interpreter's
// SETINDEX, which sees a mapping and calls SetKey; nothing else ever sees
// it. SetKey does what SETINDEX does for the real x.
type setTarget struct {
	x  starlark.Value
	st *callState
}

var _ starlark.HasSetKey = (*setTarget)(nil)

func (t *setTarget) String() string        { return t.x.String() }
func (t *setTarget) Type() string          { return t.x.Type() }
func (t *setTarget) Freeze()               { t.x.Freeze() }
func (t *setTarget) Truth() starlark.Bool  { return t.x.Truth() }
func (t *setTarget) Hash() (uint32, error) { return t.x.Hash() }

func (t *setTarget) Get(k starlark.Value) (starlark.Value, bool, error) {
	if m, ok := t.x.(starlark.Mapping); ok {
		return m.Get(k)
	}
	return nil, false, fmt.Errorf("%s value does not support item assignment", t.x.Type())
}

func (t *setTarget) SetKey(k, v starlark.Value) error { return t.st.setIndex(t.x, k, v) }

// setItemBuiltin is <setitem>(v, x, k), the statement x[k] = v.
var setItemBuiltin = starlark.NewBuiltin(opSetItm, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	return starlark.None, stateOf(thread).setIndex(args[1], args[2], args[0])
})

// setIndex does x[k] = v as the interpreter's SETINDEX does, charging for
// a new dict entry, or for a large integer stored over an old value.
func (st *callState) setIndex(x, k, v starlark.Value) error {
	t := setTarget{x: x, st: st}
	switch x := t.x.(type) {
	case starlark.HasSetKey:
		n := starlark.Len(x)
		if err := x.SetKey(k, v); err != nil {
			return err
		}
		if m := starlark.Len(x); m > n {
			return t.st.charge(entriesCost(n, m) + own(k) + own(v))
		}
		return t.st.charge(bigOwn(v))
	case starlark.HasSetIndex:
		n := x.Len()
		i, err := starlark.AsInt32(k)
		if err != nil {
			return err
		}
		orig := i
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			if n == 0 {
				return fmt.Errorf("index %d out of range: empty %s", orig, x.Type())
			}
			return fmt.Errorf("%s index %d out of range [%d:%d]", x.Type(), orig, -n, n-1)
		}
		if err := t.st.charge(bigOwn(v)); err != nil {
			return err
		}
		return x.SetIndex(i, v)
	}
	return fmt.Errorf("%s value does not support item assignment", t.x.Type())
}

package starlarkrt

import (
	"context"
	"fmt"
	"runtime/debug"

	starjson "go.starlark.net/lib/json"
	starmath "go.starlark.net/lib/math"
	startime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// predeclared is the environment of every script: the modules and host
// functions of the package doc, guarded replacements of the universal
// builtins that can build large values, and the hidden builtins of the
// rewrite. It is frozen and shared by all calls; per-call state is found
// through the thread.
var predeclared = func() starlark.StringDict {
	d := starlark.StringDict{
		"json":      jsonModule(),
		"time":      timeModule(),
		"math":      starmath.Module,
		"ledger":    &starlarkstruct.Module{Name: "ledger", Members: starlark.StringDict{"get": starlark.NewBuiltin("ledger.get", ledgerGet), "put": starlark.NewBuiltin("ledger.put", ledgerPut)}},
		"session":   starlark.NewBuiltin("session", sessionFn),
		"call_tool": starlark.NewBuiltin("call_tool", callTool("action_id")),

		"send_to_session": starlark.NewBuiltin("send_to_session", sendToSession),

		// Guarded universal builtins.
		"range":   starlark.NewBuiltin("range", rangeFn),
		"len":     starlark.NewBuiltin("len", lenFn),
		"str":     starlark.NewBuiltin("str", textFn("str", modeStr)),
		"repr":    starlark.NewBuiltin("repr", textFn("repr", modeRepr)),
		"print":   starlark.NewBuiltin("print", printFn),
		"fail":    starlark.NewBuiltin("fail", failFn),
		"getattr": starlark.NewBuiltin("getattr", getattrFn),
		"int":     starlark.NewBuiltin("int", intFn),

		// Universal builtins that copy, charging the memory budget.
		"list":      copyingBuiltin("list", costList, costSlot),
		"tuple":     copyingBuiltin("tuple", costTuple, costSlot),
		"sorted":    copyingBuiltin("sorted", costList, costSlot),
		"reversed":  copyingBuiltin("reversed", costList, costSlot),
		"enumerate": copyingBuiltin("enumerate", costList, costSlot+costTuple+2*costSlot),
		"zip":       starlark.NewBuiltin("zip", zipFn),
		"dict":      chargedBuiltin("dict"),
		"bytes":     chargedBuiltin("bytes"),
		"dir":       chargedBuiltin("dir"),

		// Hidden builtins of the rewrite.
		opAdd:    binaryBuiltin(opAdd, syntax.PLUS),
		opMul:    binaryBuiltin(opMul, syntax.STAR),
		opMod:    binaryBuiltin(opMod, syntax.PERCENT),
		opAug:    augBuiltin,
		opPipe:   binaryBuiltin(opPipe, syntax.PIPE),
		opShift:  binaryBuiltin(opShift, syntax.LTLT),
		opNew:    newBuiltin,
		opElem:   elemBuiltin,
		opEntry:  entryBuiltin,
		opComp:   compBuiltin,
		opSlice:  sliceBuiltin,
		opSet:    setBuiltin,
		opSetItm: setItemBuiltin,
		opSpread: spreadBuiltin,
	}
	for name := range guardedMethods {
		d[methodName(name)] = methodBuiltin(name)
		d[callName(name)] = callBuiltin(name)
	}
	d.Freeze()
	return d
}()

func isPredeclared(name string) bool { return predeclared.Has(name) }

func universal(name string) *starlark.Builtin { return starlark.Universe[name].(*starlark.Builtin) }

// timeModule is lib/time with now() reading the host's clock.
func timeModule() *starlarkstruct.Module {
	members := starlark.StringDict{}
	for k, v := range startime.Module.Members {
		members[k] = v
	}
	members["now"] = starlark.NewBuiltin("now", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs("now", args, kwargs, 0); err != nil {
			return nil, err
		}
		return stateOf(thread).now()
	})
	return &starlarkstruct.Module{Name: "time", Members: members}
}

// now reads the host clock. It does not take mu (see Host.Now).
func (st *callState) now() (v starlark.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &hostPanic{name: "time.now", value: r, stack: string(debug.Stack())}
		}
	}()
	return startime.Time(st.host.Now()), nil
}

// jsonModule is lib/json with size checks on encode, encode_indent,
// indent and decode.
func jsonModule() *starlarkstruct.Module {
	encode := universalOf(starjson.Module, "encode")
	indent := universalOf(starjson.Module, "indent")
	decode := universalOf(starjson.Module, "decode")
	guardedEncode := func(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) == 1 {
			limit := stateOf(thread).lim.MaxAlloc
			n, deep := textSize(args[0], modeJSON, limit)
			if err := textCheck("json.encode", n, deep, limit); err != nil {
				return nil, err
			}
		}
		return stateOf(thread).built(encode.CallInternal(thread, args, kwargs))
	}
	guardedIndent := func(thread *starlark.Thread, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		prefix, ind := "", "\t"
		if err := starlark.UnpackArgs(name, nil, kwargs, "prefix?", &prefix, "indent?", &ind); err != nil {
			return nil, err
		}
		if len(args) == 1 {
			if s, ok := args[0].(starlark.String); ok {
				limit := stateOf(thread).lim.MaxAlloc
				if indentSize(string(s), prefix, ind, limit) > limit {
					return nil, allocErrorf("%s would build a text of more than %d bytes (MaxAlloc)", name, limit)
				}
			}
		}
		return stateOf(thread).built(indent.CallInternal(thread, args, kwargs))
	}
	return &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{
		"encode": starlark.NewBuiltin("json.encode", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			return guardedEncode(thread, args, kwargs)
		}),
		"encode_indent": starlark.NewBuiltin("json.encode_indent", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "prefix?", new(string), "indent?", new(string)); err != nil {
				return nil, err
			}
			s, err := guardedEncode(thread, args, nil)
			if err != nil {
				return nil, err
			}
			return guardedIndent(thread, b.Name(), starlark.Tuple{s}, kwargs)
		}),
		"indent": starlark.NewBuiltin("json.indent", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			return guardedIndent(thread, b.Name(), args, kwargs)
		}),
		"decode": starlark.NewBuiltin("json.decode", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) >= 1 {
				if s, ok := args[0].(starlark.String); ok {
					depth, number := jsonScan(string(s))
					if depth > maxNesting {
						return nil, allocErrorf("json.decode: the text nests more than %d levels deep", maxNesting)
					}
					if number > maxIntDigits+16 {
						return nil, allocErrorf("json.decode: a number of %d characters is longer than %d digits", number, maxIntDigits)
					}
				}
			}
			st := stateOf(thread)
			v, err := decode.CallInternal(thread, args, kwargs)
			if err != nil {
				return nil, err
			}
			if err := st.charge(treeSize(v)); err != nil {
				return nil, err
			}
			return v, nil
		}),
	}}
}

func universalOf(m *starlarkstruct.Module, name string) *starlark.Builtin {
	return m.Members[name].(*starlark.Builtin)
}

// maxIntDigits bounds the integer texts int() and json.decode parse
// (parsing is quadratic in the length): what the ledger can store.
const maxIntDigits = 131_072

// rangeFn is range, returning a longRange when the range is longer than
// MaxAlloc.
func rangeFn(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := universal("range").CallInternal(thread, args, kwargs)
	if err != nil {
		return nil, err
	}
	st := stateOf(thread)
	if starlark.Len(v) > st.lim.MaxAlloc {
		return &longRange{r: v, st: st, thread: thread}, nil
	}
	return v, nil
}

// longRange is a range longer than MaxAlloc. A for loop may run over it
// (each iteration costs steps, so the step budget bounds it), but a
// builtin that consumes it whole in one step (list, tuple, sorted, dict,
// enumerate, zip, join, max, ...) is stopped after MaxAlloc elements and
// the call fails with KindAlloc. It has no length for those builtins to
// preallocate (len() still works), and cannot be indexed or sliced.
type longRange struct {
	r      starlark.Value // starlark-go's range value
	st     *callState
	thread *starlark.Thread
}

var (
	_ starlark.Iterable   = (*longRange)(nil)
	_ starlark.Container  = (*longRange)(nil)
	_ starlark.Comparable = (*longRange)(nil)
)

func (r *longRange) String() string        { return r.r.String() }
func (r *longRange) Type() string          { return "range" }
func (r *longRange) Freeze()               {}
func (r *longRange) Truth() starlark.Bool  { return true }
func (r *longRange) Hash() (uint32, error) { return r.r.Hash() }

// length is not Len: starlark-go's list, tuple and sorted would
// preallocate that many elements.
func (r *longRange) length() int { return starlark.Len(r.r) }

func (r *longRange) Has(y starlark.Value) (bool, error) {
	return r.r.(starlark.Container).Has(y)
}

func (r *longRange) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return starlark.CompareDepth(op, r.r, y.(*longRange).r, depth)
}

func (r *longRange) Iterate() starlark.Iterator {
	return &longRangeIter{it: r.r.(starlark.Iterable).Iterate(), r: r, steps: r.thread.ExecutionSteps()}
}

// longRangeIter counts the elements drawn since the thread last executed
// a step: in a for loop every element costs a step, inside a builtin none
// does.
type longRangeIter struct {
	it    starlark.Iterator
	r     *longRange
	steps uint64
	run   int
}

func (it *longRangeIter) Next(p *starlark.Value) bool {
	if s := it.r.thread.ExecutionSteps(); s != it.steps {
		it.steps, it.run = s, 0
	}
	it.run++
	if limit := it.r.st.lim.MaxAlloc; it.run > limit {
		it.r.st.stop(it.r.thread, KindAlloc, fmt.Sprintf("%s has more than %d elements, too many to consume in one step (MaxAlloc); only a for loop may run over it", it.r.r, limit), nil)
		return false
	}
	return it.it.Next(p)
}

func (it *longRangeIter) Done() { it.it.Done() }

func lenFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 1 && len(kwargs) == 0 {
		if r, ok := args[0].(*longRange); ok {
			return starlark.MakeInt(r.length()), nil
		}
	}
	return universal("len").CallInternal(thread, args, kwargs)
}

// textFn is str or repr with a size check.
func textFn(name string, mode textMode) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) == 1 {
			limit := stateOf(thread).lim.MaxAlloc
			n, deep := textSize(args[0], mode, limit)
			if err := textCheck(name, n, deep, limit); err != nil {
				return nil, err
			}
		}
		return stateOf(thread).built(universal(name).CallInternal(thread, args, kwargs))
	}
}

// copyingBuiltin is a universal builtin that builds a list or tuple of as
// many elements as its first argument has (list, tuple, sorted, reversed,
// enumerate): charged before it builds when that length is known, after
// otherwise, plus whatever elements the argument made afresh.
func copyingBuiltin(name string, header, perElem int64) *starlark.Builtin {
	real := universal(name)
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		st := stateOf(thread)
		perElem := perElem
		if name == "sorted" && len(kwargs) > 0 {
			perElem += costSlot // the keys
		}
		charged := false
		if len(args) >= 1 {
			if n := starlark.Len(args[0]); n >= 0 {
				if err := st.charge(header + int64(n)*perElem); err != nil {
					return nil, err
				}
				charged = true
			}
		}
		v, err := real.CallInternal(thread, args, kwargs)
		if err != nil || len(args) == 0 {
			return v, err
		}
		seq, ok := v.(starlark.Indexable)
		if !ok {
			return v, nil
		}
		var cost int64
		if !charged {
			cost = header + int64(seq.Len())*perElem
		}
		if name != "enumerate" {
			cost += freshOwn(args[0], seq.Index, 0, seq.Len())
		}
		if err := st.charge(cost); err != nil {
			return nil, err
		}
		return v, nil
	})
}

// zipFn is zip, charged for its tuples.
func zipFn(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	st := stateOf(thread)
	n := -1
	for _, a := range args {
		if m := starlark.Len(a); m >= 0 && (n < 0 || m < n) {
			n = m
		}
	}
	perElem := int64(costSlot+costTuple) + int64(len(args))*costSlot
	if n >= 0 {
		if err := st.charge(costList + int64(n)*perElem); err != nil {
			return nil, err
		}
	}
	v, err := universal("zip").CallInternal(thread, args, kwargs)
	if err != nil || n >= 0 {
		return v, err
	}
	if err := st.charge(costList + int64(starlark.Len(v))*perElem); err != nil {
		return nil, err
	}
	return v, nil
}

// chargedBuiltin is a universal builtin whose result is new: charged
// after it is built (dict, bytes, dir).
func chargedBuiltin(name string) *starlark.Builtin {
	real := universal(name)
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		st := stateOf(thread)
		v, err := real.CallInternal(thread, args, kwargs)
		if err != nil {
			return nil, err
		}
		cost := built(v)
		if l, ok := v.(*starlark.List); ok { // dir: a list of new strings
			cost += int64(l.Len()) * costString
		}
		if err := st.charge(cost); err != nil {
			return nil, err
		}
		return v, nil
	})
}

// printFn accepts print's arguments and discards them: scripts have no
// output stream.
func printFn(_ *starlark.Thread, b *starlark.Builtin, _ starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "sep?", new(string)); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

func failFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "sep?", &sep); err != nil {
		return nil, err
	}
	limit := stateOf(thread).lim.MaxAlloc
	n := len(sep) * len(args)
	for _, a := range args {
		m, deep := textSize(a, modeStr, limit)
		n += m
		if err := textCheck("fail", n, deep, limit); err != nil {
			return nil, err
		}
	}
	return universal("fail").CallInternal(thread, args, kwargs)
}

// getattrFn is getattr, routing the guarded methods through their guards.
func getattrFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) >= 2 && len(kwargs) == 0 {
		if name, ok := args[1].(starlark.String); ok && guardedMethods[string(name)] {
			v, err := stateOf(thread).attr(args[0], string(name))
			if err != nil && len(args) == 3 {
				return args[2], nil
			}
			return v, err
		}
	}
	return universal("getattr").CallInternal(thread, args, kwargs)
}

func intFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) >= 1 {
		if s, ok := args[0].(starlark.String); ok && len(s) > maxIntDigits+16 {
			return nil, allocErrorf("int: a text of %d characters is longer than %d digits", len(s), maxIntDigits)
		}
	}
	return stateOf(thread).built(universal("int").CallInternal(thread, args, kwargs))
}

// Host functions.

func ledgerGet(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var namespace, key string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "namespace", &namespace, "key", &key); err != nil {
		return nil, err
	}
	st := stateOf(thread)
	var (
		value jsonvalue.Value
		found bool
	)
	if err := st.hostCall(b.Name(), func(ctx context.Context) (err error) {
		value, found, err = st.host.LedgerGet(ctx, namespace, key)
		return err
	}); err != nil {
		return nil, err
	}
	if !found {
		return starlark.None, nil
	}
	return st.hostValue(b.Name(), value)
}

func ledgerPut(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		namespace, key string
		v              starlark.Value
	)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "namespace", &namespace, "key", &key, "value", &v); err != nil {
		return nil, err
	}
	st := stateOf(thread)
	raw, err := encodeValue(v, st.lim.MaxOutput, "value")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	var version int64
	if err := st.hostCall(b.Name(), func(ctx context.Context) (err error) {
		version, err = st.host.LedgerPut(ctx, namespace, key, raw)
		return err
	}); err != nil {
		return nil, err
	}
	return starlark.MakeInt64(version), nil
}

func sessionFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var actionID, id string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "action_id", &actionID, "id", &id); err != nil {
		return nil, err
	}
	st := stateOf(thread)
	var sv *SessionView
	if err := st.hostCall(b.Name(), func(ctx context.Context) (err error) {
		sv, err = st.host.Session(ctx, actionID, id)
		return err
	}); err != nil {
		return nil, err
	}
	if sv == nil {
		return starlark.None, nil
	}
	if err := st.charge(costStruct + 5*costField + costList + int64(len(sv.Inputs))*costSlot + textCost(len(sv.ID)) + textCost(len(sv.Status))); err != nil {
		return nil, err
	}
	input, err := st.hostValue(b.Name(), sv.Input)
	if err != nil {
		return nil, err
	}
	inputs := make([]starlark.Value, len(sv.Inputs))
	for i, raw := range sv.Inputs {
		if inputs[i], err = st.hostValue(b.Name(), raw); err != nil {
			return nil, err
		}
	}
	return starlarkstruct.FromStringDict(starlark.String("session"), starlark.StringDict{
		"id":          starlark.String(sv.ID),
		"input":       input,
		"status":      starlark.String(sv.Status),
		"inputs":      starlark.NewList(inputs),
		"input_count": starlark.MakeInt(sv.InputCount),
	}), nil
}

// callTool is call_tool(<param>, input): Host.CallTool with the first
// argument (an action id for scripts, a tool name for snippets).
// MessageSender is implemented by a Host whose scripts may message other
// sessions (G1): send_to_session(action_id, id, message, key=None).
type MessageSender interface {
	SendToSession(ctx context.Context, actionID, id, message, key string) (seq int64, err error)
}

// sendToSession is send_to_session(action_id, id, message, key=None): a
// message to another session, delivered with the turn's commit; it
// returns the message's input sequence on that session.
func sendToSession(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var actionID, id, message string
	var keyArg starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "action_id", &actionID, "id", &id, "message", &message, "key?", &keyArg); err != nil {
		return nil, err
	}
	key := ""
	switch k := keyArg.(type) {
	case starlark.NoneType:
	case starlark.String:
		key = string(k)
	default:
		return nil, fmt.Errorf("%s: for parameter key: got %s, want string or None", b.Name(), keyArg.Type())
	}
	st := stateOf(thread)
	m, ok := st.host.(MessageSender)
	if !ok {
		return nil, fmt.Errorf("%s: this script cannot message sessions", b.Name())
	}
	var seq int64
	if err := st.hostCall(b.Name(), func(ctx context.Context) (err error) {
		seq, err = m.SendToSession(ctx, actionID, id, message, key)
		return err
	}); err != nil {
		return nil, err
	}
	return starlark.MakeInt64(seq), nil
}

func callTool(param string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return callToolWith(thread, b, args, kwargs, param)
	}
}

func callToolWith(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, param string) (starlark.Value, error) {
	var (
		actionID string
		input    starlark.Value
	)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, param, &actionID, "input", &input); err != nil {
		return nil, err
	}
	st := stateOf(thread)
	raw, err := encodeValue(input, st.lim.MaxOutput, "input")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	var output jsonvalue.Value
	if err := st.hostCall(b.Name(), func(ctx context.Context) (err error) {
		output, err = st.host.CallTool(ctx, actionID, raw)
		return err
	}); err != nil {
		return nil, err
	}
	return st.hostValue(b.Name(), output)
}

// hostValue converts JSON from the host, charging the memory budget for
// it; a failure to convert is the host's.
func (st *callState) hostValue(name string, raw jsonvalue.Value) (starlark.Value, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, &hostError{name: name, err: fmt.Errorf("the host returned unusable JSON: %w", err)}
	}
	if err := st.charge(treeSize(v)); err != nil {
		return nil, err
	}
	return v, nil
}

package starlarkrt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Default limits, used for every zero field of Limits.
const (
	DefaultMaxSteps  = 10_000_000      // Starlark execution steps
	DefaultTimeout   = 5 * time.Second // wall clock
	DefaultMaxOutput = 1 << 20         // bytes of JSON (1 MiB, jsonvalue.MaxBytes)
	DefaultMaxSource = 256 << 10       // bytes of source (256 KiB)
	DefaultMaxAlloc  = 1_000_000       // elements or bytes built in one step
)

// DefaultMaxMemory and MaxMemoryCeiling (memory.go) bound Limits.MaxMemory.

// abandonGrace is how long Call waits, after the deadline, for a script
// stuck inside one long built-in to notice its cancellation. After that
// Call returns and leaves the goroutine to stop at its next step.
const abandonGrace = 250 * time.Millisecond

// Limits bound one call. Zero fields take the defaults (DefaultMaxSteps and
// so on).
type Limits struct {
	// MaxSteps bounds the Starlark execution steps of the whole call (top
	// level and entry function). Default 10,000,000.
	MaxSteps uint64
	// Timeout is the wall-clock limit of the call, on top of any deadline
	// of the caller's context. Default 5s.
	Timeout time.Duration
	// MaxOutput bounds the JSON encoding of the result, and of each value
	// the script hands to the host (ledger.put, call_tool), in bytes.
	// Default 1 MiB.
	MaxOutput int
	// MaxSource bounds the source text, in bytes. Default 256 KiB.
	MaxSource int
	// MaxAlloc bounds what a single operation may build in one go: the
	// length of a range that is materialised, of a string, bytes, list
	// or tuple made by +, * or %, by str.join, str.replace, str.format or
	// list.extend, and of the text made by str, repr, fail and json.
	// Elements for lists and tuples, bytes for text. Default 1,000,000.
	MaxAlloc int
	// MaxMemory is the call's memory budget, in bytes: the estimated size
	// of every value the call builds (strings, lists, tuples, dicts,
	// functions, elements stored into containers, the event and what the
	// host returns), counted cumulatively, garbage included. Passing it
	// fails the call with KindMemory (issue 10 item 2). Default
	// DefaultMaxMemory (64 MiB); values over MaxMemoryCeiling (1 GiB) are
	// lowered to it.
	MaxMemory int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxSource <= 0 {
		l.MaxSource = DefaultMaxSource
	}
	if l.MaxAlloc <= 0 {
		l.MaxAlloc = DefaultMaxAlloc
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = DefaultMaxMemory
	}
	l.MaxMemory = min(l.MaxMemory, MaxMemoryCeiling)
	return l
}

// Host is what a script may reach beyond pure computation. Every method
// gets the call's context, which ends at the call's deadline; methods must
// return promptly once it is done. The runtime never calls two methods at
// once for one call, and never calls LedgerGet, LedgerPut, Session or
// CallTool after Call has returned.
type Host interface {
	// LedgerGet reads a KV value; found is false when there is none.
	LedgerGet(ctx context.Context, namespace, key string) (value jsonvalue.Value, found bool, err error)
	// LedgerPut writes a KV value and returns its new version.
	LedgerPut(ctx context.Context, namespace, key string, value jsonvalue.Value) (version int64, err error)
	// Session returns the session of a tool action (SPEC X6), or nil, nil
	// when there is none.
	Session(ctx context.Context, actionID, id string) (*SessionView, error)
	// CallTool calls a tool action with input and returns its output.
	CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (output jsonvalue.Value, err error)
	// Now is the injected clock, read by time.now(). It is called without
	// the call's context and may be called after Call has returned (by a
	// script that Call abandoned), so it must have no side effects.
	Now() time.Time
}

// SessionView is a session as a script sees it through session().
type SessionView struct {
	ID     string
	Input  jsonvalue.Value
	Status string
	// Inputs are the session's latest inputs in listing order, each a JSON
	// object describing one input.
	Inputs []jsonvalue.Value
	// InputCount is how many inputs the session has in all.
	InputCount int
}

// Kinds of ScriptError.
const (
	// KindError: the script failed (fail(), a Starlark error, a bad
	// program or entry function, an event that cannot be converted).
	KindError = "error"
	// KindSteps: the step budget (Limits.MaxSteps) ran out.
	KindSteps = "steps"
	// KindTimeout: the deadline passed (Limits.Timeout or the caller's).
	KindTimeout = "timeout"
	// KindCancelled: the caller's context was cancelled.
	KindCancelled = "cancelled"
	// KindOutputTooLarge: the result's JSON exceeds Limits.MaxOutput.
	KindOutputTooLarge = "output_too_large"
	// KindOutputInvalid: the result cannot be converted to storable JSON
	// (a function, a non-string dict key, NaN, a NUL character, ...).
	KindOutputInvalid = "output_invalid"
	// KindAlloc: an operation refused to build something larger than
	// Limits.MaxAlloc, or a value nested too deeply to handle.
	KindAlloc = "alloc"
	// KindMemory: the call's values passed its memory budget
	// (Limits.MaxMemory). Deterministic: the same script on the same input
	// stops at the same operation, so retrying is pointless.
	KindMemory = "memory"
	// KindHost: a Host method failed; Err holds its error.
	KindHost = "host"
	// KindPanic: a Go panic was recovered (in a Host method or in the
	// interpreter); the process is unaffected.
	KindPanic = "panic"
)

// ScriptError is the error Call returns for everything that goes wrong
// while compiling or running a script.
type ScriptError struct {
	Kind    string // one of the Kind constants
	Message string // what went wrong, without position
	// Position is file:line:col of the innermost Starlark frame when the
	// error happened (or of a compile error); empty if unknown.
	Position string
	// Backtrace is the Starlark backtrace ("Traceback (most recent call
	// last): ..." with file:line:col per frame), empty if none.
	Backtrace string
	// GoStack is the Go stack of a recovered panic, for server logs only.
	GoStack string
	// Err is the underlying error: the host's error, the context's error,
	// or the *starlark.EvalError; may be nil.
	Err error
}

// Error returns "position: message" (or the message alone).
func (e *ScriptError) Error() string {
	if e.Position != "" {
		return e.Position + ": " + e.Message
	}
	return e.Message
}

// Unwrap returns Err.
func (e *ScriptError) Unwrap() error { return e.Err }

// Call runs src's top level, then calls entry(event) with event converted
// from JSON (see the package doc for the conversions) and returns the
// result as JSON. It runs on a fresh thread under lim. Every failure is a
// *ScriptError; Call never panics for anything a script does.
func Call(ctx context.Context, filename, src, entry string, event jsonvalue.Value, host Host, lim Limits) (jsonvalue.Value, error) {
	lim = lim.withDefaults()
	if len(src) > lim.MaxSource {
		return nil, &ScriptError{Kind: KindError, Message: fmt.Sprintf("source is %d bytes; the limit is %d", len(src), lim.MaxSource)}
	}
	p, err := compile(filename, src)
	if err != nil {
		return nil, compileScriptError(err)
	}
	if err := p.checkEntry(entry); err != nil {
		return nil, compileScriptError(err)
	}
	ev, err := decodeValue(event)
	if err != nil {
		return nil, &ScriptError{Kind: KindError, Message: "event: " + err.Error(), Err: err}
	}
	return execute(ctx, filename, host, lim, func(thread *starlark.Thread) (starlark.Value, error) {
		if err := stateOf(thread).charge(treeSize(ev)); err != nil {
			return nil, err
		}
		globals, err := p.prog.Init(thread, predeclared)
		if err != nil {
			return nil, err
		}
		fn, ok := globals[entry].(*starlark.Function)
		if !ok || fn.NumParams() != 1 {
			return nil, &ScriptError{Kind: KindError, Message: fmt.Sprintf("%s is not a function of one parameter", entry)}
		}
		return starlark.Call(thread, fn, starlark.Tuple{ev}, nil)
	})
}

// execute runs body on a fresh thread under lim (its defaults already
// applied) and returns body's value as JSON. body returns a *ScriptError as is, or an
// interpreter error that execute classifies.
func execute(ctx context.Context, filename string, host Host, lim Limits, body func(*starlark.Thread) (starlark.Value, error)) (jsonvalue.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	st := &callState{ctx: ctx, host: host, lim: lim}
	thread := &starlark.Thread{
		Name: filename,
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load is not available")
		},
		Print: func(*starlark.Thread, string) {},
	}
	st.thread = thread
	thread.SetLocal(stateKey, st)
	thread.SetMaxExecutionSteps(lim.MaxSteps)
	thread.OnMaxSteps = func(t *starlark.Thread) {
		st.stop(t, KindSteps, fmt.Sprintf("the script ran out of its budget of %d execution steps", lim.MaxSteps), nil)
	}
	stopAfter := context.AfterFunc(ctx, func() { st.stopForContext(thread) })
	defer stopAfter()

	done := make(chan outcome, 1)
	go func() { done <- st.run(thread, body) }()
	select {
	case out := <-done:
		return out.value, out.err
	case <-ctx.Done():
	}
	grace := time.NewTimer(abandonGrace)
	defer grace.Stop()
	select {
	case out := <-done:
		return out.value, out.err
	case <-grace.C:
	}
	st.abandon()
	kind, msg := contextKind(ctx, lim)
	return nil, &ScriptError{Kind: kind, Message: msg + fmt.Sprintf(" (the script did not stop within %s and was abandoned)", abandonGrace), Err: ctx.Err()}
}

type outcome struct {
	value jsonvalue.Value
	err   error
}

const stateKey = "actionsledger.starlarkrt.call"

// callState is the per-call state the builtins reach through the thread.
type callState struct {
	ctx    context.Context
	host   Host
	lim    Limits
	thread *starlark.Thread

	// mem is the bytes charged to the memory budget so far. Only the
	// script's goroutine touches it.
	mem int64

	// stopped is the first reason the thread was cancelled.
	stopped atomic.Pointer[stopReason]

	// mu is held across every Host call except Now; abandon takes it so
	// that no Host call starts, or is still running, after Call returns.
	mu        sync.Mutex
	abandoned bool
}

type stopReason struct {
	kind, msg string
	err       error
}

func stateOf(thread *starlark.Thread) *callState {
	return thread.Local(stateKey).(*callState)
}

// stop cancels the thread for a reason, unless it was already stopped.
func (st *callState) stop(thread *starlark.Thread, kind, msg string, err error) {
	if st.stopped.CompareAndSwap(nil, &stopReason{kind: kind, msg: msg, err: err}) {
		thread.Cancel(msg)
	}
}

func (st *callState) stopForContext(thread *starlark.Thread) {
	kind, msg := contextKind(st.ctx, st.lim)
	st.stop(thread, kind, msg, st.ctx.Err())
}

func contextKind(ctx context.Context, lim Limits) (kind, msg string) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return KindTimeout, fmt.Sprintf("the call ran past its deadline (time limit %s)", lim.Timeout)
	}
	return KindCancelled, "the call was cancelled: " + ctx.Err().Error()
}

func (st *callState) abandon() {
	st.mu.Lock()
	st.abandoned = true
	st.mu.Unlock()
}

// run executes body on the script's own goroutine; a Go panic anywhere
// below becomes a KindPanic error.
func (st *callState) run(thread *starlark.Thread, body func(*starlark.Thread) (starlark.Value, error)) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = outcome{err: &ScriptError{
				Kind:    KindPanic,
				Message: fmt.Sprintf("panic: %v", r),
				GoStack: string(debug.Stack()),
			}}
		}
	}()
	v, err := body(thread)
	if err != nil {
		if se, ok := err.(*ScriptError); ok {
			return outcome{err: se}
		}
		return outcome{err: st.scriptError(err)}
	}
	raw, err := encodeValue(v, st.lim.MaxOutput, "result")
	if err != nil {
		kind := KindOutputInvalid
		var ce *convertError
		if errors.As(err, &ce) && ce.tooLarge {
			kind = KindOutputTooLarge
		}
		return outcome{err: &ScriptError{Kind: kind, Message: err.Error(), Err: err}}
	}
	return outcome{value: raw}
}

// scriptError classifies an error returned by the interpreter.
func (st *callState) scriptError(err error) *ScriptError {
	se := &ScriptError{Kind: KindError, Message: err.Error(), Err: err}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		se.Message = ee.Msg
		se.Backtrace = ee.Backtrace()
		se.Position = innermost(ee.CallStack)
	}
	var (
		hp *hostPanic
		ae *allocError
		he *hostError
	)
	switch r := st.stopped.Load(); {
	case errors.As(err, &hp):
		se.Kind, se.GoStack = KindPanic, hp.stack
	case r != nil:
		se.Kind, se.Message = r.kind, r.msg
		if r.err != nil {
			se.Err = r.err
		}
	case st.ctx.Err() != nil && errors.Is(err, st.ctx.Err()):
		// A host call saw the deadline before the AfterFunc stopped the thread.
		se.Kind, se.Message = contextKind(st.ctx, st.lim)
		se.Err = st.ctx.Err()
	case errors.As(err, &ae):
		se.Kind = KindAlloc
	case errors.As(err, &he):
		se.Kind = KindHost
	}
	return se
}

// innermost returns file:line:col of the innermost Starlark (not
// built-in) frame of stack.
func innermost(stack starlark.CallStack) string {
	for i := len(stack) - 1; i >= 0; i-- {
		if pos := stack[i].Pos; pos.IsValid() && pos.Filename() != "<builtin>" {
			return pos.String()
		}
	}
	return ""
}

// allocError is a refusal to build something larger than MaxAlloc.
type allocError struct{ msg string }

func (e *allocError) Error() string { return e.msg }

func allocErrorf(format string, args ...any) error {
	return &allocError{msg: fmt.Sprintf(format, args...)}
}

// hostError is the failure of a Host method.
type hostError struct {
	name string
	err  error
}

func (e *hostError) Error() string { return e.name + ": " + e.err.Error() }
func (e *hostError) Unwrap() error { return e.err }

// hostPanic is a recovered panic of a Host method.
type hostPanic struct {
	name  string
	value any
	stack string
}

func (e *hostPanic) Error() string { return fmt.Sprintf("%s: panic in host: %v", e.name, e.value) }

var errAbandoned = errors.New("the call has already returned")

// hostCall runs f, a call of a Host method, with the call's context. It
// holds mu throughout (see abandon) and turns a panic into a hostPanic.
func (st *callState) hostCall(name string, f func(ctx context.Context) error) (err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.abandoned {
		return &hostError{name: name, err: errAbandoned}
	}
	defer func() {
		if r := recover(); r != nil {
			err = &hostPanic{name: name, value: r, stack: string(debug.Stack())}
		}
	}()
	if err := f(st.ctx); err != nil {
		return &hostError{name: name, err: err}
	}
	return nil
}

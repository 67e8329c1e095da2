package starlarkrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// CatchableError is an error a SnippetHost returns for a failure the
// snippet may handle itself with catch() (SPEC P4). Wrapping is fine:
// catch looks for it with errors.As. Any other host error fails the
// snippet, as a Host error fails a script.
type CatchableError struct{ Message string }

func (e *CatchableError) Error() string { return e.Message }

// SnippetHost is what a snippet reaches: tools by name, and the clock.
// The same rules as for Host apply (the call's context, one method at a
// time, nothing after RunSnippet has returned).
type SnippetHost interface {
	// CallTool calls the tool the snippet names with input and returns its
	// output. A *CatchableError can be caught by the snippet.
	CallTool(ctx context.Context, name string, input jsonvalue.Value) (output jsonvalue.Value, err error)
	// Now is the injected clock, read by time.now() (see Host.Now).
	Now() time.Time
}

// ResultName is the global a snippet assigns its result to.
const ResultName = "result"

// RunSnippet runs src, a snippet, on a fresh thread under lim and returns
// the value of its global "result" (ResultName) as JSON, or null when the
// snippet never assigns it.
//
// A snippet is written by a model rather than an action's author, so its
// dialect is looser than a script's: if and for statements may appear at
// top level and globals may be reassigned (while loops, sets and
// recursion are still off). Its environment is a script's (json, time,
// math and the guarded builtins, under the same Limits) without ledger
// and session, with two differences:
//
//	call_tool(name, input)        SnippetHost.CallTool: the tool by name
//	catch(fn, *args, **kwargs)    calls fn(*args, **kwargs) and returns
//	                              struct(value=<its result>, error=None),
//	                              or struct(value=None, error="message")
//	                              when it fails with a CatchableError;
//	                              any other error propagates
//
// Errors are *ScriptError as for Call; an uncaught CatchableError gives
// KindHost.
func RunSnippet(ctx context.Context, filename, src string, host SnippetHost, lim Limits) (jsonvalue.Value, error) {
	lim = lim.withDefaults()
	if len(src) > lim.MaxSource {
		return nil, &ScriptError{Kind: KindError, Message: fmt.Sprintf("source is %d bytes; the limit is %d", len(src), lim.MaxSource)}
	}
	p, err := compileIn(snippetDialect, filename, src)
	if err != nil {
		return nil, compileScriptError(err)
	}
	return execute(ctx, filename, snippetHost{host}, lim, func(thread *starlark.Thread) (starlark.Value, error) {
		globals, err := p.prog.Init(thread, snippetPredeclared)
		if err != nil {
			return nil, err
		}
		if v, ok := globals[ResultName]; ok {
			return v, nil
		}
		return starlark.None, nil
	})
}

// snippetPredeclared is predeclared without ledger and session, with
// call_tool taking a name, and with catch.
var snippetPredeclared = func() starlark.StringDict {
	d := starlark.StringDict{}
	for k, v := range predeclared {
		switch k {
		case "ledger", "session", "send_to_session":
			continue
		}
		d[k] = v
	}
	d["call_tool"] = starlark.NewBuiltin("call_tool", callTool("name"))
	d["catch"] = starlark.NewBuiltin("catch", catchFn)
	d.Freeze()
	return d
}()

var snippetDialect = &dialect{
	name:          "snippet",
	opts:          &syntax.FileOptions{TopLevelControl: true, GlobalReassign: true},
	isPredeclared: snippetPredeclared.Has,
}

var catchResult = starlark.String("catch")

// catchFn is catch(fn, *args, **kwargs).
func catchFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: missing the function to call", b.Name())
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not callable", b.Name(), args[0].Type())
	}
	st := stateOf(thread)
	v, err := starlark.Call(thread, fn, args[1:], kwargs)
	if err != nil {
		var ce *CatchableError
		if !errors.As(err, &ce) || st.stopped.Load() != nil {
			return nil, err
		}
		// The message comes from the host and may be long (a tool's own
		// failure): it is charged with the struct.
		if err := st.charge(costStruct + 2*costField + textCost(len(ce.Message))); err != nil {
			return nil, err
		}
		return starlarkstruct.FromStringDict(catchResult, starlark.StringDict{"value": starlark.None, "error": starlark.String(ce.Message)}), nil
	}
	if err := st.charge(costStruct + 2*costField); err != nil {
		return nil, err
	}
	return starlarkstruct.FromStringDict(catchResult, starlark.StringDict{"value": v, "error": starlark.None}), nil
}

// snippetHost adapts a SnippetHost to Host; a snippet cannot reach the
// ledger or sessions.
type snippetHost struct{ h SnippetHost }

var errNotInSnippet = errors.New("not available to a snippet")

func (s snippetHost) LedgerGet(context.Context, string, string) (jsonvalue.Value, bool, error) {
	return nil, false, errNotInSnippet
}

func (s snippetHost) LedgerPut(context.Context, string, string, jsonvalue.Value) (int64, error) {
	return 0, errNotInSnippet
}

func (s snippetHost) Session(context.Context, string, string) (*SessionView, error) {
	return nil, errNotInSnippet
}

func (s snippetHost) CallTool(ctx context.Context, name string, input jsonvalue.Value) (jsonvalue.Value, error) {
	return s.h.CallTool(ctx, name, input)
}

func (s snippetHost) Now() time.Time { return s.h.Now() }

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

// codeLimits bound one run_code snippet: the sandbox's defaults, with
// time for the tool calls it makes.
var codeLimits = starlarkrt.Limits{Timeout: 30 * time.Second}

// codeTools are the tools a snippet may call: the non-gated ones (P4).
func (l *loop) codeTools() []string {
	var out []string
	for _, name := range l.names {
		if !l.tools[name].ref.Gated() {
			out = append(out, name)
		}
	}
	return out
}

func runCodeSpec(callable []string) provider.ToolSpec {
	tools := "none"
	if len(callable) > 0 {
		tools = strings.Join(callable, ", ")
	}
	return provider.ToolSpec{
		Name: toolRunCode,
		Description: "Run a Starlark snippet (a small Python dialect: no while loops, no recursion, no imports) that calls tools in a loop or combines their results. " +
			"call_tool(name, input) calls one of these tools and returns its output: " + tools + ". " +
			"A failed call raises an error; catch(fn, *args, **kwargs) calls fn and returns a struct with .value and .error (None, or the error's message) instead of raising. " +
			"Tools that require approval cannot be called from code: call them directly. " +
			"json, math and time are available. Assign what you want back to the global `result` (any JSON-like value); it is your tool result.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The Starlark snippet."}},"required":["code"],"additionalProperties":false}`),
	}
}

// runCode runs a run_code call (P4). The snippet's errors are error
// results; a failure that is not a tool's own (the database, the context)
// fails the attempt.
func (l *loop) runCode(ctx context.Context, c provider.ToolCall) (*provider.ToolResult, error) {
	var in struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil || strings.TrimSpace(in.Code) == "" {
		return l.result(c.ID, c.Name, "run_code takes {code: string}: the Starlark snippet to run", true), nil
	}
	l.rec.Add("tool_call", map[string]any{"call_id": c.ID, "tool": toolRunCode, "input": c.Input})
	h := &codeHost{l: l, callID: c.ID}
	out, err := starlarkrt.RunSnippet(ctx, "run_code.star", in.Code, h, codeLimits)
	switch {
	case h.fatal != nil:
		return nil, h.fatal
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		msg := err.Error()
		var se *starlarkrt.ScriptError
		if errors.As(err, &se) && se.Backtrace != "" {
			msg += "\n" + se.Backtrace
		}
		return l.result(c.ID, c.Name, msg, true), nil
	}
	return l.result(c.ID, c.Name, string(out), false), nil
}

// codeHost serves a snippet's call_tool. The sandbox calls it from the
// snippet's goroutine, one call at a time and never after RunSnippet has
// returned.
type codeHost struct {
	l      *loop
	callID string
	n      int   // calls so far
	fatal  error // a failure that fails the attempt
}

func (h *codeHost) CallTool(ctx context.Context, name string, input jsonvalue.Value) (jsonvalue.Value, error) {
	l := h.l
	t := l.tools[name]
	switch {
	case builtin(name):
		return nil, &starlarkrt.CatchableError{Message: fmt.Sprintf("%s cannot be called from code", name)}
	case t == nil:
		return nil, &starlarkrt.CatchableError{Message: fmt.Sprintf("there is no tool named %q; from code you can call: %s", name, strings.Join(l.codeTools(), ", "))}
	case t.ref.Gated():
		return nil, &starlarkrt.CatchableError{Message: fmt.Sprintf("tool %s requires approval: call it directly, not from code", name)}
	}
	eff, err := overlay(json.RawMessage(input), t.ref.Input)
	if err != nil {
		return nil, &starlarkrt.CatchableError{Message: fmt.Sprintf("%s: %v", name, err)}
	}
	h.n++
	id := fmt.Sprintf("%s/%d", h.callID, h.n)
	out, toolErr, err := l.invoke(ctx, id, t.ref.Action, name, eff, toolRunCode, false)
	switch {
	case err != nil:
		h.fatal = err
		return nil, err
	case toolErr != nil:
		l.rec.Add("tool_result", map[string]any{"call_id": id, "tool": name, "content": clipResult(toolErr.Error()), "is_error": true, "via": toolRunCode})
		return nil, &starlarkrt.CatchableError{Message: fmt.Sprintf("%s: %v", name, toolErr)}
	}
	l.rec.Add("tool_result", map[string]any{"call_id": id, "tool": name, "content": clipResult(string(out)), "via": toolRunCode})
	return out, nil
}

// Now is the turn's clock.
func (h *codeHost) Now() time.Time {
	if env := h.l.req.Env; env != nil {
		return env.Now()
	}
	return h.l.h.opts.Now()
}

// Package starlarkrt runs the Starlark code of tool actions and Starlark
// turn handlers (issue 3, SPEC X1-X6), in a sandbox, on go.starlark.net.
//
// A script is a Starlark file that defines an entry function of one
// parameter. [Call] runs the file's top level, calls the entry function
// with the event (JSON converted to Starlark values) and returns what it
// returns, converted back to JSON. [Check] does the static part (parse,
// resolve, entry function present with one parameter) without running
// anything, for validating an action when it is created. Compiled programs
// are cached by file name and source hash, so a script is compiled once
// per action version rather than once per call.
//
// # What a script can do
//
// Pure computation in the default Starlark dialect: no while loops, no
// if or for at top level, no reassigning globals, no sets, no recursion
// (a function that names itself is refused when compiled, mutual
// recursion when it happens). Besides the universal builtins it sees:
//
//	json       encode, encode_indent, decode, indent (go.starlark.net/lib/json)
//	time       go.starlark.net/lib/time, except that time.now() returns the
//	           host's injected clock (Host.Now); parse_time, parse_duration,
//	           from_timestamp, time() and the duration constants as usual
//	math       go.starlark.net/lib/math
//	ledger     get(namespace, key) -> value or None; put(namespace, key,
//	           value) -> the new version (an int)
//	session    session(action_id, id) -> a struct with id, input, status
//	           and inputs (a list), or None (SPEC X6)
//	call_tool  call_tool(action_id, input) -> the tool's output
//
// Those last three go to the [Host], which the caller implements (inside
// its transaction, so a call that does not commit leaves no writes). A
// Host error fails the call: Starlark has no try/except, so the script
// cannot catch it. print is accepted and discarded.
//
// # Snippets
//
// [RunSnippet] runs a snippet: code a model wrote (the agent kind's
// run_code tool, SPEC P4) rather than an action's author. It may use if
// and for at top level and reassign globals, returns its "result" global,
// reaches tools by name through a [SnippetHost] instead of ledger, session
// and tools by id, and has catch(fn, *args, **kwargs) for the host's
// [CatchableError]s. Limits and conversions are a script's.
//
// # What it cannot do
//
// load statements are refused, and there is no file, network, process or
// clock access except through the names above (lib/time reads the
// system's time zone database to resolve zone names such as
// "America/New_York"; that is the only file it touches).
//
// # Values
//
// JSON to Starlark: null → None, true/false → bool, a number written
// without fraction or exponent → int, exactly and of any size, any other
// number → float, string → string, array → list, object → dict with its
// keys in sorted byte order (JSON objects have no order that survives
// PostgreSQL's jsonb anyway).
//
// Starlark to JSON: None → null, bool, int → its exact decimal text (no
// float64 detour: 2^53+1 and 10^30 stay exact; HARD-PARTS 6), float → the
// shortest text that reads back as the same float, with ".0" added when
// the text would read back as an int (NaN and infinities are errors),
// string → string (it must be valid UTF-8 without NUL, as jsonb
// requires), list and tuple → array, dict → object (keys must be strings;
// entries in the dict's order), the struct session() returns → object.
// Anything else (a function, a module, a time, a range) is an error that
// names where in the value it is. Values passed to ledger.put and
// call_tool convert the same way.
//
// # Limits
//
// Every call runs on a fresh thread under [Limits]; a zero field takes
// its default. docs/starlark.md has the same table for users.
//
//	Limit      Default       What happens when it is reached            Kind
//	MaxSteps   10,000,000    the thread is cancelled at the next step   steps
//	Timeout    5s            the thread is cancelled at the next step   timeout
//	           (or the caller's context deadline, whichever is first)
//	MaxMemory  64 MiB        the operation fails, the thread is         memory
//	           (ceiling      cancelled
//	           1 GiB)
//	MaxOutput  1 MiB         the result's JSON is refused               output_too_large
//	MaxSource  256 KiB       the source is refused before compiling     error
//	MaxAlloc   1,000,000     the operation is refused before it builds  alloc
//
// MaxAlloc counts elements for lists and tuples, bytes for strings. It
// guards each operation that could build a large value in one step:
// materialising a range (list(range(n)), sorted, enumerate, zip, join and
// any other builtin that consumes a range whole; a for loop may still run
// over a longer range, paying a step per element), string, bytes, list
// and tuple concatenation and repetition (+, *, += and *=, whatever the
// target), string formatting (% and str.format), str.join, str.replace,
// list.extend, str, repr, fail, json.encode, json.encode_indent and
// json.indent. Integer multiplication and left shifts are refused beyond
// 131,072 decimal digits, what the ledger can store, and int() and
// json.decode refuse number texts longer than that (parsing them is
// quadratic). Printing, encoding or decoding a value nested more than
// 1,000 levels deep is refused too (starlark-go walks values
// recursively). The sizes of texts are computed before they are built,
// walking the value only until the bound passes the limit, so a list
// holding the same list twice, nested forty deep, is refused at once.
//
// MaxMemory bounds the whole call (issue 10 item 2): every operation that
// builds a value charges an estimate of the bytes it allocates (memory.go
// has the figures: a string's length plus a header, 16 bytes per element
// of a list or tuple, 32 per element appended, 128 per dict entry),
// before building when the size is known and right after otherwise. That
// covers the operators, list and dict methods, index assignment, slices,
// literals, comprehensions, lambdas and nested defs, *args and **kwargs
// spreads, the universal builtins and string methods that copy, json, the
// event and every value the host returns. The count is cumulative
// (garbage is not credited back), so it is deterministic: the same script
// on the same input stops at the same operation, and retrying is
// pointless.
//
// starlark-go evaluates operators, literals, comprehensions, slices and
// stores inside its interpreter without a hook, so before resolving, the
// syntax tree is rewritten to send them through guarded builtins with
// names a script cannot write (rewrite.go lists them); errors and
// backtraces keep the operator's position and evaluation order is
// unchanged. A guarded construct costs a builtin call and one or two more
// steps of the budget than a plain one (operators with a number literal
// operand, such as i + 1, are left alone), so arithmetic is unaffected
// and container-heavy code takes about a third more time
// (BenchmarkGuardedContainers; a literal, a comprehension element, a
// slice or an index assignment costs some 100-150ns more, an append
// slightly less). The visible changes: %= and <<= are accepted only on a
// plain name (x %= y, not d[k] %= y).
//
// Other failures: a script that raises (fail, a type error, a recursive
// call) gives kind "error"; a Host method's error gives "host" (with the
// host's error in ScriptError.Err); the caller's context cancelled gives
// "cancelled"; a result that cannot be converted gives "output_invalid";
// a Go panic anywhere (a Host method or the interpreter) is recovered and
// gives "panic", and the process carries on. Every *ScriptError from a
// running script carries the Starlark backtrace with file:line:col.
//
// # Residual risks
//
// The memory budget is an estimate, not a measurement: the figures follow
// the Go heap on 64-bit machines within a small factor, so the process may
// hold somewhat more than the budget for a call. Values of fixed size made
// without a charge (a float, a big integer from + or -, a bound method)
// are charged when stored into a list or dict, not when made; a big
// integer stored twice is charged twice. The interpreter's own bookkeeping
// (call frames, argument tuples, iterators, error messages) and the
// garbage of arithmetic on big integers are not charged at all; the step
// budget bounds how much of it a call can make, not how fast the
// collector reclaims it. Because garbage counts, a script that rebuilds a
// large value many times (s += piece in a long loop) runs out of budget
// sooner than its live data would suggest; memory_mb raises the budget.
// The server still wants a memory limit of its own for everything else
// (GOMEMLIMIT helps the collector, a container limit contains the rest).
// Cancellation is checked between steps, so a single builtin that runs
// long (sorting a list of millions, comparing deeply) delays the stop;
// Call returns at most 250ms after the deadline regardless, abandoning the
// goroutine, which stops at its next step and never calls the Host again.
// Error messages that starlark-go formats itself (a key not found, for
// instance) can print a value without the size check.
package starlarkrt

package starlarkrt_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

const identity = `
def main(event):
    return event
`

// Integers cross JSON -> Starlark -> JSON exactly, whatever their size,
// and floats come back as the same float (HARD-PARTS 6).
func TestCallRoundTripsNumbersExactly(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	for _, tc := range []struct{ in, out string }{
		{"9007199254740993", "9007199254740993"},                                 // 2^53+1
		{"1000000000000000000000000000000", "1000000000000000000000000000000"},   // 10^30
		{"-1000000000000000000000000000001", "-1000000000000000000000000000001"}, // negative big int
		{"-9223372036854775808", "-9223372036854775808"},                         // min int64
		{"18446744073709551616", "18446744073709551616"},                         // 2^64
		{"0", "0"},
		{"-0", "0"},
		{"1.5", "1.5"},
		{"0.1", "0.1"},
		{"2.0", "2.0"},
		{"-0.0", "-0.0"},
		{"100000.0", "100000.0"},
		{"1e300", "1e+300"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"5e-324", "5e-324"},
		{"1e-7", "1e-7"},
		{"123456789.125", "123456789.125"},
		{"1E3", "1000.0"}, // an exponent makes a float
		{`[9007199254740993, 0.1, {"b": 1, "a": [true, false, null, "x"]}]`, `[9007199254740993,0.1,{"a":[true,false,null,"x"],"b":1}]`},
	} {
		out := mustCall(t, h, identity, tc.in)
		require.Equal(t, tc.out, out, "in %s", tc.in)
		require.NoError(t, jsonvalue.Check([]byte(out), "out"))
	}
}

func TestCallComputesWithBigIntegersExactly(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    n = event["n"]
    return {
        "next": n + 1,
        "double": n * 2,
        "neg": -event["big"] - 1,
        "type": type(n),
        "float": event["f"] * 2,
        "mixed": n // 3,
    }
`
	out := mustCall(t, newFakeHost(), src, `{"n": 9007199254740993, "big": 1000000000000000000000000000000, "f": 0.25}`)
	require.JSONEq(t, `{"next": 9007199254740994, "double": 18014398509481986, "neg": -1000000000000000000000000000001, "type": "int", "float": 0.5, "mixed": 3002399751580331}`, out)
	require.Contains(t, out, `"next":9007199254740994`) // exact text, not 9.007199254740994e15
}

func TestCallEventObjectKeysAreSorted(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    return list(event.keys())
`
	require.Equal(t, `["a","b","c","é"]`, mustCall(t, newFakeHost(), src, `{"é": 1, "c": 2, "a": 3, "b": 4}`))
}

func TestCallEmptyEventIsNone(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    return event == None
`
	require.Equal(t, `true`, mustCall(t, newFakeHost(), src, ""))
}

func TestCallResultConversions(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    return {
        "tuple": (1, "two"),
        "nested": [[], {}, [None]],
        "text": "quote \" backslash \\ newline \n tab \t bell \x07 é ☃",
        "float": 3.0,
        "html": "<&>",
    }
`
	out := mustCall(t, newFakeHost(), src, `{}`)
	require.NoError(t, jsonvalue.Check([]byte(out), "out"))
	require.JSONEq(t, `{"tuple": [1, "two"], "nested": [[], {}, [null]], "text": "quote \" backslash \\ newline \n tab \t bell \u0007 é ☃", "float": 3.0, "html": "<&>"}`, out)
	require.Contains(t, out, `"float":3.0`)
}

func TestCallResultThatIsNotJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, msg string }{
		{`return len`, `result: a builtin_function_or_method cannot be converted to JSON`},
		{`return lambda: 1`, `result: a function cannot be converted to JSON`},
		{`return {"a": [1, {"b": time.now()}]}`, `result["a"][1]["b"]: a time.time cannot be converted to JSON`},
		{`return {1: 2}`, `result: dict key 1 (int) is not a string`},
		{`return float("nan")`, `result: nan cannot be represented in JSON`},
		{`return [float("inf")]`, `result[0]: +inf cannot be represented in JSON`},
		{`return "a\0b"`, `result: a string contains the NUL character`},
		{`return "é"[0:1]`, `result: a string is not valid UTF-8`},
		{`return json`, `result: a module cannot be converted to JSON`},
		{`return range(3)`, `result: a range cannot be converted to JSON`},
		{"l = []\n    for i in range(70):\n        l = [l]\n    return l", `nests deeper than 64 levels`},
	} {
		src := "def main(event):\n    " + tc.body + "\n"
		_, err := call(t, newFakeHost(), src, `{}`, starlarkrt.Limits{})
		se := scriptError(t, err, starlarkrt.KindOutputInvalid)
		require.Contains(t, se.Message, tc.msg)
	}
}

func TestCallModules(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    d = json.decode('{"a": [1, 2.5, 12345678901234567890123]}')
    t = time.parse_time("2024-02-29T12:00:00Z")
    return {
        "encode": json.encode({"x": [1, "y", None, True]}),
        "decoded": d,
        "indent": json.indent('{"a":1}', indent="  "),
        "encode_indent": json.encode_indent([1], indent=" "),
        "year": t.year,
        "plus": str(t + time.parse_duration("36h")),
        "unix": time.from_timestamp(0).unix,
        "made": str(time.time(year=2020, month=1, day=2)),
        "hour": time.hour // time.second,
        "sqrt": math.sqrt(16),
        "floor": math.floor(2.7),
        "pow": math.pow(2, 10),
        "pi": math.pi > 3.14,
    }
`
	out := mustCall(t, newFakeHost(), src, `{}`)
	require.JSONEq(t, `{
        "encode": "{\"x\":[1,\"y\",null,true]}",
        "decoded": {"a": [1, 2.5, 12345678901234567890123]},
        "indent": "{\n  \"a\": 1\n}",
        "encode_indent": "[\n 1\n]",
        "year": 2024,
        "plus": "2024-03-02 00:00:00 +0000 UTC",
        "unix": 0,
        "made": "2020-01-02 00:00:00 +0000 UTC",
        "hour": 3600,
        "sqrt": 4.0,
        "floor": 2,
        "pow": 1024.0,
        "pi": true
    }`, out)
}

// time.now() is the host's injected clock, never the wall clock.
func TestCallTimeNowIsTheInjectedClock(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	src := `
def main(event):
    return [time.now().unix_nano, str(time.now())]
`
	require.Equal(t, fmt.Sprintf(`[%d,"2025-03-14 15:09:26.535 +0000 UTC"]`, testNow.UnixNano()), mustCall(t, h, src, `{}`))
	h.clock.Advance(90 * 60 * 1e9)
	require.Contains(t, mustCall(t, h, src, `{}`), `"2025-03-14 16:39:26.535 +0000 UTC"`)
}

func TestCallLedger(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	src := `
def main(event):
    before = ledger.get("balances", event["account"])
    v1 = ledger.put("balances", event["account"], {"amount": 9007199254740993, "note": "é"})
    v2 = ledger.put("balances", event["account"], 10)
    return [before, v1, v2, ledger.get("balances", event["account"]), ledger.get(namespace="x", key="y")]
`
	require.Equal(t, `[null,1,2,10,null]`, mustCall(t, h, src, `{"account": "acc-1"}`))
	require.Equal(t, []string{
		"LedgerGet balances/acc-1",
		`LedgerPut balances/acc-1 {"amount":9007199254740993,"note":"é"}`,
		"LedgerPut balances/acc-1 10",
		"LedgerGet balances/acc-1",
		"LedgerGet x/y",
	}, h.recorded())
}

func TestCallLedgerPutRefusesValuesThatAreNotJSON(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	src := `
def main(event):
    ledger.put("ns", "k", {"f": lambda: 1})
`
	_, err := call(t, h, src, `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, `ledger.put: value["f"]: a function cannot be converted to JSON`)
	require.Empty(t, h.recorded())
}

// session(actionId, id) reads a tool session and its inputs (SPEC X6).
func TestCallSession(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	h.sessions["tool-1/acc-1"] = &starlarkrt.SessionView{
		ID:     "acc-1",
		Input:  jsonvalue.Value(`{"account_id": "acc-1"}`),
		Status: "OPEN",
		Inputs: []jsonvalue.Value{jsonvalue.Value(`{"kind": "CALL", "output": {"n": 1}}`), jsonvalue.Value(`{"kind": "CALL", "output": {"n": 2}}`)},
	}
	src := `
def main(event):
    s = session("tool-1", "acc-1")
    missing = session("tool-1", "nobody")
    return {
        "id": s.id,
        "input": s.input,
        "status": s.status,
        "calls": len(s.inputs),
        "last": s.inputs[-1]["output"]["n"],
        "missing": missing,
        "whole": s,
    }
`
	out := mustCall(t, h, src, `{}`)
	require.JSONEq(t, `{"id": "acc-1", "input": {"account_id": "acc-1"}, "status": "OPEN", "calls": 2, "last": 2, "missing": null,
        "whole": {"id": "acc-1", "input": {"account_id": "acc-1"}, "status": "OPEN", "input_count": 0, "inputs": [{"kind": "CALL", "output": {"n": 1}}, {"kind": "CALL", "output": {"n": 2}}]}}`, out)
	require.Equal(t, []string{"Session tool-1 acc-1", "Session tool-1 nobody"}, h.recorded())
}

func TestCallTool(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	h.toolFunc = func(actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
		return jsonvalue.Value(`{"echo": ` + string(input) + `, "big": 100000000000000000000001}`), nil
	}
	src := `
def main(event):
    out = call_tool("tool-9", {"n": event["n"], "list": [1, 2]})
    return [out["echo"]["n"], out["big"] + 1]
`
	require.Equal(t, `[9007199254740993,100000000000000000000002]`, mustCall(t, h, src, `{"n": 9007199254740993}`))
	require.Equal(t, []string{`CallTool tool-9 {"n":9007199254740993,"list":[1,2]}`}, h.recorded())
}

// A host error fails the call: the script cannot catch it, and nothing
// after it runs.
func TestCallHostErrorFailsTheCall(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	hostErr := errors.New("session_closed: the session is closed")
	h.failWith = hostErr
	src := `
def main(event):
    call_tool("tool-1", {})
    ledger.put("ns", "after", 1)
`
	_, err := call(t, h, src, `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindHost)
	require.ErrorIs(t, err, hostErr)
	require.Equal(t, "call_tool: session_closed: the session is closed", se.Message)
	require.Equal(t, "test.star:3:14", se.Position)
	require.Contains(t, se.Backtrace, "test.star:3:14: in main")
	require.Equal(t, []string{"CallTool tool-1 {}"}, h.recorded())
}

// A panic in a host method is recovered: the call fails with kind panic,
// with the Starlark backtrace, and the process carries on.
func TestCallHostPanicIsRecovered(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"LedgerPut", "Now"} {
		h := newFakeHost()
		h.panicIn = method
		src := `
def helper():
    return ledger.put("ns", "k", str(time.now()))

def main(event):
    return helper()
`
		_, err := call(t, h, src, `{}`, starlarkrt.Limits{})
		se := scriptError(t, err, starlarkrt.KindPanic)
		require.Contains(t, se.Message, "panic in host")
		require.Contains(t, se.Backtrace, "test.star:6:18: in main")
		require.Contains(t, se.Backtrace, "test.star:3:") // in helper
		require.NotEmpty(t, se.GoStack)
	}
	// The runtime still works.
	require.Equal(t, `1`, mustCall(t, newFakeHost(), "def main(e):\n    return 1\n", ""))
}

func TestCallErrorsCarryBacktraces(t *testing.T) {
	t.Parallel()
	src := `
def check(n):
    if n > 2:
        fail("too big:", n)
    return n

def main(event):
    return [check(n) for n in event]
`
	_, err := call(t, newFakeHost(), src, `[1, 2, 3]`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "fail: too big: 3", se.Message)
	require.Equal(t, "test.star:4:13", se.Position)
	require.Equal(t, "test.star:4:13: fail: too big: 3", err.Error())
	require.Equal(t, `Traceback (most recent call last):
  test.star:8:18: in main
  test.star:4:13: in check
Error in fail: fail: too big: 3`, se.Backtrace)

	// Errors of the guarded operators keep the operator's position.
	_, err = call(t, newFakeHost(), "def main(event):\n    return 1 + event\n", `"x"`, starlarkrt.Limits{})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "test.star:2:14: unknown binary op: int + string", err.Error())
	require.Contains(t, se.Backtrace, "test.star:2:14: in main")
}

// Operators behave as in plain Starlark after the rewrite of guard.go.
func TestCallOperatorSemantics(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    a = [1]
    alias = a
    a += [2]              # in place: alias sees it
    a += (3,)
    b = [0]
    b = b + [1]           # a new list
    d = {"n": 1, "s": "x", "l": [1]}
    d["n"] += 5
    d["n"] *= 2
    d["s"] *= 3
    d["l"] += d["l"]
    m = 17
    m %= 5
    s = "%s-%d" % ("a", 7)
    s2 = "%(k)s!" % {"k": "v"}
    t = ()
    t += (1,)
    t *= 2
    dur = time.second
    dur *= 3
    when = time.from_timestamp(0)
    when += dur
    return {
        "alias": alias, "b": b, "d": d, "m": m, "s": s, "s2": s2, "t": t,
        "dur": str(dur), "when": when.unix,
        "repeat": "ab" * 3 + "-" * 0, "lrepeat": 2 * [7], "neg": [1] * -1,
        "bytes": str(b"x" * 2), "float": 1.5 * 2, "mod": -7 % 3, "fmod": 7.5 % 2,
        "join": ",".join(["a", "b"]), "replace": "aaa".replace("a", "bb", 2),
        "format": "{} {x} {!r}".format("p", "q", x = 1),
        "getattr": getattr("x", "join")(["1", "2"]),
        "extend": extend_ok(),
    }

def extend_ok():
    l = [1]
    l.extend(l)
    f = l.extend
    f([3])
    return l
`
	out := mustCall(t, newFakeHost(), src, `{}`)
	require.JSONEq(t, `{
        "alias": [1, 2, 3], "b": [0, 1], "d": {"n": 12, "s": "xxx", "l": [1, 1]}, "m": 2,
        "s": "a-7", "s2": "v!", "t": [1, 1], "dur": "3s", "when": 3,
        "repeat": "ababab", "lrepeat": [7, 7], "neg": [],
        "bytes": "xx", "float": 3.0, "mod": 2, "fmod": 1.5,
        "join": "a,b", "replace": "bbbba", "format": "p 1 \"q\"", "getattr": "1x2", "extend": [1, 1, 3]
    }`, out)
}

func TestCallFrozenListStillRefusesAugmentedAssignment(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    l = [1, 2]
    for x in l:
        l += [x]
`
	_, err := call(t, newFakeHost(), src, `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, "during iteration")
}

func TestCallLoadIsRefused(t *testing.T) {
	t.Parallel()
	src := `
load("other.star", "x")

def main(event):
    return x
`
	_, err := call(t, newFakeHost(), src, `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "test.star:2:1: load statements are not supported", se.Error())
}

func TestCallTopLevelRunsOncePerCall(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	src := `
VERSION = ledger.put("runs", "count", 1)
COUNTER = [0]

def main(event):
    COUNTER[0] += 1
    return [VERSION, COUNTER[0]]
`
	require.Equal(t, `[1,1]`, mustCall(t, h, src, `{}`))
	require.Equal(t, `[2,1]`, mustCall(t, h, src, `{}`)) // fresh globals each call
}

func TestCallEntryProblems(t *testing.T) {
	t.Parallel()
	_, err := call(t, newFakeHost(), "def other(e):\n    pass\n", `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, `no function named "main"`)

	_, err = call(t, newFakeHost(), "def main(a, b):\n    pass\n", `{}`, starlarkrt.Limits{})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "test.star:1:1", se.Position)

	_, err = call(t, newFakeHost(), "def main(e):\n    return e\n", `{"bad": 1e999}`, starlarkrt.Limits{})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, "event: number 1e999 is outside the range of a float")
}

// Calls share nothing: each has its own thread, globals and limits.
func TestCallConcurrentCallsAreIndependent(t *testing.T) {
	t.Parallel()
	src := `
STATE = {"seen": []}

def main(event):
    for i in range(100):
        STATE["seen"].append(event["n"])
    if event["n"] % 7 == 0:
        for i in range(1 << 30):
            pass
    return [event["n"] * 9007199254740993, len(STATE["seen"]), ledger.put("ns", str(event["n"]), event["n"])]
`
	h := newFakeHost()
	var wg sync.WaitGroup
	errs := make([]error, 64)
	outs := make([]string, 64)
	for i := range 64 {
		wg.Go(func() {
			out, err := starlarkrt.Call(context.Background(), "test.star", src, "main", jsonvalue.Value(`{"n": `+strconv.Itoa(i+1)+`}`), h, starlarkrt.Limits{MaxSteps: 100_000})
			outs[i], errs[i] = string(out), err
		})
	}
	wg.Wait()
	for i := range 64 {
		n := i + 1
		if n%7 == 0 {
			scriptError(t, errs[i], starlarkrt.KindSteps)
			continue
		}
		require.NoError(t, errs[i])
		product := new(big.Int).Mul(big.NewInt(int64(n)), big.NewInt(9007199254740993))
		want := fmt.Sprintf(`[%s,100,1]`, product)
		require.Equal(t, want, outs[i])
	}
}

package starlarkrt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

// Every way a script could build something huge in one step (or in a few
// doubling steps) is refused with kind alloc before it allocates.
func TestLimitsAllocIsRefusedBeforeBuilding(t *testing.T) {
	t.Parallel()
	const shared = "l = [\"x\" * 100]\n    for i in range(40):\n        l = [l, l]\n    "
	for _, tc := range []struct{ name, body, msg string }{
		{"list of a huge range", `return list(range(1 << 62))`, "range(4611686018427387904) has more than 1000000 elements"},
		{"sorted range", `return sorted(range(2000000))`, "has more than 1000000 elements"},
		{"enumerate range", `return len(enumerate(range(1 << 40)))`, "has more than 1000000 elements"},
		{"max over a range", `return max(range(1 << 40))`, "has more than 1000000 elements"},
		{"tuple of a range", `return tuple(range(0, 1 << 40, 2))`, "has more than 1000000 elements"},
		{"encode a range", `return json.encode(range(1 << 40))`, "json.encode would build"},
		{"extend by a range", `l = []` + "\n    " + `l.extend(range(1 << 40))`, "has more than 1000000 elements"},
		{"string repeat", `return "x" * 100000000`, "repeating a string of 1 bytes 100000000 times"},
		{"int times string", `return 100000000 * "x"`, "repeating a string"},
		{"list repeat", `return [0] * (1 << 40)`, "repeating a list of 1 elements 1099511627776 times"},
		{"tuple repeat", `return (0, 1) * (1 << 29)`, "repeating a tuple of 2 elements"},
		{"bytes repeat", `return b"xy" * (1 << 29)`, "repeating a bytes"},
		{"repeat by a big int", `return "x" * (1 << 70)`, "1180591620717411303424 times"},
		{"string doubling", `s = "ab"` + "\n    for i in range(40):\n        s = s + s", "string + string would build 1048576 bytes"},
		{"augmented string doubling", `s = "ab"` + "\n    for i in range(40):\n        s += s", "string + string would build 1048576 bytes"},
		{"augmented list doubling", `l = [1]` + "\n    for i in range(40):\n        l += l", "list += list would build 1048576 elements"},
		{"augmented list repeat", `l = [1]` + "\n    for i in range(40):\n        l *= 2", "repeating a list"},
		{"augmented index doubling", `d = {"s": "ab"}` + "\n    for i in range(40):\n        d[\"s\"] += d[\"s\"]", "string + string would build"},
		{"extend doubling", `l = [1]` + "\n    for i in range(40):\n        l.extend(l)", "extend would build a list of 1048576 elements"},
		{"join", `return ",".join(["x" * 1000] * 2000)`, "join would build a string of more than 1000000 bytes"},
		{"join through getattr", `return getattr(",", "join")(["x" * 1000] * 2000)`, "join would build"},
		{"replace", `return ("x" * 1000).replace("x", "y" * 2000)`, "replace would build"},
		{"format", `return ("{0}" * 1000).format("x" * 1000)`, "format would build a text of more than 1000000 bytes"},
		{"percent tuple", `return ("%s" * 1000) % tuple(["x" * 1000] * 1000)`, "% would build a text"},
		{"percent mapping doubling", `s = "%(a)s%(a)s"` + "\n    for i in range(40):\n        s = s % {\"a\": s}", "% would build a text"},
		{"percent-assign doubling", `s = "%(a)s%(a)s"` + "\n    for i in range(40):\n        s %= {\"a\": s}", "% would build a text"},
		{"str of shared structure", shared + `return str(l)`, "str would build a text of more than 1000000 bytes"},
		{"repr of shared structure", shared + `return repr(l)`, "repr would build"},
		{"percent of shared structure", shared + `return "%s" % [l]`, "% would build"},
		{"fail with shared structure", shared + `fail(l)`, "fail would build"},
		{"encode shared structure", shared + `return json.encode(l)`, "json.encode would build"},
		{"indent blow-up", `return json.indent("[" * 5000 + "]" * 5000, indent = " " * 100)`, "json.indent would build"},
		{"encode_indent blow-up", `return json.encode_indent([[[[1]]]], indent = "x" * 400000)`, "json.encode_indent would build"},
		{"decode too deep", `return json.decode("[" * 2000 + "]" * 2000)`, "nests more than 1000 levels deep"},
		{"decode a long number", `return json.decode("1" * 200000)`, "longer than 131072 digits"},
		{"int of a long text", `return int("1" * 200000)`, "longer than 131072 digits"},
		{"integer squaring", `x = 3` + "\n    for i in range(40):\n        x = x * x", "int * int would have more than 435412 bits"},
		{"str of deep nesting", `l = []` + "\n    for i in range(2000):\n        l = [l]\n    return str(l)", "nests more than 1000 levels deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "def main(event):\n    " + tc.body + "\n"
			_, err := call(t, newFakeHost(), src, `{}`, starlarkrt.Limits{})
			se := scriptError(t, err, starlarkrt.KindAlloc)
			require.Contains(t, se.Message, tc.msg)
			require.Contains(t, se.Backtrace, "test.star:")
		})
	}
}

// Up to MaxAlloc is fine, and MaxAlloc can be set per call.
func TestLimitsAllocAllowsUpToTheLimit(t *testing.T) {
	t.Parallel()
	src := `
def main(event):
    n = event["n"]
    l = list(range(n))
    return [len("x" * n), len(l), len([0] * n), len(",".join(["x"] * (n // 2))), sorted(range(n))[-1], len(range(1 << 40))]
`
	require.Equal(t, `[1000000,1000000,1000000,999999,999999,1099511627776]`, mustCall(t, newFakeHost(), src, `{"n": 1000000}`))

	out, err := call(t, newFakeHost(), src, `{"n": 10}`, starlarkrt.Limits{MaxAlloc: 10})
	require.NoError(t, err)
	require.Equal(t, `[10,10,10,9,9,1099511627776]`, out)
	_, err = call(t, newFakeHost(), src, `{"n": 11}`, starlarkrt.Limits{MaxAlloc: 10})
	scriptError(t, err, starlarkrt.KindAlloc)
}

// A loop over a range longer than MaxAlloc is allowed, and paid for in
// steps: it runs into the step budget, not the allocation limit.
func TestLimitsStepBudget(t *testing.T) {
	t.Parallel()
	_, err := call(t, newFakeHost(), "def main(event):\n    for i in range(1 << 30):\n        pass\n", `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindSteps)
	require.Equal(t, "the script ran out of its budget of 10000000 execution steps", se.Message)
	require.Equal(t, "test.star:2:5", se.Position)

	// A smaller budget; top-level code counts too.
	_, err = call(t, newFakeHost(), "X = [i for i in range(100000)]\ndef main(event):\n    return 1\n", `{}`, starlarkrt.Limits{MaxSteps: 1000})
	se = scriptError(t, err, starlarkrt.KindSteps)
	require.True(t, strings.HasPrefix(se.Position, "test.star:1:"), se.Position)

	// Each element of a comprehension costs about ten steps, two of them
	// for the memory charge (issue 10 item 2).
	out, err := call(t, newFakeHost(), "def main(event):\n    return len([i for i in range(100)])\n", `{}`, starlarkrt.Limits{MaxSteps: 1500})
	require.NoError(t, err)
	require.Equal(t, "100", out)
}

const busyLoop = `
def main(event):
    n = 0
    for i in range(1 << 40):
        n += i
    return n
`

// The call's deadline (the caller's or Limits.Timeout) cancels a busy
// script; the caller's cancellation does too.
func TestLimitsTimeout(t *testing.T) {
	t.Parallel()
	lim := starlarkrt.Limits{MaxSteps: 1 << 62}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := starlarkrt.Call(ctx, "test.star", busyLoop, "main", nil, newFakeHost(), lim)
	se := scriptError(t, err, starlarkrt.KindTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, se.Backtrace, "test.star:")

	lim.Timeout = 20 * time.Millisecond
	_, err = starlarkrt.Call(context.Background(), "test.star", busyLoop, "main", nil, newFakeHost(), lim)
	se = scriptError(t, err, starlarkrt.KindTimeout)
	require.Equal(t, "the call ran past its deadline (time limit 20ms)", se.Message)

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = starlarkrt.Call(ctx, "test.star", busyLoop, "main", nil, newFakeHost(), starlarkrt.Limits{MaxSteps: 1 << 62})
	scriptError(t, err, starlarkrt.KindCancelled)
	require.ErrorIs(t, err, context.Canceled)
}

// blockingHost's clock blocks until released, standing in for a builtin
// that does not return.
type blockingHost struct {
	*fakeHost
	entered chan struct{}
	release chan struct{}
}

func (h *blockingHost) Now() time.Time {
	close(h.entered)
	<-h.release
	return h.fakeHost.Now()
}

// A script stuck inside one builtin cannot see its cancellation; Call
// returns anyway, and the abandoned script makes no host call afterwards.
func TestLimitsStuckScriptIsAbandoned(t *testing.T) {
	t.Parallel()
	h := &blockingHost{fakeHost: newFakeHost(), entered: make(chan struct{}), release: make(chan struct{})}
	src := `
def main(event):
    t = time.now()
    ledger.put("ns", "k", "after")
`
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := starlarkrt.Call(ctx, "test.star", src, "main", nil, h, starlarkrt.Limits{})
		errc <- err
	}()
	<-h.entered
	cancel()
	err := <-errc
	se := scriptError(t, err, starlarkrt.KindCancelled)
	require.Contains(t, se.Message, "abandoned")
	close(h.release)
	require.Empty(t, h.recorded()) // LedgerPut never ran
}

func TestLimitsOutputSize(t *testing.T) {
	t.Parallel()
	_, err := call(t, newFakeHost(), "def main(event):\n    return \"x\" * 200\n", `{}`, starlarkrt.Limits{MaxOutput: 100})
	se := scriptError(t, err, starlarkrt.KindOutputTooLarge)
	require.Equal(t, "result: the JSON encoding is larger than 100 bytes", se.Message)

	// 2000 references to one 1000-byte string: small in memory, 2 MB of JSON.
	_, err = call(t, newFakeHost(), "def main(event):\n    return [\"x\" * 1000] * 2000\n", `{}`, starlarkrt.Limits{})
	scriptError(t, err, starlarkrt.KindOutputTooLarge)

	// Exactly at the limit is fine.
	out, err := call(t, newFakeHost(), "def main(event):\n    return \"x\" * 98\n", `{}`, starlarkrt.Limits{MaxOutput: 100})
	require.NoError(t, err)
	require.Len(t, out, 100)

	// Values handed to the host are bounded the same way.
	h := newFakeHost()
	_, err = call(t, h, "def main(event):\n    ledger.put(\"ns\", \"k\", \"x\" * 200)\n", `{}`, starlarkrt.Limits{MaxOutput: 100})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, "ledger.put: value: the JSON encoding is larger than 100 bytes")
	require.Empty(t, h.recorded())
}

func TestLimitsSourceSize(t *testing.T) {
	t.Parallel()
	src := "def main(event):\n    return 1\n" + strings.Repeat("#", 300)
	_, err := call(t, newFakeHost(), src, `{}`, starlarkrt.Limits{MaxSource: 100})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, fmt.Sprintf("source is %d bytes; the limit is 100", len(src)), se.Message)
}

// Recursion is off: direct recursion is refused when compiling, mutual
// recursion when it happens.
func TestLimitsRecursionIsRefused(t *testing.T) {
	t.Parallel()
	_, err := call(t, newFakeHost(), "def main(event):\n    return main(event)\n", `{}`, starlarkrt.Limits{})
	se := scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "test.star:2:12: function main refers to itself; recursion is not allowed", se.Error())

	src := `
def even(n):
    return True if n == 0 else odd(n - 1)

def odd(n):
    return False if n == 0 else even(n - 1)

def main(event):
    return even(event)
`
	_, err = call(t, newFakeHost(), src, `10`, starlarkrt.Limits{})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Equal(t, "function even called recursively", se.Message)
	require.Contains(t, se.Backtrace, "in odd")

	_, err = call(t, newFakeHost(), "f = lambda n: f(n)\ndef main(event):\n    return f(1)\n", `{}`, starlarkrt.Limits{})
	se = scriptError(t, err, starlarkrt.KindError)
	require.Contains(t, se.Message, "called recursively")
}

// Each limit fails only its own call: the runtime keeps serving.
func TestLimitsLeaveTheRuntimeUsable(t *testing.T) {
	t.Parallel()
	h := newFakeHost()
	for _, src := range []string{
		"def main(event):\n    return list(range(1 << 62))\n",
		"def main(event):\n    return [0] * (1 << 40)\n",
		"def main(event):\n    for i in range(1 << 30):\n        pass\n",
	} {
		_, err := call(t, h, src, `{}`, starlarkrt.Limits{})
		var se *starlarkrt.ScriptError
		require.True(t, errors.As(err, &se))
	}
	out, err := starlarkrt.Call(context.Background(), "ok.star", "def main(e):\n    return e\n", "main", jsonvalue.Value(`[1]`), h, starlarkrt.Limits{})
	require.NoError(t, err)
	require.Equal(t, `[1]`, string(out))
}

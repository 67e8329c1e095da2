package starlarkrt_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

// Check validates a script when its action is created (A3): every problem
// is an INVALID_ACTION fault whose message starts with the position.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, msg string }{
		{"valid", "def main(event):\n    return event\n", ""},
		{"one parameter with a default", "def main(event = None):\n    return event\n", ""},
		{"helpers and constants", "LIMIT = 10\n\ndef helper(x):\n    return min(x, LIMIT)\n\ndef main(event):\n    return helper(event)\n", ""},
		{"no entry", "def other(event):\n    pass\n", `tool.star: no function named "main" is defined`},
		{"entry not made by def", "main = lambda event: event\n", `tool.star: no function named "main" is defined`},
		{"no parameter", "def main():\n    pass\n", "tool.star:1:1: function main must take exactly one parameter (the event); it takes 0"},
		{"two parameters", "\ndef main(a, b):\n    pass\n", "tool.star:2:1: function main must take exactly one parameter (the event); it takes 2"},
		{"varargs", "def main(*args):\n    pass\n", "tool.star:1:1: function main must take exactly one parameter"},
		{"kwargs", "def main(**kwargs):\n    pass\n", "tool.star:1:1: function main must take exactly one parameter"},
		{"syntax error", "def main(event)\n    return 1\n", "tool.star:2:1: got newline, want ':'"},
		{"bad indentation", "def main(event):\n    x = 1\n      return x\n", "tool.star:3:7: got indent, want primary expression"},
		{"undefined name", "def main(event):\n    return undefined_thing\n", "tool.star:2:12: undefined: undefined_thing"},
		{"several resolve errors", "def main(event):\n    return a + b\n", "tool.star:2:12: undefined: a; tool.star:2:16: undefined: b"},
		{"while", "def main(event):\n    while True:\n        pass\n", "tool.star:2:5: this Starlark dialect does not support while loops"},
		{"top-level for", "for x in []:\n    pass\ndef main(event):\n    pass\n", "tool.star:1:1: for loop not within a function"},
		{"global reassignment", "X = 1\nX = 2\ndef main(event):\n    pass\n", "tool.star:2:1: cannot reassign global X declared at tool.star:1:1"},
		{"sets", "def main(event):\n    return set([1])\n", "tool.star:2:12: this Starlark dialect does not support sets"},
		{"load", "load(\"x.star\", \"y\")\ndef main(event):\n    pass\n", "tool.star:1:1: load statements are not supported"},
		{"direct recursion", "def main(event):\n    pass\n\ndef fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\n", "tool.star:5:32: function fact refers to itself; recursion is not allowed"},
		{"%= on an index", "def main(event):\n    event[\"x\"] %= 2\n", "tool.star:2:16: %= is supported only on a plain name"},
		{"hidden builtins cannot be named", "def main(event):\n    return op\n", "tool.star:2:12: undefined: op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := starlarkrt.Check("tool.star", tc.src, "main")
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			fe := fault.As(err)
			require.NotNil(t, fe, "%v", err)
			require.Equal(t, fault.InvalidAction, fe.Code)
			require.Empty(t, fe.Field)
			require.True(t, strings.HasPrefix(fe.Message, tc.msg), "message %q, want prefix %q", fe.Message, tc.msg)
		})
	}
}

func TestCheckSourceSize(t *testing.T) {
	t.Parallel()
	src := "def main(event):\n    pass\n" + strings.Repeat("#", starlarkrt.DefaultMaxSource)
	err := starlarkrt.Check("tool.star", src, "main")
	require.Equal(t, fault.InvalidAction, fault.CodeOf(err))
	require.Contains(t, err.Error(), "the limit is 262144")
}

package jsonvalue

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 10 item 4: text recorded for a handler never carries NUL into jsonb.
func TestCleanReplacesNUL(t *testing.T) {
	t.Parallel()
	out := Clean([]byte(`{"a\u0000": ["x\u0000y", 12345678901234567890123, {"k": "\\u0000"}]}`))
	require.NoError(t, Check(out, "v"))
	require.JSONEq(t, `{"a\ufffd": ["x\ufffdy", 12345678901234567890123, {"k": "\\u0000"}]}`, string(out))
	same := []byte(`{"k": "\\u0000 is text"}`)
	require.Equal(t, same, Clean(same))
}

// Equal compares as jsonb does: numbers by exact value, so a definition or a
// session input read back from PostgreSQL (which writes 1.5e300 out in full)
// equals what was sent (found by the CLI's apply: re-applying made a new
// version every time).
func TestEqualComparesNumbersByValue(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{
		{`1.5e300`, `15` + strings.Repeat("0", 299)},
		{`{"a": 1, "b": [1e2]}`, `{"b": [100], "a": 1.0}`},
		{`12345678901234567890123`, `1.2345678901234567890123e22`},
		{`0.1`, `1e-1`},
	} {
		require.True(t, Equal([]byte(c[0]), []byte(c[1])), c)
	}
	for _, c := range [][2]string{
		{`9007199254740993`, `9007199254740992`},
		{`"1"`, `1`},
		{`{"a": 1}`, `{"a": 1, "b": null}`},
		{`[1, 2]`, `[2, 1]`},
		{`null`, `false`},
	} {
		require.False(t, Equal([]byte(c[0]), []byte(c[1])), c)
	}
}

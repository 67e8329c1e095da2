package jsonvalue

import (
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

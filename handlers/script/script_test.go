package script_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/script"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
	"github.com/actionsledger/actionsledger/turns"
)

// growSource runs the script of issue 10 item 2 from a turn and a tool.
const growSource = `
def grow():
    x = []
    for i in range(3000):
        x.append([0] * 999999)
    return len(x)

def turn(event):
    return {"status": "OPEN", "output": grow()}

def call(event):
    return grow()
`

func spec(config string) turns.Spec {
	src := growSource
	return turns.Spec{Source: &src, Config: jsonvalue.Value(config)}
}

// memory_mb is 1-1024; anything else is refused when the action is
// created (issue 10 item 2).
func TestConfigMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		config string
		field  string
	}{
		{`{"memory_mb": 1}`, ""},
		{`{"memory_mb": 1024, "max_steps": 100000000, "timeout_ms": 60000}`, ""},
		{`{"memory_mb": 0}`, ""},
		{`{"memory_mb": 1025}`, "config.memory_mb"},
		{`{"memory_mb": -1}`, "config.memory_mb"},
		{`{"memory_mb": 1.5}`, "config"},
		{`{"memory": 64}`, "config"},
	} {
		_, err := script.Kind().New(spec(tc.config))
		if tc.field == "" {
			require.NoError(t, err, tc.config)
			continue
		}
		fe := fault.As(err)
		require.NotNil(t, fe, tc.config)
		require.Equal(t, fault.InvalidConfig, fe.Code)
		require.Equal(t, tc.field, fe.Field, tc.config)
	}
}

// A turn that passes its memory budget fails for good (not retried: the
// same inputs fail the same way), and its transcript says why; a tool call
// fails with TOOL_CALL_FAILED and the sandbox's message.
func TestMemoryBudgetFailsTurnsAndCalls(t *testing.T) {
	t.Parallel()
	config := `{"max_steps": 100000000, "timeout_ms": 60000, "memory_mb": 16}`
	h, err := script.Kind().New(spec(config))
	require.NoError(t, err)
	tr := turns.NewTranscript(func() time.Time { return time.Unix(0, 0).UTC() })
	_, err = h.Run(context.Background(), &turns.Request{ActionID: uuid.New(), ExecutionID: uuid.New(), SessionID: "s", Turn: 1, Transcript: tr})
	require.Error(t, err)
	require.True(t, turns.IsPermanent(err), "a memory failure is not retried")
	require.Contains(t, err.Error(), "the script exceeded its memory budget of 16 MiB")
	entries := tr.Entries()
	require.Len(t, entries, 1)
	var entry struct{ Kind, Message string }
	require.NoError(t, json.Unmarshal(entries[0].Data, &entry))
	require.Equal(t, starlarkrt.KindMemory, entry.Kind)

	th, err := script.Kind().NewTool(spec(config))
	require.NoError(t, err)
	_, err = th.Call(context.Background(), &turns.CallRequest{ActionID: uuid.New(), ExecutionID: uuid.New(), Input: jsonvalue.Value(`{}`)})
	fe := fault.As(err)
	require.NotNil(t, fe)
	require.Equal(t, fault.CallFailed, fe.Code)
	require.Contains(t, fe.Message, "the script exceeded its memory budget of 16 MiB")

}

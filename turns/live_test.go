package turns_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// Issue 12 item 1: a live transcript entry fits a notification payload
// (under 8000 bytes): a small one whole, a large one cut with a marker and
// its size, on a character boundary, whatever its escapes cost.
func TestLivePayloadFitsANotification(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	e := turns.LiveEntry{Turn: 3, Attempt: 2, ExecutionID: uuid.New(),
		Entry: turns.Entry{Seq: 5, Kind: "model_message", Data: jsonvalue.Value(`{"text":"hello"}`), At: at}}
	p := turns.LivePayload(42, e)
	sid, got, err := turns.ParseLive(p)
	require.NoError(t, err)
	require.Equal(t, int64(42), sid)
	require.Equal(t, e, got)
	keys, all := turns.LiveKeys(p)
	require.Equal(t, []string{"42"}, keys)
	require.False(t, all)

	for name, data := range map[string]string{
		"long text":   strings.Repeat("é", 20_000),
		"all escapes": strings.Repeat("\"\\\n", 10_000),
	} {
		raw, err := json.Marshal(map[string]string{"text": data})
		require.NoError(t, err)
		e.Data = raw
		p := turns.LivePayload(42, e)
		require.Less(t, len(p), 8000, name)
		require.True(t, utf8.ValidString(p), name)
		_, got, err := turns.ParseLive(p)
		require.NoError(t, err, name)
		require.True(t, got.Truncated, name)
		var marker struct {
			Truncated bool
			Bytes     int
			Prefix    string
		}
		require.NoError(t, json.Unmarshal(got.Data, &marker), name)
		require.True(t, marker.Truncated, name)
		require.Equal(t, len(raw), marker.Bytes, name)
		require.True(t, strings.HasPrefix(string(raw), marker.Prefix), name)
		require.NotEmpty(t, marker.Prefix, name)
	}
}

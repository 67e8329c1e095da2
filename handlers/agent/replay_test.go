package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// T9: in a replay with recorded replies, each model call gets the reply
// the original run recorded, in order, whatever the provider would say
// now; asking for more than was recorded fails the attempt for good.
func TestRecordedRepliesReplaceTheModel_T9(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orig := b.handler(t, scripted([]any{ref(lookupID, nil)},
		step(0, map[string]any{"text": "Looking it up.", "toolCalls": []any{callTo("lookup", map[string]any{"q": "acct-1"})}}),
		step(1, map[string]any{"text": "All good.", "toolCalls": []any{report("OPEN", "", map[string]any{"seen": 1})}}),
	))
	out, rec, err := run(t, orig, b.request())
	require.NoError(t, err)
	var recorded []jsonvalue.Value
	for _, m := range rec.of("model_message") {
		raw, err := json.Marshal(m)
		require.NoError(t, err)
		recorded = append(recorded, raw)
	}
	require.Len(t, recorded, 2)

	// The provider now says something else; the recording wins.
	now := b.handler(t, scripted([]any{ref(lookupID, nil)},
		map[string]any{"toolCalls": []any{report("COMPLETED", "changed my mind", nil)}}))
	again, err := now.run(turns.WithRecordedReplies(context.Background(), recorded), b.request(), &fakeRec{})
	require.NoError(t, err)
	require.Equal(t, out.Status, again.Status)
	require.JSONEq(t, string(out.State), string(again.State))

	_, err = now.run(turns.WithRecordedReplies(context.Background(), recorded[:1]), b.request(), &fakeRec{})
	require.Error(t, err)
	require.True(t, turns.IsPermanent(err))
	require.Contains(t, err.Error(), "recorded 1 model replies")
}

package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
)

// TestScriptedSelection: the first reply whose step and when match is
// taken; none matching ends the message with no calls; the same
// conversation gets the same reply.
func TestScriptedSelection(t *testing.T) {
	t.Parallel()
	one, two := 1, 2
	s := NewScripted([]ScriptReply{
		{Step: &one, When: "alarm", Text: "step 1 with alarm", ToolCalls: []ScriptToolCall{{Name: "a", Input: json.RawMessage(`{"x":1}`)}, {ID: "mine", Name: "b"}}},
		{Step: &one, Text: "step 1"},
		{When: "refuse", Refusal: &ScriptRefusal{Category: "c", Explanation: "e"}},
		{Step: &two, Stop: provider.StopMaxTokens, Text: "cut"},
	})
	user := func(text string) provider.Message { return provider.Message{Role: provider.RoleUser, Text: text} }
	asst := provider.Message{Role: provider.RoleAssistant, Text: "hi"}
	tool := provider.Message{Role: provider.RoleUser, ToolResults: []provider.ToolResult{{CallID: "c", Content: `{"alarm":true}`}}}
	ctx := context.Background()
	complete := func(msgs ...provider.Message) *provider.Reply {
		r, err := s.Complete(ctx, &provider.Request{Messages: msgs})
		require.NoError(t, err)
		return r
	}

	r := complete(user("hello"))
	require.Equal(t, provider.StopEnd, r.StopReason)
	require.Empty(t, r.Text)
	require.Empty(t, r.ToolCalls)

	r = complete(user("hello"), asst, user("more"))
	require.Equal(t, "step 1", r.Text)

	r = complete(user("hello"), asst, tool)
	require.Equal(t, "step 1 with alarm", r.Text)
	require.Equal(t, provider.StopToolCalls, r.StopReason)
	require.Equal(t, []provider.ToolCall{{ID: "call_1_0", Name: "a", Input: json.RawMessage(`{"x":1}`)}, {ID: "mine", Name: "b", Input: json.RawMessage(`{}`)}}, r.ToolCalls)
	require.Equal(t, r, complete(user("hello"), asst, tool))
	require.Positive(t, r.Usage.InputTokens)
	require.Positive(t, r.Usage.OutputTokens)

	r = complete(user("please refuse"))
	require.Equal(t, provider.StopRefusal, r.StopReason)
	require.Equal(t, &provider.Refusal{Category: "c", Explanation: "e"}, r.Refusal)

	r = complete(user("x"), asst, user("y"), asst, user("z"))
	require.Equal(t, provider.StopMaxTokens, r.StopReason)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Complete(cancelled, &provider.Request{})
	require.ErrorIs(t, err, context.Canceled)
}

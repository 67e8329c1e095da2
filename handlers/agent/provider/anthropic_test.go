package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// anthropicMessage is a Messages API reply body as the API sends it.
func anthropicMessage(content, stopReason, stopDetails string) string {
	return `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": ` + content + `,
  "stop_reason": "` + stopReason + `",
  "stop_sequence": null,
  "stop_details": ` + stopDetails + `,
  "usage": {
    "input_tokens": 25,
    "cache_creation_input_tokens": 3,
    "cache_read_input_tokens": 2,
    "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 12,
    "service_tier": "standard"
  }
}`
}

// Usage of anthropicMessage: input counts cache creation and reads too.
var anthropicUsage = Usage{InputTokens: 30, OutputTokens: 12}

func newAnthropicStub(t *testing.T, replies ...stubReply) (*apiStub, Provider) {
	t.Helper()
	stub := newAPIStub(t, replies...)
	return stub, NewAnthropic(AnthropicConfig{BaseURL: stub.url + "/proxy", APIKey: "sk-ant-test"})
}

func TestAnthropicText(t *testing.T) {
	t.Parallel()
	stub, p := newAnthropicStub(t, stubReply{200, anthropicMessage(
		`[{"type": "text", "text": "Hello"}, {"type": "text", "text": ", world."}]`, "end_turn", "null")})

	reply, err := p.Complete(context.Background(), &Request{
		Model:    "claude-sonnet-4-5",
		System:   "Be brief.",
		Messages: []Message{{Role: RoleUser, Text: "Hi"}},
	})
	require.NoError(t, err)
	require.Equal(t, &Reply{Text: "Hello, world.", StopReason: StopEnd, Usage: anthropicUsage}, reply)

	call := stub.only(t)
	require.Equal(t, http.MethodPost, call.method)
	require.Equal(t, "/proxy/v1/messages", call.path, "base URL honoured")
	require.Equal(t, "sk-ant-test", call.header.Get("X-Api-Key"))
	require.Empty(t, call.header.Get("Authorization"), "the key goes in x-api-key only")
	require.NotEmpty(t, call.header.Get("Anthropic-Version"))
	require.Equal(t, "claude-sonnet-4-5", call.body["model"])
	require.EqualValues(t, 1024, call.body["max_tokens"], "default when Request.MaxTokens is 0")
	require.Equal(t, jsonOf(t, `[{"type":"text","text":"Be brief."}]`), call.body["system"])
	require.Equal(t, jsonOf(t, `[{"role":"user","content":[{"type":"text","text":"Hi"}]}]`), call.body["messages"])
	require.NotContains(t, call.body, "tools")
}

// The two-step exchange an agent loop makes: the model asks for two tool
// calls, the follow-up sends them back with their results in one user
// message, in call order.
func TestAnthropicToolUseRoundTrip(t *testing.T) {
	t.Parallel()
	stub, p := newAnthropicStub(t,
		stubReply{200, anthropicMessage(`[
      {"type": "text", "text": "Let me check both."},
      {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}},
      {"type": "tool_use", "id": "toolu_01B", "name": "get_time", "input": {}}
    ]`, "tool_use", "null")},
		stubReply{200, anthropicMessage(`[{"type": "text", "text": "Sunny; the time zone is unknown."}]`, "end_turn", "null")},
	)

	req := &Request{
		Model:     "claude-sonnet-4-5",
		Messages:  []Message{{Role: RoleUser, Text: "Weather and time in Paris?"}},
		Tools:     weatherTools,
		MaxTokens: 2048,
	}
	reply, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, &Reply{
		Text: "Let me check both.",
		ToolCalls: []ToolCall{
			{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Input: json.RawMessage(`{"city": "Paris"}`)},
			{ID: "toolu_01B", Name: "get_time", Input: json.RawMessage(`{}`)},
		},
		StopReason: StopToolCalls,
		Usage:      anthropicUsage,
	}, reply)

	first := stub.requests()[0]
	require.EqualValues(t, 2048, first.body["max_tokens"])
	require.Equal(t, jsonOf(t, `[
	  {"name":"get_weather","description":"Current weather of a city.",
	   "input_schema":{"type":"object","properties":{"city":{"type":"string","maxLength":100}},"required":["city"],"additionalProperties":false}},
	  {"name":"get_time","input_schema":{"type":"object","properties":{"zone":{"type":"string"},"skew":{"type":"integer","maximum":9007199254740993}}}}
	]`), first.body["tools"])
	require.Contains(t, string(first.raw), `"maximum":9007199254740993`)

	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, Text: reply.Text, ToolCalls: reply.ToolCalls},
		Message{Role: RoleUser, ToolResults: []ToolResult{
			{CallID: "toolu_01A09q90qw90lq917835lq9", Content: `{"sky":"sunny"}`},
			{CallID: "toolu_01B", Content: "unknown zone", IsError: true},
		}},
	)
	reply, err = p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Sunny; the time zone is unknown.", reply.Text)
	require.Equal(t, StopEnd, reply.StopReason)

	calls := stub.requests()
	require.Len(t, calls, 2)
	require.Equal(t, jsonOf(t, `[
	  {"role":"user","content":[{"type":"text","text":"Weather and time in Paris?"}]},
	  {"role":"assistant","content":[
	    {"type":"text","text":"Let me check both."},
	    {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"Paris"}},
	    {"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}
	  ]},
	  {"role":"user","content":[
	    {"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"{\"sky\":\"sunny\"}"}]},
	    {"type":"tool_result","tool_use_id":"toolu_01B","is_error":true,"content":[{"type":"text","text":"unknown zone"}]}
	  ]}
	]`), calls[1].body["messages"])
}

// H1, H2: a refusal is a reply (not an error) with stop_details' category
// and explanation, which a held turn reports.
func TestAnthropicStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		content     string
		stopReason  string
		stopDetails string
		want        *Reply
	}{
		{
			name:        "refusal with details",
			content:     `[]`,
			stopReason:  "refusal",
			stopDetails: `{"type": "refusal", "category": "cyber", "explanation": "Declined by a streaming policy classifier."}`,
			want: &Reply{StopReason: StopRefusal, Usage: anthropicUsage,
				Refusal: &Refusal{Category: "cyber", Explanation: "Declined by a streaming policy classifier."}},
		},
		{
			name:        "refusal with a null category",
			content:     `[{"type": "text", "text": "I can"}]`,
			stopReason:  "refusal",
			stopDetails: `{"type": "refusal", "category": null, "explanation": "Declined."}`,
			want:        &Reply{Text: "I can", StopReason: StopRefusal, Usage: anthropicUsage, Refusal: &Refusal{Explanation: "Declined."}},
		},
		{
			name:        "refusal without details",
			content:     `[]`,
			stopReason:  "refusal",
			stopDetails: `null`,
			want:        &Reply{StopReason: StopRefusal, Usage: anthropicUsage, Refusal: &Refusal{}},
		},
		{
			name:        "max_tokens",
			content:     `[{"type": "text", "text": "The answer is"}]`,
			stopReason:  "max_tokens",
			stopDetails: `null`,
			want:        &Reply{Text: "The answer is", StopReason: StopMaxTokens, Usage: anthropicUsage},
		},
		{
			name:        "stop_sequence",
			content:     `[{"type": "text", "text": "Done"}]`,
			stopReason:  "stop_sequence",
			stopDetails: `null`,
			want:        &Reply{Text: "Done", StopReason: StopEnd, Usage: anthropicUsage},
		},
		{
			name:        "context window",
			content:     `[{"type": "text", "text": "Long"}]`,
			stopReason:  "model_context_window_exceeded",
			stopDetails: `null`,
			want:        &Reply{Text: "Long", StopReason: StopMaxTokens, Usage: anthropicUsage},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, p := newAnthropicStub(t, stubReply{200, anthropicMessage(tc.content, tc.stopReason, tc.stopDetails)})
			reply, err := p.Complete(context.Background(), &Request{Model: "claude-sonnet-4-5", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
			require.NoError(t, err)
			require.Equal(t, tc.want, reply)
		})
	}
}

// H1: retryable failures let the executor retry the turn; permanent ones
// end the retries at once.
func TestAnthropicErrors(t *testing.T) {
	t.Parallel()
	errorBody := func(typ, msg string) string {
		return `{"type": "error", "error": {"type": "` + typ + `", "message": "` + msg + `"}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}`
	}
	for _, tc := range []struct {
		status    int
		body      string
		permanent bool
		contains  string
	}{
		{400, errorBody("invalid_request_error", "messages: text content blocks must be non-empty"),
			true, "HTTP 400 Bad Request: invalid_request_error: messages: text content blocks must be non-empty"},
		{401, errorBody("authentication_error", "invalid x-api-key"), true, "HTTP 401"},
		{404, errorBody("not_found_error", "model: claude-9"), true, "not_found_error"},
		{413, errorBody("request_too_large", "Request exceeds the maximum allowed number of bytes."), true, "HTTP 413"},
		{429, errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), false, "rate_limit_error"},
		{500, errorBody("api_error", "Internal server error"), false, "HTTP 500 Internal Server Error: api_error"},
		{529, errorBody("overloaded_error", "Overloaded"), false, "overloaded_error"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			stub, p := newAnthropicStub(t, stubReply{tc.status, tc.body})
			_, err := p.Complete(context.Background(), &Request{Model: "claude-sonnet-4-5", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
			require.Error(t, err)
			require.Equal(t, tc.permanent, IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, tc.contains)
			require.NotContains(t, err.Error(), "sk-ant-test")
			require.Len(t, stub.requests(), 1, "no SDK retries by default")
		})
	}
}

func TestAnthropicTransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // connections are now refused
	p := NewAnthropic(AnthropicConfig{BaseURL: srv.URL, APIKey: "k"})
	_, err := p.Complete(context.Background(), &Request{Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
	require.Error(t, err)
	require.False(t, IsPermanent(err))
}

func TestAnthropicInvalidRequest(t *testing.T) {
	t.Parallel()
	stub, p := newAnthropicStub(t)
	for name, req := range map[string]*Request{
		"no model":     {Messages: []Message{{Role: RoleUser, Text: "Hi"}}},
		"unknown role": {Model: "m", Messages: []Message{{Role: "tool", Text: "Hi"}}},
		"bad schema":   {Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}, Tools: []ToolSpec{{Name: "t", InputSchema: json.RawMessage(`"object"`)}}},
		"bad input": {Model: "m", Messages: []Message{
			{Role: RoleUser, Text: "Hi"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "toolu_1", Name: "t", Input: json.RawMessage(`{"a":`)}}},
		}},
	} {
		_, err := p.Complete(context.Background(), req)
		require.True(t, IsPermanent(err), "%s: %v", name, err)
	}
	require.Empty(t, stub.requests())

	_, err := NewAnthropic(AnthropicConfig{BaseURL: "ftp://example.com"}).Complete(context.Background(), &Request{Model: "m"})
	require.True(t, IsPermanent(err))
}

package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// openAICompletion is a chat.completion body as the API sends it, around
// one choice's message and finish_reason.
func openAICompletion(message, finishReason string) string {
	return `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": ` + message + `,
      "logprobs": null,
      "finish_reason": "` + finishReason + `"
    }
  ],
  "usage": {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": null
}`
}

func newOpenAIStub(t *testing.T, replies ...stubReply) (*apiStub, Provider) {
	t.Helper()
	stub := newAPIStub(t, replies...)
	return stub, NewOpenAI(OpenAIConfig{BaseURL: stub.url + "/v1", APIKey: "sk-test"})
}

func TestOpenAIText(t *testing.T) {
	t.Parallel()
	stub, p := newOpenAIStub(t, stubReply{200, openAICompletion(
		`{"role": "assistant", "content": "Hello! How can I help?", "refusal": null, "annotations": []}`, "stop")})

	reply, err := p.Complete(context.Background(), &Request{
		Model:     "gpt-4.1",
		System:    "Be brief.",
		Messages:  []Message{{Role: RoleUser, Text: "Hi"}},
		MaxTokens: 256,
	})
	require.NoError(t, err)
	require.Equal(t, &Reply{Text: "Hello! How can I help?", StopReason: StopEnd, Usage: Usage{InputTokens: 19, OutputTokens: 10}}, reply)

	call := stub.only(t)
	require.Equal(t, http.MethodPost, call.method)
	require.Equal(t, "/v1/chat/completions", call.path, "base URL honoured")
	require.Equal(t, "Bearer sk-test", call.header.Get("Authorization"))
	require.Equal(t, "gpt-4.1", call.body["model"])
	require.Equal(t, jsonOf(t, `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`), call.body["messages"])
	// Not api.openai.com: the field every compatible server reads.
	require.EqualValues(t, 256, call.body["max_tokens"])
	require.NotContains(t, call.body, "max_completion_tokens")
	require.NotContains(t, call.body, "tools")
}

// A local server without a key gets no Authorization header.
func TestOpenAINoKey(t *testing.T) {
	t.Parallel()
	stub := newAPIStub(t, stubReply{200, openAICompletion(`{"role": "assistant", "content": "ok", "refusal": null}`, "stop")})
	p := NewOpenAI(OpenAIConfig{BaseURL: stub.url + "/v1"})

	_, err := p.Complete(context.Background(), &Request{Model: "llama3.2", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
	require.NoError(t, err)
	call := stub.only(t)
	require.Empty(t, call.header.Get("Authorization"))
	require.NotContains(t, call.body, "max_tokens")
	require.NotContains(t, call.body, "max_completion_tokens")
}

func TestOpenAIMaxTokensParam(t *testing.T) {
	t.Parallel()
	req := &Request{Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}, MaxTokens: 50}
	for _, tc := range []struct {
		name string
		cfg  OpenAIConfig
		want string
	}{
		{"default base URL", OpenAIConfig{}, "max_completion_tokens"},
		{"api.openai.com", OpenAIConfig{BaseURL: "https://api.openai.com/v1/"}, "max_completion_tokens"},
		{"local server", OpenAIConfig{BaseURL: "http://localhost:11434/v1"}, "max_tokens"},
		{"explicit", OpenAIConfig{BaseURL: "http://localhost:8000/v1", MaxTokensParam: "max_completion_tokens"}, "max_completion_tokens"},
		{"explicit legacy", OpenAIConfig{MaxTokensParam: "max_tokens"}, "max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewOpenAI(tc.cfg).(*openAIProvider)
			require.NoError(t, p.err)
			params, err := p.params(req)
			require.NoError(t, err)
			b, err := json.Marshal(params)
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.Unmarshal(b, &body))
			require.EqualValues(t, 50, body[tc.want])
			other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[tc.want]
			require.NotContains(t, body, other)
		})
	}
}

// The two-step exchange an agent loop makes: the model asks for two tool
// calls, the follow-up sends them back with their results.
func TestOpenAIToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	stub, p := newOpenAIStub(t,
		stubReply{200, openAICompletion(`{
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {"id": "call_a1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
          {"id": "call_b2", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"Europe/Paris\"}"}}
        ],
        "refusal": null,
        "annotations": []
      }`, "tool_calls")},
		stubReply{200, openAICompletion(`{"role": "assistant", "content": "Sunny, 14:00.", "refusal": null}`, "stop")},
	)

	req := &Request{
		Model:    "gpt-4.1",
		Messages: []Message{{Role: RoleUser, Text: "Weather and time in Paris?"}},
		Tools:    weatherTools,
	}
	reply, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, StopToolCalls, reply.StopReason)
	require.Empty(t, reply.Text)
	require.Equal(t, []ToolCall{
		{ID: "call_a1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_b2", Name: "get_time", Input: json.RawMessage(`{"zone": "Europe/Paris"}`)},
	}, reply.ToolCalls)

	first := stub.requests()[0]
	require.Equal(t, jsonOf(t, `[
	  {"type":"function","function":{"name":"get_weather","description":"Current weather of a city.",
	    "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":100}},"required":["city"],"additionalProperties":false}}},
	  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"},"skew":{"type":"integer","maximum":9007199254740993}}}}}
	]`), first.body["tools"])
	require.Contains(t, string(first.raw), `"maximum":9007199254740993`)

	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, Text: reply.Text, ToolCalls: reply.ToolCalls},
		Message{Role: RoleUser, ToolResults: []ToolResult{
			{CallID: "call_a1", Content: `{"sky":"sunny"}`},
			{CallID: "call_b2", Content: "unknown zone", IsError: true},
		}},
	)
	reply, err = p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Sunny, 14:00.", reply.Text)
	require.Equal(t, StopEnd, reply.StopReason)

	calls := stub.requests()
	require.Len(t, calls, 2)
	require.Equal(t, jsonOf(t, `[
	  {"role":"user","content":"Weather and time in Paris?"},
	  {"role":"assistant","tool_calls":[
	    {"id":"call_a1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
	    {"id":"call_b2","type":"function","function":{"name":"get_time","arguments":"{\"zone\": \"Europe/Paris\"}"}}
	  ]},
	  {"role":"tool","tool_call_id":"call_a1","content":"{\"sky\":\"sunny\"}"},
	  {"role":"tool","tool_call_id":"call_b2","content":"error: unknown zone"}
	]`), calls[1].body["messages"])
}

// Some compatible servers report tool calls with finish_reason "stop".
func TestOpenAIToolCallsWithStop(t *testing.T) {
	t.Parallel()
	_, p := newOpenAIStub(t, stubReply{200, openAICompletion(`{"role": "assistant", "content": "",
	  "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}`, "stop")})
	reply, err := p.Complete(context.Background(), &Request{Model: "qwen3", Messages: []Message{{Role: RoleUser, Text: "Time?"}}})
	require.NoError(t, err)
	require.Equal(t, StopToolCalls, reply.StopReason)
	require.Equal(t, []ToolCall{{ID: "call_1", Name: "get_time", Input: json.RawMessage(`{}`)}}, reply.ToolCalls)
}

// H1, H2: a refusal is a reply (not an error) with what the API says
// about it, which a held turn reports as category and explanation.
func TestOpenAIStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		message string
		finish  string
		want    *Reply
	}{
		{
			name:    "refusal field",
			message: `{"role": "assistant", "content": null, "refusal": "I'm sorry, I can't help with that.", "annotations": []}`,
			finish:  "stop",
			want: &Reply{StopReason: StopRefusal, Refusal: &Refusal{Explanation: "I'm sorry, I can't help with that."},
				Usage: Usage{InputTokens: 19, OutputTokens: 10}},
		},
		{
			name:    "content filter",
			message: `{"role": "assistant", "content": null, "refusal": null}`,
			finish:  "content_filter",
			want: &Reply{StopReason: StopRefusal, Refusal: &Refusal{Category: "content_filter"},
				Usage: Usage{InputTokens: 19, OutputTokens: 10}},
		},
		{
			name:    "length",
			message: `{"role": "assistant", "content": "The answer is", "refusal": null}`,
			finish:  "length",
			want:    &Reply{Text: "The answer is", StopReason: StopMaxTokens, Usage: Usage{InputTokens: 19, OutputTokens: 10}},
		},
		{
			name: "length cuts a tool call",
			message: `{"role": "assistant", "content": null, "tool_calls": [
			  {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
			  {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"ci"}}]}`,
			finish: "length",
			want: &Reply{StopReason: StopMaxTokens, ToolCalls: []ToolCall{{ID: "call_1", Name: "get_time", Input: json.RawMessage(`{}`)}},
				Usage: Usage{InputTokens: 19, OutputTokens: 10}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, p := newOpenAIStub(t, stubReply{200, openAICompletion(tc.message, tc.finish)})
			reply, err := p.Complete(context.Background(), &Request{Model: "gpt-4.1", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
			require.NoError(t, err)
			require.Equal(t, tc.want, reply)
		})
	}
}

func TestOpenAIBadArguments(t *testing.T) {
	t.Parallel()
	_, p := newOpenAIStub(t, stubReply{200, openAICompletion(`{"role": "assistant", "content": null,
	  "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "[1]"}}]}`, "tool_calls")})
	_, err := p.Complete(context.Background(), &Request{Model: "gpt-4.1", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
	require.ErrorContains(t, err, "not a JSON object")
	require.False(t, IsPermanent(err), "a new sample may do better")
}

// H1: retryable failures let the executor retry the turn; permanent ones
// end the retries at once.
func TestOpenAIErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		body      string
		permanent bool
		contains  string
	}{
		{400, `{"error": {"message": "Invalid value for 'max_tokens'.", "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}}`,
			true, "HTTP 400 Bad Request: invalid_request_error/invalid_value: Invalid value for 'max_tokens'."},
		{401, `{"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`,
			true, "HTTP 401"},
		{404, `{"error": {"message": "The model 'gpt-9' does not exist", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}`,
			true, "model_not_found"},
		{429, `{"error": {"message": "Rate limit reached.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`,
			false, "HTTP 429"},
		{500, `{"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}}`,
			false, "HTTP 500 Internal Server Error: server_error"},
		{503, `upstream unavailable`, false, "HTTP 503"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			stub, p := newOpenAIStub(t, stubReply{tc.status, tc.body})
			_, err := p.Complete(context.Background(), &Request{Model: "gpt-4.1", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
			require.Error(t, err)
			require.Equal(t, tc.permanent, IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, tc.contains)
			require.Len(t, stub.requests(), 1, "no SDK retries by default")
		})
	}
}

func TestOpenAITransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // connections are now refused
	p := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1"})
	_, err := p.Complete(context.Background(), &Request{Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}})
	require.Error(t, err)
	require.False(t, IsPermanent(err))
}

func TestOpenAIInvalidRequest(t *testing.T) {
	t.Parallel()
	stub, p := newOpenAIStub(t)
	for name, req := range map[string]*Request{
		"no model":     {Messages: []Message{{Role: RoleUser, Text: "Hi"}}},
		"unknown role": {Model: "m", Messages: []Message{{Role: "system", Text: "Hi"}}},
		"bad schema":   {Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}, Tools: []ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[]`)}}},
	} {
		_, err := p.Complete(context.Background(), req)
		require.True(t, IsPermanent(err), "%s: %v", name, err)
	}
	require.Empty(t, stub.requests())

	for _, cfg := range []OpenAIConfig{{BaseURL: "localhost:8080"}, {MaxTokensParam: "max_output_tokens"}} {
		_, err := NewOpenAI(cfg).Complete(context.Background(), &Request{Model: "m"})
		require.True(t, IsPermanent(err), "%+v: %v", cfg, err)
	}
}

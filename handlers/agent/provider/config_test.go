package provider

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"nothing set", nil, nil},
		{"empty values", map[string]string{EnvOpenAIAPIKey: "", EnvAnthropicBaseURL: ""}, nil},
		{"openai key", map[string]string{EnvOpenAIAPIKey: "sk-1"}, []string{"openai"}},
		{"openai local server, no key", map[string]string{EnvOpenAIBaseURL: "http://localhost:11434/v1"}, []string{"openai"}},
		{"anthropic key", map[string]string{EnvAnthropicAPIKey: "sk-ant-1"}, []string{"anthropic"}},
		{"both", map[string]string{EnvOpenAIAPIKey: "sk-1", EnvAnthropicBaseURL: "http://localhost:4000"}, []string{"anthropic", "openai"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := FromEnv(func(k string) string { return tc.env[k] })
			require.NotNil(t, got)
			require.Equal(t, tc.want, slices.Sorted(maps.Keys(got)))
		})
	}
}

// The providers FromEnv builds call the configured base URLs with the keys.
func TestFromEnvWiring(t *testing.T) {
	t.Parallel()
	openAIStub := newAPIStub(t, stubReply{200, openAICompletion(`{"role": "assistant", "content": "hi", "refusal": null}`, "stop")})
	anthropicStub := newAPIStub(t, stubReply{200, anthropicMessage(`[{"type": "text", "text": "hi"}]`, "end_turn", "null")})
	env := map[string]string{
		EnvOpenAIBaseURL:    openAIStub.url + "/v1",
		EnvOpenAIAPIKey:     "sk-env",
		EnvAnthropicBaseURL: anthropicStub.url,
		EnvAnthropicAPIKey:  "sk-ant-env",
	}
	providers := FromEnv(func(k string) string { return env[k] })
	req := &Request{Model: "m", Messages: []Message{{Role: RoleUser, Text: "Hi"}}}

	_, err := providers["openai"].Complete(context.Background(), req)
	require.NoError(t, err)
	call := openAIStub.only(t)
	require.Equal(t, "/v1/chat/completions", call.path)
	require.Equal(t, "Bearer sk-env", call.header.Get("Authorization"))

	_, err = providers["anthropic"].Complete(context.Background(), req)
	require.NoError(t, err)
	call = anthropicStub.only(t)
	require.Equal(t, "/v1/messages", call.path)
	require.Equal(t, "sk-ant-env", call.header.Get("X-Api-Key"))
}

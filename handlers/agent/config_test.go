package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// TestConfigErrors: New refuses invalid configs with InvalidConfig naming
// the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tool := lookupID.String()
	opts := Options{Providers: map[string]provider.Provider{"openai": failing{}}}
	for _, tc := range []struct {
		name, config, field, message string
	}{
		{"no config", ``, "config.provider", "needs a config"},
		{"not an object", `[1]`, "config", "must be a JSON object"},
		{"unknown key", `{"provider":"openai","model":"m","temperature":1}`, "config.temperature", "unknown key"},
		{"no provider", `{"model":"m"}`, "config.provider", "provider is required"},
		{"unknown provider", `{"provider":"gemini","model":"m"}`, "config.provider", `unknown provider "gemini"`},
		{"provider not configured", `{"provider":"anthropic","model":"m"}`, "config.provider", "not configured on this server"},
		{"no model", `{"provider":"openai"}`, "config.model", "model is required"},
		{"model not a string", `{"provider":"openai","model":3}`, "config.model", "must be a string"},
		{"maxSteps range", `{"provider":"openai","model":"m","maxSteps":101}`, "config.maxSteps", "from 1 to 100"},
		{"maxSteps type", `{"provider":"openai","model":"m","maxSteps":1.5}`, "config.maxSteps", "must be an integer"},
		{"maxTokens", `{"provider":"openai","model":"m","maxTokens":0}`, "config.maxTokens", "from 1"},
		{"maxTotalTokens", `{"provider":"openai","model":"m","maxTotalTokens":-1}`, "config.maxTotalTokens", "from 0"},
		{"attempts", `{"provider":"openai","model":"m","attempts":11}`, "config.attempts", "from 1 to 10"},
		{"tool without action", `{"provider":"openai","model":"m","tools":[{}]}`, "config.tools[0].action", "UUID"},
		{"tool bad approval", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","approval":"MAYBE"}]}`, "config.tools[0].approval", "REQUIRED or NONE"},
		{"tool unknown key", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","gate":true}]}`, "config.tools[0].gate", "unknown key"},
		{"tool bad name", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","name":"a.b"}]}`, "config.tools[0].name", "letters, digits"},
		{"tool built-in name", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","name":"report_outcome"}]}`, "config.tools[0].name", "built-in"},
		{"tool duplicate name", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","name":"x"},{"action":"` + sendID.String() + `","name":"x"}]}`, "config.tools[1].name", "already the name of config.tools[0]"},
		{"same tool twice", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `"},{"action":"` + tool + `"}]}`, "config.tools[1].name", "same tool"},
		{"tool input not object", `{"provider":"openai","model":"m","tools":[{"action":"` + tool + `","input":[1]}]}`, "config.tools[0].input", "JSON object"},
		{"scripted without script", `{"provider":"scripted"}`, "config.script", "needs a script"},
		{"script for openai", `{"provider":"openai","model":"m","script":[{}]}`, "config.script", "scripted only"},
		{"script bad stop", `{"provider":"scripted","script":[{"stop":"refusal"}]}`, "config.script[0].stop", "stop is"},
		{"script negative step", `{"provider":"scripted","script":[{"step":-1}]}`, "config.script[0].step", "0 or more"},
		{"script call without name", `{"provider":"scripted","script":[{"toolCalls":[{"input":{}}]}]}`, "config.script[0].toolCalls[0].name", "names its tool"},
		{"script refusal key", `{"provider":"scripted","script":[{"refusal":{"why":"x"}}]}`, "config.script[0].refusal.why", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Kind(opts).New(turns.Spec{Config: jsonvalue.Value(tc.config)})
			fe := fault.As(err)
			require.NotNil(t, fe, "%v", err)
			require.Equal(t, fault.InvalidConfig, fe.Code)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, fe.Message, tc.message)
		})
	}

	t.Run("source refused", func(t *testing.T) {
		t.Parallel()
		src := "def turn(e): pass"
		_, err := Kind(opts).New(turns.Spec{Config: jsonvalue.Value(`{"provider":"scripted","script":[{}]}`), Source: &src})
		require.Equal(t, "source", fault.As(err).Field)
	})

	t.Run("through the registry", func(t *testing.T) {
		t.Parallel()
		r := turns.NewRegistry(Kind(opts))
		require.NoError(t, r.Check(KindName, jsonvalue.Value(`{"provider":"openai","model":"gpt"}`), nil, false))
		err := r.Check(KindName, jsonvalue.Value(`{"provider":"openai","model":"gpt"}`), nil, true)
		require.Equal(t, fault.InvalidConfig, fault.CodeOf(err))
	})
}

// TestConfigDefaults: omitted settings take their defaults.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(json.RawMessage(`{"provider":"scripted","script":[{}],"tools":[{"action":"`+lookupID.String()+`"}]}`), func(string) bool { return false })
	require.NoError(t, err)
	require.Equal(t, DefaultMaxSteps, cfg.MaxSteps)
	require.Equal(t, DefaultMaxTokens, cfg.MaxTokens)
	require.Equal(t, 0, cfg.MaxTotalTokens)
	require.Equal(t, DefaultAttempts, cfg.Attempts)
	require.Equal(t, ApprovalNone, cfg.Tools[0].Approval)
	require.False(t, cfg.Tools[0].Gated())
}

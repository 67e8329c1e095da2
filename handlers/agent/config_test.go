package agent

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
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
			require.Len(t, action.Errors(err), 1, "one problem, no follow-ups: %v", err)
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

// problem is one error as a test expects it.
type problem struct{ code, field string }

func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	var out []problem
	for _, e := range action.Errors(err) {
		fe := fault.As(e)
		require.NotNil(t, fe, "%v", e)
		out = append(out, problem{fe.Code, fe.Field})
	}
	return out
}

// TestConfigReportsEveryProblem: New reports every problem of a config at
// once, in the order of the config's settings, and each survives the
// registry and action validation as an error of its own, which
// createAction presents as one GraphQL error per problem (A3).
func TestConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	tool := lookupID.String()
	opts := Options{Providers: map[string]provider.Provider{"openai": failing{}}}
	raw := jsonvalue.Value(`{"provider":"scripted","script":[{"text":"x"}],"maxSteps":0,"attempts":0,"tools":[{"action":"` + tool + `","approval":"MAYBE"}]}`)
	want := []problem{
		{fault.InvalidConfig, "config.maxSteps"},
		{fault.InvalidConfig, "config.attempts"},
		{fault.InvalidConfig, "config.tools[0].approval"},
	}

	_, err := Kind(opts).New(turns.Spec{Config: raw})
	var list ConfigErrors
	require.ErrorAs(t, err, &list)
	require.Equal(t, want, problemsOf(t, err))
	require.Equal(t, "config.maxSteps", fault.As(err).Field, "fault.As finds the first")
	require.Equal(t, "config.maxSteps: must be from 1 to 100 (got 0); config.attempts: must be from 1 to 10 (got 0); "+
		`config.tools[0].approval: approval is REQUIRED or NONE (got "MAYBE")`, err.Error())

	r := turns.NewRegistry(Kind(opts))
	require.Equal(t, want, problemsOf(t, r.Check(KindName, raw, nil, false)))

	_, err = action.Compile(action.Definition{Name: "agent", Kind: KindName, Config: raw}, r.Check)
	var fromConfig []problem
	for _, p := range problemsOf(t, err) {
		if p.code == fault.InvalidConfig {
			fromConfig = append(fromConfig, p)
		}
	}
	require.Equal(t, want, fromConfig, "action validation keeps every problem: %v", err)

	t.Run("every kind of problem", func(t *testing.T) {
		t.Parallel()
		src := "x"
		_, err := Kind(opts).New(turns.Spec{Source: &src, Config: jsonvalue.Value(`{"provider":"openai","model":3,"temperature":1,"maxTokens":"many",
			"maxTotalTokens":-1,"tools":[{"action":"nope","name":"a.b","gate":1},{"action":"` + tool + `","input":[1]}],
			"script":[{"step":-1,"stop":"x","toolCalls":[{"input":3}]}]}`)})
		require.Equal(t, []problem{
			{fault.InvalidConfig, "source"},
			{fault.InvalidConfig, "config.maxTokens"},
			{fault.InvalidConfig, "config.model"},
			{fault.InvalidConfig, "config.temperature"},
			{fault.InvalidConfig, "config.maxTotalTokens"},
			{fault.InvalidConfig, "config.tools[0].gate"},
			{fault.InvalidConfig, "config.tools[0].action"},
			{fault.InvalidConfig, "config.tools[0].name"},
			{fault.InvalidConfig, "config.tools[1].input"},
			{fault.InvalidConfig, "config.script"},
			{fault.InvalidConfig, "config.script[0].step"},
			{fault.InvalidConfig, "config.script[0].stop"},
			{fault.InvalidConfig, "config.script[0].toolCalls[0].name"},
			{fault.InvalidConfig, "config.script[0].toolCalls[0].input"},
		}, problemsOf(t, err))
	})
}

// TestToolsCheckedAtCreate: with a ToolDirectory, New resolves each tool
// reference: one the directory refuses (missing, not a tool, inactive) is
// a problem of config.tools[i].action with the directory's reason, and a
// model-facing name that clashes only once the tools' own names are known
// one of config.tools[i].name; all are reported together with the other
// problems. A transient lookup error is passed over (the turn resolves
// the tools again).
func TestToolsCheckedAtCreate(t *testing.T) {
	t.Parallel()
	missing := uuid.MustParse("55555555-5555-4555-8555-555555555555")
	other := uuid.MustParse("66666666-6666-4666-8666-666666666666")   // also named lookup
	odd := uuid.MustParse("77777777-7777-4777-8777-777777777777")     // a name no model takes
	outcome := uuid.MustParse("88888888-8888-4888-8888-888888888888") // named like a built-in
	setupDir := func(t *testing.T) *bundle {
		b := setup(t)
		b.dir.tools[other] = &ToolInfo{ActionID: other, Version: 1, Name: "lookup"}
		b.dir.tools[odd] = &ToolInfo{ActionID: odd, Version: 1, Name: "look.up"}
		b.dir.tools[outcome] = &ToolInfo{ActionID: outcome, Version: 1, Name: "report_outcome"}
		return b
	}
	newAgent := func(b *bundle, tools ...any) error {
		raw, err := json.Marshal(scripted(tools, map[string]any{"text": "x"}))
		require.NoError(t, err)
		_, err = Kind(b.opts).New(turns.Spec{Config: raw})
		return err
	}

	t.Run("refused references", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		err := newAgent(b, ref(missing, nil), ref(notToolID, nil), ref(brokenID, nil), ref(lookupID, map[string]any{"approval": "MAYBE"}))
		// The config's own problems come first, then the directory's.
		require.Equal(t, []problem{
			{fault.InvalidConfig, "config.tools[3].approval"},
			{fault.InvalidConfig, "config.tools[0].action"},
			{fault.InvalidConfig, "config.tools[1].action"},
			{fault.InvalidConfig, "config.tools[2].action"},
		}, problemsOf(t, err))
		errs := action.Errors(err)
		require.EqualError(t, errs[1], "config.tools[0].action: no tool action "+missing.String())
		require.EqualError(t, errs[2], `config.tools[1].action: action "monitor" (`+notToolID.String()+`) is not a tool`)
		require.EqualError(t, errs[3], "config.tools[2].action: the tool action "+brokenID.String()+" is DISABLED")
		require.Equal(t, fault.ActionInactive, fault.As(errors.Unwrap(errs[3])).Code, "the directory's error is the cause")
	})

	t.Run("a refused action referred to twice", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		err := newAgent(b, ref(missing, nil), ref(missing, map[string]any{"name": "again"}))
		require.Equal(t, []problem{
			{fault.InvalidConfig, "config.tools[0].action"},
			{fault.InvalidConfig, "config.tools[1].action"},
		}, problemsOf(t, err))
	})

	t.Run("name clashes", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		err := newAgent(b,
			ref(lookupID, nil), // lookup
			ref(other, nil),    // lookup again: clash
			ref(sendID, map[string]any{"name": "lookup"}), // named like tools[0]'s tool
			ref(odd, nil),     // look.up
			ref(outcome, nil), // report_outcome
			ref(other, map[string]any{"name": "other_lookup"}), // renamed: fine
		)
		require.Equal(t, []problem{
			{fault.InvalidConfig, "config.tools[1].name"},
			{fault.InvalidConfig, "config.tools[2].name"},
			{fault.InvalidConfig, "config.tools[3].name"},
			{fault.InvalidConfig, "config.tools[4].name"},
		}, problemsOf(t, err))
		errs := action.Errors(err)
		require.EqualError(t, errs[0], `config.tools[1].name: the tool's name "lookup" is already the name of config.tools[0]'s tool; the model needs distinct names: set a different name`)
		require.EqualError(t, errs[1], `config.tools[2].name: "lookup" is already the name of config.tools[0]'s tool; the model needs distinct names: set a different name`)
		require.ErrorContains(t, errs[2], `the tool's name "look.up" is not one a model can use`)
		require.ErrorContains(t, errs[3], `the tool's name "report_outcome" is a built-in tool's`)
	})

	t.Run("an explicit name taken first", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		err := newAgent(b, ref(sendID, map[string]any{"name": "lookup"}), ref(lookupID, nil))
		require.EqualError(t, err, `config.tools[1].name: the tool's name "lookup" is already the name of config.tools[0]; the model needs distinct names: set a different name`)
	})

	t.Run("problems found before are not repeated", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		// The same tool twice without names: one problem, not a second
		// clash of the resolved names; a bad explicit name is not
		// checked against the others.
		err := newAgent(b, ref(lookupID, nil), ref(lookupID, nil), ref(other, map[string]any{"name": "a.b"}))
		require.Equal(t, []problem{
			{fault.InvalidConfig, "config.tools[1].name"},
			{fault.InvalidConfig, "config.tools[2].name"},
		}, problemsOf(t, err))
		require.ErrorContains(t, err, "refers to the same tool")
	})

	t.Run("valid references", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		require.NoError(t, newAgent(b, ref(lookupID, nil), ref(other, map[string]any{"name": "lookup2"}), ref(sendID, map[string]any{"approval": "REQUIRED"})))
	})

	t.Run("transient errors pass", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		b.dir.err = errors.New("database is down")
		require.NoError(t, newAgent(b, ref(missing, nil), ref(brokenID, nil)))
	})

	t.Run("no directory, no check", func(t *testing.T) {
		t.Parallel()
		b := setupDir(t)
		b.opts.Tools = nil
		require.NoError(t, newAgent(b, ref(missing, nil)))
	})
}

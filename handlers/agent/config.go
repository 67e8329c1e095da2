package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Provider names a config may give.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
)

// Approval settings of a tool reference (P1).
const (
	ApprovalRequired = "REQUIRED"
	ApprovalNone     = "NONE"
)

// Defaults and bounds of the config.
const (
	DefaultMaxSteps  = 16
	MaxMaxSteps      = 100
	DefaultMaxTokens = 1024
	MaxMaxTokens     = 200_000
	DefaultAttempts  = 3
	MaxAttempts      = 10
	MaxTools         = 32
	MaxSystem        = 64 << 10 // bytes of system prompt
	MaxModel         = 200      // bytes of model name
	MaxScript        = 1000     // replies of a scripted provider
)

// Config is an agent action's config (JSON, camelCase keys, unknown keys
// refused). See the package doc.
type Config struct {
	Provider       string    `json:"provider"`
	Model          string    `json:"model,omitempty"`
	System         string    `json:"system,omitempty"`
	Tools          []ToolRef `json:"tools,omitempty"`
	MaxSteps       int       `json:"maxSteps"`
	MaxTokens      int       `json:"maxTokens"`
	MaxTotalTokens int       `json:"maxTotalTokens,omitempty"`
	Attempts       int       `json:"attempts"`
	Programmatic   bool      `json:"programmatic,omitempty"`
	// Script is the scripted provider's replies (provider "scripted" only).
	Script []ScriptReply `json:"script,omitempty"`
}

// ToolRef is one entry of config.tools: a tool action the agent may call.
type ToolRef struct {
	Action uuid.UUID `json:"action"`
	// Name overrides the tool's name as the model sees it.
	Name string `json:"name,omitempty"`
	// Approval is REQUIRED (each call waits for a person, P1) or NONE.
	Approval string `json:"approval"`
	// Input is fixed input: its top-level keys replace the model's.
	Input json.RawMessage `json:"input,omitempty"`
}

// Gated reports whether calls need approval.
func (r ToolRef) Gated() bool { return r.Approval == ApprovalRequired }

// ScriptReply is one reply of the scripted provider: it answers a model
// call when Step (if set) is the number of assistant messages so far and
// When (if set) occurs in the conversation's user text and tool results.
type ScriptReply struct {
	Step      *int             `json:"step,omitempty"`
	When      string           `json:"when,omitempty"`
	Text      string           `json:"text,omitempty"`
	ToolCalls []ScriptToolCall `json:"toolCalls,omitempty"`
	Refusal   *ScriptRefusal   `json:"refusal,omitempty"`
	// Stop is "end" (the default) or "max_tokens".
	Stop string `json:"stop,omitempty"`
}

// ScriptToolCall is a tool call of a scripted reply; ID defaults to
// call_<step>_<index>, Input to {}.
type ScriptToolCall struct {
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ScriptRefusal makes a scripted reply a refusal.
type ScriptRefusal struct {
	Category    string `json:"category,omitempty"`
	Explanation string `json:"explanation,omitempty"`
}

// namePattern is what providers accept as a tool name.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Names of the built-in tools.
const (
	toolReportOutcome = "report_outcome"
	toolRunCode       = "run_code"
)

func builtin(name string) bool { return name == toolReportOutcome || name == toolRunCode }

// parseConfig decodes and validates raw; configured says which provider
// names the server offers. Errors: *fault.Error InvalidConfig naming the
// field.
func parseConfig(raw json.RawMessage, configured func(string) bool) (*Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, invalid("config.provider", "an agent needs a config with a provider (%s, %s or %s)", ProviderOpenAI, ProviderAnthropic, ProviderScripted)
	}
	cfg := &Config{}
	var tools, script []json.RawMessage
	var (
		maxSteps, maxTokens, attempts, maxTotal *int
	)
	if err := object(raw, "config", fields{
		"provider": &cfg.Provider, "model": &cfg.Model, "system": &cfg.System,
		"tools": &tools, "maxSteps": &maxSteps, "maxTokens": &maxTokens, "maxTotalTokens": &maxTotal,
		"attempts": &attempts, "programmatic": &cfg.Programmatic, "script": &script,
	}); err != nil {
		return nil, err
	}
	switch cfg.Provider {
	case "":
		return nil, invalid("config.provider", "provider is required: %s, %s or %s", ProviderOpenAI, ProviderAnthropic, ProviderScripted)
	case ProviderScripted:
	case ProviderOpenAI, ProviderAnthropic:
		if !configured(cfg.Provider) {
			return nil, invalid("config.provider", "provider %q is not configured on this server", cfg.Provider)
		}
	default:
		return nil, invalid("config.provider", "unknown provider %q; use %s, %s or %s", cfg.Provider, ProviderOpenAI, ProviderAnthropic, ProviderScripted)
	}
	switch {
	case cfg.Model == "" && cfg.Provider != ProviderScripted:
		return nil, invalid("config.model", "model is required for provider %s", cfg.Provider)
	case len(cfg.Model) > MaxModel:
		return nil, invalid("config.model", "at most %d bytes", MaxModel)
	case len(cfg.System) > MaxSystem:
		return nil, invalid("config.system", "the system prompt is at most %d bytes", MaxSystem)
	}
	var err error
	if cfg.MaxSteps, err = bounded("config.maxSteps", maxSteps, DefaultMaxSteps, 1, MaxMaxSteps); err != nil {
		return nil, err
	}
	if cfg.MaxTokens, err = bounded("config.maxTokens", maxTokens, DefaultMaxTokens, 1, MaxMaxTokens); err != nil {
		return nil, err
	}
	if cfg.MaxTotalTokens, err = bounded("config.maxTotalTokens", maxTotal, 0, 0, 1<<40); err != nil {
		return nil, err
	}
	if cfg.Attempts, err = bounded("config.attempts", attempts, DefaultAttempts, 1, MaxAttempts); err != nil {
		return nil, err
	}
	if cfg.Tools, err = parseTools(tools); err != nil {
		return nil, err
	}
	switch {
	case cfg.Provider == ProviderScripted && len(script) == 0:
		return nil, invalid("config.script", "provider scripted needs a script: a list of replies")
	case cfg.Provider != ProviderScripted && script != nil:
		return nil, invalid("config.script", "a script is for provider scripted only")
	}
	if cfg.Script, err = parseScript(script); err != nil {
		return nil, err
	}
	return cfg, nil
}

func bounded(field string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, invalid(field, "must be from %d to %d (got %d)", lo, hi, *v)
	}
	return *v, nil
}

func parseTools(raws []json.RawMessage) ([]ToolRef, error) {
	if len(raws) > MaxTools {
		return nil, invalid("config.tools", "at most %d tools (got %d)", MaxTools, len(raws))
	}
	refs := make([]ToolRef, len(raws))
	names := map[string]string{}   // explicit name → field
	actions := map[uuid.UUID]int{} // action → index of a reference without a name
	for i, raw := range raws {
		field := fmt.Sprintf("config.tools[%d]", i)
		var action string
		if err := object(raw, field, fields{"action": &action, "name": &refs[i].Name, "approval": &refs[i].Approval, "input": &refs[i].Input}); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(action)
		if err != nil {
			return nil, invalid(field+".action", "the tool action's id (a UUID) is required")
		}
		ref := &refs[i]
		ref.Action = id
		switch ref.Approval {
		case "":
			ref.Approval = ApprovalNone
		case ApprovalNone, ApprovalRequired:
		default:
			return nil, invalid(field+".approval", "approval is %s or %s (got %q)", ApprovalRequired, ApprovalNone, ref.Approval)
		}
		if ref.Name != "" {
			switch {
			case !namePattern.MatchString(ref.Name):
				return nil, invalid(field+".name", "a tool name is 1-64 letters, digits, _ or -")
			case builtin(ref.Name):
				return nil, invalid(field+".name", "%q is a built-in tool's name", ref.Name)
			case names[ref.Name] != "":
				return nil, invalid(field+".name", "%q is already the name of %s", ref.Name, names[ref.Name])
			}
			names[ref.Name] = field
		} else {
			if j, ok := actions[id]; ok {
				return nil, invalid(field+".name", "config.tools[%d] refers to the same tool: give one of them a name", j)
			}
			actions[id] = i
		}
		if in := bytes.TrimSpace(ref.Input); len(in) == 0 || string(in) == "null" {
			ref.Input = nil
		} else if in[0] != '{' {
			return nil, invalid(field+".input", "fixed input is a JSON object")
		} else if err := jsonvalue.Check(in, field+".input"); err != nil {
			return nil, invalid(field+".input", "%s", fault.As(err).Message)
		}
	}
	return refs, nil
}

func parseScript(raws []json.RawMessage) ([]ScriptReply, error) {
	if len(raws) > MaxScript {
		return nil, invalid("config.script", "at most %d replies (got %d)", MaxScript, len(raws))
	}
	out := make([]ScriptReply, len(raws))
	for i, raw := range raws {
		field := fmt.Sprintf("config.script[%d]", i)
		r := &out[i]
		var calls []json.RawMessage
		var refusal json.RawMessage
		if err := object(raw, field, fields{"step": &r.Step, "when": &r.When, "text": &r.Text, "toolCalls": &calls, "refusal": &refusal, "stop": &r.Stop}); err != nil {
			return nil, err
		}
		if r.Step != nil && *r.Step < 0 {
			return nil, invalid(field+".step", "step counts assistant messages: 0 or more")
		}
		switch r.Stop {
		case "", provider.StopEnd, provider.StopMaxTokens:
		default:
			return nil, invalid(field+".stop", "stop is %q or %q", provider.StopEnd, provider.StopMaxTokens)
		}
		if len(refusal) > 0 && string(refusal) != "null" {
			r.Refusal = &ScriptRefusal{}
			if err := object(refusal, field+".refusal", fields{"category": &r.Refusal.Category, "explanation": &r.Refusal.Explanation}); err != nil {
				return nil, err
			}
		}
		r.ToolCalls = make([]ScriptToolCall, len(calls))
		for j, raw := range calls {
			cf := fmt.Sprintf("%s.toolCalls[%d]", field, j)
			c := &r.ToolCalls[j]
			if err := object(raw, cf, fields{"id": &c.ID, "name": &c.Name, "input": &c.Input}); err != nil {
				return nil, err
			}
			if c.Name == "" {
				return nil, invalid(cf+".name", "a tool call names its tool")
			}
			if in := bytes.TrimSpace(c.Input); len(in) == 0 || string(in) == "null" {
				c.Input = json.RawMessage("{}")
			} else if in[0] != '{' {
				return nil, invalid(cf+".input", "a tool call's input is a JSON object")
			}
		}
	}
	return out, nil
}

// fields maps an object's keys to where they decode.
type fields map[string]any

// object decodes raw, a JSON object, key by key into f, refusing keys f
// does not name; errors name the key's field.
func object(raw json.RawMessage, field string, f fields) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return invalid(field, "must be a JSON object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dst, ok := f[k]
		if !ok {
			allowed := make([]string, 0, len(f))
			for a := range f {
				allowed = append(allowed, a)
			}
			sort.Strings(allowed)
			return invalid(field+"."+k, "unknown key; allowed: %s", strings.Join(allowed, ", "))
		}
		if err := json.Unmarshal(m[k], dst); err != nil {
			return invalid(field+"."+k, "must be %s", describe(dst))
		}
	}
	return nil
}

// describe names the JSON type a pointer decodes.
func describe(dst any) string {
	t := reflect.TypeOf(dst).Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(json.RawMessage(nil)):
		return "JSON"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice:
		return "a list"
	}
	return "an object"
}

func invalid(field, format string, args ...any) error {
	return fault.New(fault.InvalidConfig, field, format, args...)
}

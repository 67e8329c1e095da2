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
	// MaxMaxTotalTokens bounds config.maxTotalTokens (0 is no limit).
	MaxMaxTotalTokens = 1 << 40
	DefaultAttempts   = 3
	MaxAttempts       = 10
	MaxTools          = 32
	MaxSystem         = 64 << 10 // bytes of system prompt
	MaxModel          = 200      // bytes of model name
	MaxScript         = 1000     // replies of a scripted provider
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
	// MCPServers are external MCP servers whose tools join config.tools
	// (issue 17).
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
	// Secrets are values other settings name (an MCP server's
	// authorization): write-only, queries show "(redacted)".
	Secrets map[string]string `json:"secrets,omitempty"`
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
// names the server offers. Errors: every problem found, each an
// *fault.Error InvalidConfig naming its field (see problems.err).
func parseConfig(raw json.RawMessage, configured func(string) bool) (*Config, error) {
	var p problems
	cfg := decodeConfig(&p, raw, configured)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeConfig decodes raw into a Config, adding every problem to p and
// carrying on past it (a setting that is not valid keeps its default).
func decodeConfig(p *problems, raw json.RawMessage, configured func(string) bool) *Config {
	cfg := &Config{}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		p.add("config.provider", "an agent needs a config with a provider (%s, %s or %s)", ProviderOpenAI, ProviderAnthropic, ProviderScripted)
		return cfg
	}
	var tools, script, servers []json.RawMessage
	var secrets json.RawMessage
	var maxSteps, maxTokens, attempts, maxTotal *int
	if !object(p, raw, "config", fields{
		"provider": &cfg.Provider, "model": &cfg.Model, "system": &cfg.System,
		"tools": &tools, "maxSteps": &maxSteps, "maxTokens": &maxTokens, "maxTotalTokens": &maxTotal,
		"attempts": &attempts, "programmatic": &cfg.Programmatic, "script": &script,
		"mcpServers": &servers, "secrets": &secrets,
	}) {
		return cfg
	}
	cfg.Secrets = parseSecrets(p, secrets)
	cfg.MCPServers = parseMCPServers(p, servers, cfg.Secrets)
	known := false // the provider is one this server offers
	switch {
	case p.has("config.provider"):
	case cfg.Provider == "":
		p.add("config.provider", "provider is required: %s, %s or %s", ProviderOpenAI, ProviderAnthropic, ProviderScripted)
	case cfg.Provider == ProviderScripted:
		known = true
	case cfg.Provider == ProviderOpenAI, cfg.Provider == ProviderAnthropic:
		if known = configured(cfg.Provider); !known {
			p.add("config.provider", "provider %q is not configured on this server", cfg.Provider)
		}
	default:
		p.add("config.provider", "unknown provider %q; use %s, %s or %s", cfg.Provider, ProviderOpenAI, ProviderAnthropic, ProviderScripted)
	}
	switch {
	case p.has("config.model"):
	case cfg.Model == "" && known && cfg.Provider != ProviderScripted:
		p.add("config.model", "model is required for provider %s", cfg.Provider)
	case len(cfg.Model) > MaxModel:
		p.add("config.model", "at most %d bytes", MaxModel)
	}
	if len(cfg.System) > MaxSystem {
		p.add("config.system", "the system prompt is at most %d bytes", MaxSystem)
	}
	cfg.MaxSteps = bounded(p, "config.maxSteps", maxSteps, DefaultMaxSteps, 1, MaxMaxSteps)
	cfg.MaxTokens = bounded(p, "config.maxTokens", maxTokens, DefaultMaxTokens, 1, MaxMaxTokens)
	cfg.MaxTotalTokens = bounded(p, "config.maxTotalTokens", maxTotal, 0, 0, MaxMaxTotalTokens)
	cfg.Attempts = bounded(p, "config.attempts", attempts, DefaultAttempts, 1, MaxAttempts)
	cfg.Tools = parseTools(p, tools)
	switch {
	case p.has("config.script"):
	case cfg.Provider == ProviderScripted && len(script) == 0:
		p.add("config.script", "provider scripted needs a script: a list of replies")
	case known && cfg.Provider != ProviderScripted && script != nil:
		p.add("config.script", "a script is for provider scripted only")
	}
	cfg.Script = parseScript(p, script)
	return cfg
}

// bounded is *v when it lies in [lo, hi], def when v is nil; otherwise
// the problem is added and def returned.
func bounded(p *problems, field string, v *int, def, lo, hi int) int {
	if v == nil {
		return def
	}
	if *v < lo || *v > hi {
		p.add(field, "must be from %d to %d (got %d)", lo, hi, *v)
		return def
	}
	return *v
}

func parseTools(p *problems, raws []json.RawMessage) []ToolRef {
	if len(raws) > MaxTools {
		p.add("config.tools", "at most %d tools (got %d)", MaxTools, len(raws))
	}
	refs := make([]ToolRef, len(raws))
	names := map[string]string{}   // explicit name → field
	actions := map[uuid.UUID]int{} // action → index of a reference without a name
	for i, raw := range raws {
		field := fmt.Sprintf("config.tools[%d]", i)
		ref := &refs[i]
		var action string
		if !object(p, raw, field, fields{"action": &action, "name": &ref.Name, "approval": &ref.Approval, "input": &ref.Input}) {
			continue
		}
		if id, err := uuid.Parse(action); err == nil {
			ref.Action = id
		} else if !p.has(field + ".action") {
			p.add(field+".action", "the tool action's id (a UUID) is required")
		}
		switch ref.Approval {
		case "", ApprovalNone:
			ref.Approval = ApprovalNone
		case ApprovalRequired:
		default:
			p.add(field+".approval", "approval is %s or %s (got %q)", ApprovalRequired, ApprovalNone, ref.Approval)
			ref.Approval = ApprovalNone
		}
		switch {
		case p.has(field + ".name"):
		case ref.Name != "":
			switch {
			case !namePattern.MatchString(ref.Name):
				p.add(field+".name", "a tool name is 1-64 letters, digits, _ or -")
			case builtin(ref.Name):
				p.add(field+".name", "%q is a built-in tool's name", ref.Name)
			case names[ref.Name] != "":
				p.add(field+".name", "%q is already the name of %s", ref.Name, names[ref.Name])
			default:
				names[ref.Name] = field
			}
		case ref.Action != uuid.Nil:
			if j, ok := actions[ref.Action]; ok {
				p.add(field+".name", "config.tools[%d] refers to the same tool: give one of them a name", j)
			} else {
				actions[ref.Action] = i
			}
		}
		in := bytes.TrimSpace(ref.Input)
		switch {
		case p.has(field+".input") || len(in) == 0 || string(in) == "null":
			ref.Input = nil
		case in[0] != '{':
			p.add(field+".input", "fixed input is a JSON object")
			ref.Input = nil
		default:
			if err := jsonvalue.Check(in, field+".input"); err != nil {
				p.add(field+".input", "%s", fault.As(err).Message)
				ref.Input = nil
			}
		}
	}
	return refs
}

func parseScript(p *problems, raws []json.RawMessage) []ScriptReply {
	if len(raws) > MaxScript {
		p.add("config.script", "at most %d replies (got %d)", MaxScript, len(raws))
	}
	out := make([]ScriptReply, len(raws))
	for i, raw := range raws {
		field := fmt.Sprintf("config.script[%d]", i)
		r := &out[i]
		var calls []json.RawMessage
		var refusal json.RawMessage
		if !object(p, raw, field, fields{"step": &r.Step, "when": &r.When, "text": &r.Text, "toolCalls": &calls, "refusal": &refusal, "stop": &r.Stop}) {
			continue
		}
		if r.Step != nil && *r.Step < 0 {
			p.add(field+".step", "step counts assistant messages: 0 or more")
		}
		switch r.Stop {
		case "", provider.StopEnd, provider.StopMaxTokens:
		default:
			p.add(field+".stop", "stop is %q or %q", provider.StopEnd, provider.StopMaxTokens)
		}
		if len(refusal) > 0 && string(refusal) != "null" && !p.has(field+".refusal") {
			r.Refusal = &ScriptRefusal{}
			object(p, refusal, field+".refusal", fields{"category": &r.Refusal.Category, "explanation": &r.Refusal.Explanation})
		}
		r.ToolCalls = make([]ScriptToolCall, len(calls))
		for j, raw := range calls {
			cf := fmt.Sprintf("%s.toolCalls[%d]", field, j)
			c := &r.ToolCalls[j]
			if !object(p, raw, cf, fields{"id": &c.ID, "name": &c.Name, "input": &c.Input}) {
				continue
			}
			if c.Name == "" && !p.has(cf+".name") {
				p.add(cf+".name", "a tool call names its tool")
			}
			in := bytes.TrimSpace(c.Input)
			switch {
			case p.has(cf+".input") || len(in) == 0 || string(in) == "null":
				c.Input = json.RawMessage("{}")
			case in[0] != '{':
				p.add(cf+".input", "a tool call's input is a JSON object")
			}
		}
	}
	return out
}

// fields maps an object's keys to where they decode.
type fields map[string]any

// object decodes raw, a JSON object, key by key into f. Each key f does
// not name and each value of the wrong type is a problem naming the key's
// field; the other keys still decode. It reports false when raw is not an
// object at all.
func object(p *problems, raw json.RawMessage, field string, f fields) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.add(field, "must be a JSON object")
		return false
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
			p.add(field+"."+k, "unknown key; allowed: %s", strings.Join(allowed, ", "))
			continue
		}
		if err := json.Unmarshal(m[k], dst); err != nil {
			p.add(field+"."+k, "must be %s", describe(dst))
			// A partly decoded value must not pass for a valid one.
			reflect.ValueOf(dst).Elem().SetZero()
		}
	}
	return true
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

// problems collects a config's problems so that all of them are reported
// at once, each an *fault.Error InvalidConfig naming its field.
type problems struct {
	errs []error
}

func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, invalid(field, format, args...))
}

// has reports whether a problem names field already (a later check of the
// same setting would only repeat it).
func (p *problems) has(field string) bool {
	for _, err := range p.errs {
		if fe := fault.As(err); fe != nil && fe.Field == field {
			return true
		}
	}
	return false
}

// err is nil without problems, the problem itself when there is one, and
// otherwise a ConfigErrors listing them in the order found.
func (p *problems) err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	}
	return ConfigErrors(append([]error(nil), p.errs...))
}

// ConfigErrors is every problem of an invalid config, each an
// *fault.Error InvalidConfig naming its field. It unwraps to the list
// (Unwrap() []error, as errors.Join does), so action.Errors splits it and
// createAction reports one GraphQL error per problem (A3); fault.As finds
// the first.
type ConfigErrors []error

func (e ConfigErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e ConfigErrors) Unwrap() []error { return e }

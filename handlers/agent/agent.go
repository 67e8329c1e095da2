// Package agent is the "agent" handler kind: a model that works through a
// session's turn by calling tools and ends it by reporting an outcome
// (SPEC T5, E2, P1-P5, H1-H3).
//
// # Config
//
// An agent action's config is a JSON object (unknown keys are refused):
//
//	provider        "openai", "anthropic" (each only when the server has it
//	                configured) or "scripted" (always); required
//	model           the provider's model name, at most 200 bytes; required
//	                unless scripted
//	system          system prompt, at most 64 KiB
//	tools           at most 32 references to tool actions:
//	                {action: UUID, name?: the tool's name as the model sees
//	                it (^[a-zA-Z0-9_-]{1,64}$; default the tool's own name),
//	                approval?: "REQUIRED" or "NONE" (the default, also when
//	                given as ""), input?: fixed input, an object whose
//	                top-level keys replace the model's}
//	maxSteps        model calls per turn, 1-100, default 16
//	maxTokens       output tokens per model call, 1-200000, default 1024
//	maxTotalTokens  input plus output tokens per turn, 0-2^40; once used up
//	                the turn makes no more model calls and is unfinished;
//	                0 (the default) for no limit
//	attempts        attempts per turn for errors and unfinished turns, 1-10,
//	                default 3 (T7; the handler's turns.AttemptsPolicy)
//	programmatic    offer the run_code tool (P4)
//	script          the scripted provider's replies (provider "scripted"
//	                only, and required there; at most 1000; see Scripted):
//	                [{step?: 0 or more, when?, text?, toolCalls?: [{id?,
//	                name, input?: object}], refusal?: {category?,
//	                explanation?}, stop?: "end" (the default) or
//	                "max_tokens" (the reply's stop reason: the model ran out
//	                of output tokens)}]
//
// Validation (Kind's New, run by createAction and updateAction, A3, and
// again for every turn)
// reports every problem at once, not just the first: each is an
// *fault.Error InvalidConfig naming its field (config.maxSteps,
// config.tools[0].approval, source), several together as a ConfigErrors,
// which createAction presents as one GraphQL error per problem. When the
// server has a ToolDirectory, each of config.tools is also resolved: an
// action that does not exist, is not a tool or is not ACTIVE is a problem
// of config.tools[i].action carrying the directory's reason (such as "the
// tool action ... is DISABLED"), and model-facing names that clash once
// the tools' own names are known (two tools both named lookup, a tool
// named report_outcome or with a name no model accepts) are problems of
// config.tools[i].name. A transient directory error is passed over at
// create; the turn resolves the tools again.
//
// # A turn
//
// The model sees the session (id, input, state, turn number, whether the
// turn is final and when the session ends) and the turn's inputs as one
// user message: the inputs are listed one per line, oldest first (a
// retry's replayed inputs first, H3), under a count of the lines listed;
// the answers to a held turn (RETRY COMMANDs) are not listed but follow
// as the responder's notes. It has the tools of config.tools (resolved
// through the ToolDirectory at each turn, so the model sees a tool's
// current description and schema; a tool archived, disabled or renamed
// into a clash since create fails the turn for good, naming the
// reference, as in "config.tools[0].action: the tool action ... is
// DISABLED") and two built-ins: report_outcome {status, reason, state},
// whose status enum offers what the turn may report (E2: only OPEN before
// a session's end, only COMPLETED in its final turn, any of OPEN,
// COMPLETED and FAILED without an end), and run_code when programmatic.
// The turn ends when the model calls report_outcome with a valid outcome;
// a turn that ends without one (after one reminder), or runs out of
// maxSteps or maxTotalTokens, is unfinished (H1), and a refusal ends it
// as refused (H1).
//
// A tool call runs at once, with the reference's fixed input laid over
// the model's, inside the turn's transaction (turns.Env.CallTool). A
// tool's error (a *fault.Error) goes back to the model as an error
// result; any other error fails the attempt. Results are cut at 32 KiB
// (MaxResult). The calls of one model message are taken as parallel
// calls: plain ones run in order while gated ones wait, and the model
// gets all their results, in call order, together. report_outcome ends
// the turn (calls after it in the message are ignored), except while
// calls of the same message wait for approval: then it gets an error
// result and the model reports once it has their results.
//
// # Approvals (P1-P5)
//
// A call of a reference with approval REQUIRED does not run: the turn ends
// WAITING with the call among Outcome.Approvals and the conversation in
// Outcome.Resume. The turn that takes the responses (COMMAND inputs of
// kind APPROVAL) continues from there: an approved call runs (with the
// response's replacement input, if any, and the fixed input over it), a
// denied one is reported to the model as denied with the reason. While
// calls of the paused message are unanswered the turn ends WAITING again,
// listing them with their first InterruptID and ExecutionID (P2). In a
// final turn a gated call cannot wait: the model gets an error result, and
// requests left unanswered are reported as not answered. A retry of a held
// approval-resumed turn (H3) runs the approved calls again and shows the
// responder's note with their results. Resume is this package's own JSON
// (the conversation, the paused message's known results and its waiting
// calls); other inputs a resumed turn takes while it waits again are kept
// there and shown to the model with the results.
//
// # Programmatic tool calling (P4)
//
// With programmatic, the model also has run_code, whose input is {code:
// string}: a Starlark snippet run by starlarkrt.RunSnippet, with
// call_tool(name, input) bound to the agent's tools that need no approval
// (fixed input applied; each call is recorded as a tool_call with via
// run_code) and catch(fn, ...) for the errors it raises: a gated tool's
// ("call it directly"), an unknown name's and a tool's own. The snippet
// answers by assigning its global `result`: that value, as JSON (null
// when never assigned), is run_code's tool result; a snippet's error is
// an error result.
//
// # Transcript
//
// Entries, in order: input (the user message presenting the turn), then
// per model call model_message, tool_call, tool_result, approval_request,
// approval_response, note, refusal and outcome as they happen.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/egress"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// KindName is the kind actions name.
const KindName = "agent"

// ToolInfo describes a tool action's current version.
type ToolInfo struct {
	ActionID    uuid.UUID
	Version     int
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema; empty for {"type":"object"}.
	InputSchema json.RawMessage
	// Approval: the tool's owner requires approval for every call; the
	// reference is gated whatever it says (issue 11).
	Approval bool
}

// ToolDirectory resolves tool references (the server implements it over
// the action store). Errors: *fault.Error NotFound, NotATool or
// ActionInactive for a reference that cannot be called; any other error
// is taken as transient.
type ToolDirectory interface {
	Tool(ctx context.Context, actionID uuid.UUID) (*ToolInfo, error)
}

// Options configure the kind.
type Options struct {
	// Providers are the model providers by name ("openai", "anthropic"), as
	// the server configured them. "scripted" is always available.
	Providers map[string]provider.Provider
	// Tools resolves config.tools; nil when the server offers none.
	Tools ToolDirectory
	// Now is the clock run_code's time.now() falls back to when a turn has
	// no Env; optional (time.Now).
	Now func() time.Time
	// Egress is where config.mcpServers may be (HTTP_ALLOW); nil allows
	// public addresses only.
	Egress *egress.Egress
}

// resolveTimeout bounds the directory look-ups of Kind's New, which has
// no context of its own.
const resolveTimeout = 5 * time.Second

// Kind returns the agent kind for a turns.Registry; the kind serves no
// tool calls. New validates the config (and refuses source), reporting
// every problem at once (a ConfigErrors when there are several). When
// Options.Tools is set it also resolves each of config.tools: a reference
// the directory refuses (NotFound, NotATool, ActionInactive) is a problem
// of config.tools[i].action, and a model-facing name that clashes once
// the tools' own names are known one of config.tools[i].name; a transient
// look-up error is passed over (the turn resolves the tools again). The
// executor calls New for every turn too, so a tool that became inactive
// after create fails the turn with the same message.
func Kind(opts Options) turns.Kind {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return turns.Kind{Name: KindName, Model: configModel, New: func(spec turns.Spec) (turns.Handler, error) {
		var p problems
		if spec.Source != nil {
			p.errs = append(p.errs, fault.New(fault.InvalidConfig, "source", "an agent runs no source"))
		}
		cfg := decodeConfig(&p, json.RawMessage(spec.Config), func(name string) bool { return opts.Providers[name] != nil })
		if opts.Tools != nil {
			ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
			checkTools(ctx, &p, opts.Tools, cfg.Tools)
			cancel()
		}
		checkEgress(&p, opts.Egress, cfg.MCPServers)
		if err := p.err(); err != nil {
			return nil, err
		}
		prov := opts.Providers[cfg.Provider]
		if cfg.Provider == ProviderScripted {
			prov = NewScripted(cfg.Script)
		}
		return &handler{cfg: cfg, opts: opts, provider: prov}, nil
	}, ToolRefs: toolRefs, Secrets: []string{"secrets"}}
}

// toolRefs lists the tool actions of config.tools (issue 11: a version may
// call them without declaring them), leniently: from a config with problems
// it lists the references it can read.
func toolRefs(config jsonvalue.Value) []uuid.UUID {
	var p problems
	cfg := decodeConfig(&p, json.RawMessage(config), func(string) bool { return true })
	out := make([]uuid.UUID, len(cfg.Tools)) // one per reference, uuid.Nil where unreadable
	for i, ref := range cfg.Tools {
		out[i] = ref.Action
	}
	return out
}

// checkTools resolves refs through dir and adds what the directory
// refuses and the model-facing names that clash. References whose action
// or name already has a problem are left out; so are look-ups that fail
// transiently.
func checkTools(ctx context.Context, p *problems, dir ToolDirectory, refs []ToolRef) {
	type taken struct {
		index    int
		explicit bool // the name is the reference's own, not its tool's
	}
	type lookup struct {
		info *ToolInfo // nil after a transient error
		err  error     // the directory's refusal
	}
	names := map[string]taken{}
	looked := map[uuid.UUID]lookup{} // a reference may repeat an action
	for i, ref := range refs {
		field := fmt.Sprintf("config.tools[%d]", i)
		if ref.Action == uuid.Nil || p.has(field+".action") || p.has(field) {
			continue
		}
		l, ok := looked[ref.Action]
		if !ok {
			info, err := dir.Tool(ctx, ref.Action)
			switch {
			case fault.As(err) != nil:
				l.err = err
			case err == nil && info == nil:
				l.err = fault.New(fault.NotFound, "", "no tool action %s", ref.Action)
			case err == nil:
				l.info = info
			}
			looked[ref.Action] = l
		}
		if l.err != nil {
			msg := fault.As(l.err).Message
			if msg == "" {
				msg = fmt.Sprintf("the tool action %s cannot be used (%s)", ref.Action, fault.CodeOf(l.err))
			}
			p.errs = append(p.errs, &fault.Error{Code: fault.InvalidConfig, Field: field + ".action", Message: msg, Err: l.err})
			continue
		}
		info := l.info
		if p.has(field + ".name") {
			continue
		}
		name := ref.Name
		if name == "" {
			if info == nil {
				continue // the turn finds out
			}
			name = info.Name
			switch {
			case !namePattern.MatchString(name):
				p.add(field+".name", "the tool's name %q is not one a model can use (1-64 letters, digits, _ or -): set a name", name)
				continue
			case builtin(name):
				p.add(field+".name", "the tool's name %q is a built-in tool's: set a name", name)
				continue
			}
		}
		if t, ok := names[name]; ok {
			subject, other := fmt.Sprintf("%q", name), fmt.Sprintf("config.tools[%d]", t.index)
			if ref.Name == "" {
				subject = "the tool's name " + subject
			}
			if !t.explicit {
				other += "'s tool"
			}
			p.add(field+".name", "%s is already the name of %s; the model needs distinct names: set a different name", subject, other)
			continue
		}
		names[name] = taken{index: i, explicit: ref.Name != ""}
	}
}

// handler runs turns of one agent action version.
type handler struct {
	cfg      *Config
	opts     Options
	provider provider.Provider
}

var _ turns.AttemptsPolicy = (*handler)(nil)

// MaxAttempts is config.attempts (T7).
func (h *handler) MaxAttempts() int { return h.cfg.Attempts }

// Run runs one turn (see the package doc).
func (h *handler) Run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	var rec recorder = discard{}
	if req.Transcript != nil {
		rec = req.Transcript
	}
	return h.run(ctx, req, rec)
}

func (h *handler) run(ctx context.Context, req *turns.Request, rec recorder) (*turns.Outcome, error) {
	l, err := h.newLoop(ctx, req, rec)
	if err != nil {
		return nil, err
	}
	defer l.closeMCP()
	return l.run(ctx)
}

// configModel names the provider and model a config calls, read leniently
// (turns.Kind.Model, G8).
func configModel(config jsonvalue.Value) (provider, model string, ok bool) {
	var c struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if json.Unmarshal(config, &c) != nil || c.Provider == "" {
		return "", "", false
	}
	return c.Provider, c.Model, true
}

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// DefaultAnthropicBaseURL is the API root NewAnthropic uses when
// AnthropicConfig.BaseURL is empty.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// defaultAnthropicMaxTokens is max_tokens when Request.MaxTokens is zero;
// the Messages API requires the field.
const defaultAnthropicMaxTokens = 1024

// AnthropicConfig configures NewAnthropic.
type AnthropicConfig struct {
	// BaseURL is the API root that "v1/messages" is appended to (so without
	// /v1). Empty means DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent as the "x-api-key" header; empty sends none.
	APIKey string
	// Timeout bounds one HTTP attempt; zero means 10 minutes. The context
	// of Complete bounds the whole call.
	Timeout time.Duration
	// MaxRetries is how often the SDK itself retries a retryable failure
	// (429, 5xx, 529, transport). Zero, the default, means never: the turn
	// executor retries turns.
	MaxRetries int
}

type anthropicProvider struct {
	messages anthropic.MessageService
	err      error // a configuration error every call returns
}

// NewAnthropic returns a Provider that speaks the Anthropic Messages API
// (POST {BaseURL}/v1/messages, not streamed). It ignores the SDK's
// ANTHROPIC_* environment variables and profiles: only cfg configures it.
// The key goes in x-api-key, the header the Messages API documents and
// compatible servers read (the SDK's own WithAPIKey now sends it as a
// bearer token instead). An invalid cfg makes every call fail with a
// Permanent error.
//
// Mapping: Request.System is the system prompt; a user message carries
// its ToolResults as tool_result blocks (tool_use_id, is_error, in call
// order) before its Text; an assistant message carries its Text and then
// its ToolCalls as tool_use blocks; Tools are custom tools whose
// input_schema is the InputSchema as given ({"type":"object"} when empty).
// max_tokens is Request.MaxTokens, or 1024 when zero. stop_reason maps
// end_turn and stop_sequence to StopEnd, tool_use to StopToolCalls,
// max_tokens and model_context_window_exceeded to StopMaxTokens, and
// refusal to StopRefusal with Refusal.Category and Refusal.Explanation
// taken from stop_details (SDK field Message.StopDetails; both are empty
// when the API sends null), which a held turn reports (SPEC H2). Any other stop_reason is StopToolCalls when the reply
// carries tool calls, else StopEnd. Usage.InputTokens counts input_tokens
// plus cache creation and cache read input tokens.
//
// Errors: HTTP 400, 401, 403, 404, 413 and 422 are Permanent; 429, 529,
// other statuses and transport failures are retryable.
func NewAnthropic(cfg AnthropicConfig) Provider {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	p := &anthropicProvider{}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.err = Permanent(fmt.Errorf("provider: anthropic: base URL %q is not an http(s) URL", base))
		return p
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(&http.Client{}),
		option.WithBaseURL(base),
		option.WithMaxRetries(retries(cfg.MaxRetries)),
		// An explicit timeout also keeps the SDK from refusing large
		// max_tokens without streaming.
		option.WithRequestTimeout(timeout(cfg.Timeout)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithHeader("X-Api-Key", cfg.APIKey))
	}
	p.messages = anthropic.NewClient(opts...).Messages
	return p
}

// Complete implements Provider.
func (p *anthropicProvider) Complete(ctx context.Context, req *Request) (*Reply, error) {
	if p.err != nil {
		return nil, p.err
	}
	params, err := anthropicParams(req)
	if err != nil {
		return nil, Permanent(fmt.Errorf("provider: anthropic: %w", err))
	}
	res, err := p.messages.New(ctx, params)
	if err != nil {
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return nil, classifyStatus(&apiError{provider: "anthropic", status: apiErr.StatusCode, typ: string(apiErr.Type()), message: apiErr.Message})
		}
		return nil, fmt.Errorf("provider: anthropic: %w", err)
	}
	return anthropicReply(res), nil
}

func anthropicParams(req *Request) (anthropic.MessageNewParams, error) {
	if req.Model == "" {
		return anthropic.MessageNewParams{}, errors.New("model is empty")
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
	}
	if params.MaxTokens <= 0 {
		params.MaxTokens = defaultAnthropicMaxTokens
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case RoleUser:
			for _, r := range m.ToolResults {
				b := &anthropic.ToolResultBlockParam{ToolUseID: r.CallID}
				if r.IsError {
					b.IsError = anthropic.Bool(true)
				}
				if r.Content != "" { // the API refuses empty text blocks
					b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: r.Content}}}
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: b})
			}
			if m.Text != "" || len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		case RoleAssistant:
			if m.Text != "" || len(m.ToolCalls) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				input, ok := jsonObject(string(c.Input))
				if !ok {
					return params, fmt.Errorf("message %d: tool call %q: input is not a JSON object", i, c.ID)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, input, c.Name))
			}
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 {
			schema = []byte(`{"type":"object"}`)
		}
		if schema[0] != '{' || !json.Valid(schema) {
			return params, fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
		}
		tool := &anthropic.ToolParam{
			Name: t.Name,
			// Sent verbatim: the SDK's schema type knows only a few keywords.
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tool})
	}
	return params, nil
}

func anthropicReply(res *anthropic.Message) *Reply {
	reply := &Reply{
		Usage: Usage{
			InputTokens:  int(res.Usage.InputTokens + res.Usage.CacheCreationInputTokens + res.Usage.CacheReadInputTokens),
			OutputTokens: int(res.Usage.OutputTokens),
		},
	}
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			reply.Text += b.Text
		case "tool_use":
			reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Input: objectOrEmpty(b.Input)})
		}
	}
	switch res.StopReason {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		reply.StopReason = StopEnd
	case anthropic.StopReasonToolUse:
		reply.StopReason = StopToolCalls
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		reply.StopReason = StopMaxTokens
	case anthropic.StopReasonRefusal:
		reply.StopReason = StopRefusal
		reply.Refusal = &Refusal{
			Category:    string(res.StopDetails.Category),
			Explanation: res.StopDetails.Explanation,
		}
	default: // pause_turn (server tools only) or a reason newer than this code
		reply.StopReason = StopEnd
		if len(reply.ToolCalls) > 0 {
			reply.StopReason = StopToolCalls
		}
	}
	return reply
}

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// DefaultOpenAIBaseURL is the API root NewOpenAI uses when
// OpenAIConfig.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// Values of OpenAIConfig.MaxTokensParam.
const (
	maxCompletionTokens = "max_completion_tokens"
	maxTokens           = "max_tokens"
)

// OpenAIConfig configures NewOpenAI.
type OpenAIConfig struct {
	// BaseURL is the API root that "chat/completions" is appended to, such
	// as https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama).
	// Empty means DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no
	// Authorization header (local servers).
	APIKey string
	// Timeout bounds one HTTP attempt; zero means 10 minutes. The context
	// of Complete bounds the whole call.
	Timeout time.Duration
	// MaxRetries is how often the SDK itself retries a retryable failure
	// (429, 5xx, transport). Zero, the default, means never: the turn
	// executor retries turns.
	MaxRetries int
	// MaxTokensParam names the request field that carries
	// Request.MaxTokens: "max_completion_tokens" or "max_tokens". Empty
	// picks by BaseURL: max_completion_tokens for api.openai.com, whose
	// reasoning models reject max_tokens, and max_tokens for any other
	// server, since compatible servers such as Ollama and LM Studio read only
	// max_tokens and silently ignore max_completion_tokens (vLLM reads both).
	MaxTokensParam string
}

type openAIProvider struct {
	chat                openai.ChatCompletionService
	maxCompletionTokens bool
	err                 error // a configuration error every call returns
}

// NewOpenAI returns a Provider that speaks the OpenAI Chat Completions API
// (POST {BaseURL}/chat/completions), which OpenAI and OpenAI-compatible
// servers (vLLM, Ollama, LM Studio, llama.cpp) serve. It ignores the SDK's
// OPENAI_* environment variables: only cfg configures it. An invalid cfg
// makes every call fail with a Permanent error.
//
// Mapping: Request.System is a "system" message; a user message's
// ToolResults become "tool" messages (tool_call_id, in call order) before
// its Text, and a failed result's content is prefixed "error: " (the API
// has no error flag); an assistant message's ToolCalls are function
// tool_calls; Tools are function tools whose parameters are the
// InputSchema. finish_reason maps stop to StopEnd, tool_calls to
// StopToolCalls, length to StopMaxTokens and content_filter to StopRefusal
// with Refusal.Category "content_filter"; a message.refusal text is
// StopRefusal with Refusal.Explanation (reported by a held turn, SPEC H2). Some compatible servers answer
// tool calls with finish_reason "stop": a reply that carries tool calls and
// stops otherwise than by length or refusal is StopToolCalls. Usage is
// prompt_tokens and completion_tokens.
//
// Errors: HTTP 400, 401, 403, 404, 413 and 422 are Permanent; 429, other
// statuses and transport failures are retryable. A reply whose tool call
// arguments are not a JSON object is a retryable error, unless the reply
// was cut by the token limit, when the cut call is dropped.
func NewOpenAI(cfg OpenAIConfig) Provider {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	p := &openAIProvider{}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.err = Permanent(fmt.Errorf("provider: openai: base URL %q is not an http(s) URL", base))
		return p
	}
	switch cfg.MaxTokensParam {
	case "":
		p.maxCompletionTokens = u.Hostname() == "api.openai.com"
	case maxCompletionTokens:
		p.maxCompletionTokens = true
	case maxTokens:
	default:
		p.err = Permanent(fmt.Errorf("provider: openai: MaxTokensParam %q is neither %q nor %q",
			cfg.MaxTokensParam, maxCompletionTokens, maxTokens))
		return p
	}
	// The chat service alone, unlike openai.NewClient, reads no environment.
	p.chat = openai.NewChatCompletionService(
		option.WithHTTPClient(&http.Client{}),
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(retries(cfg.MaxRetries)),
		option.WithRequestTimeout(timeout(cfg.Timeout)),
	)
	return p
}

// Complete implements Provider.
func (p *openAIProvider) Complete(ctx context.Context, req *Request) (*Reply, error) {
	if p.err != nil {
		return nil, p.err
	}
	params, err := p.params(req)
	if err != nil {
		return nil, Permanent(fmt.Errorf("provider: openai: %w", err))
	}
	res, err := p.chat.New(ctx, params)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			typ := apiErr.Type
			if apiErr.Code != "" && apiErr.Code != typ {
				typ += "/" + apiErr.Code
			}
			return nil, classifyStatus(&apiError{provider: "openai", status: apiErr.StatusCode, typ: typ, message: apiErr.Message})
		}
		return nil, fmt.Errorf("provider: openai: %w", err)
	}
	return openAIReply(res)
}

func (p *openAIProvider) params(req *Request) (openai.ChatCompletionNewParams, error) {
	if req.Model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("model is empty")
	}
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			for _, r := range m.ToolResults {
				content := r.Content
				if r.IsError {
					content = "error: " + content
				}
				params.Messages = append(params.Messages, openai.ToolMessage(content, r.CallID))
			}
			if m.Text != "" || len(m.ToolResults) == 0 {
				params.Messages = append(params.Messages, openai.UserMessage(m.Text))
			}
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Name,
							Arguments: string(objectOrEmpty(c.Input)),
						},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if len(t.InputSchema) > 0 {
			// Keywords stay raw JSON, so the schema goes out as given
			// (decoded numbers would lose precision, and the SDK encodes
			// json.Number as a string).
			var schema map[string]json.RawMessage
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
				return params, fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
			}
			fn.Parameters = make(shared.FunctionParameters, len(schema))
			for k, v := range schema {
				fn.Parameters[k] = v
			}
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if req.MaxTokens > 0 {
		if p.maxCompletionTokens {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	return params, nil
}

func openAIReply(res *openai.ChatCompletion) (*Reply, error) {
	if len(res.Choices) == 0 {
		return nil, errors.New("provider: openai: the reply has no choices")
	}
	choice := res.Choices[0]
	msg := choice.Message
	reply := &Reply{
		Text: msg.Content,
		Usage: Usage{
			InputTokens:  int(res.Usage.PromptTokens),
			OutputTokens: int(res.Usage.CompletionTokens),
		},
	}
	switch choice.FinishReason {
	case "length":
		reply.StopReason = StopMaxTokens
	case "content_filter":
		reply.StopReason = StopRefusal
		reply.Refusal = &Refusal{Category: "content_filter"}
	case "tool_calls", "function_call":
		reply.StopReason = StopToolCalls
	default: // "stop", or what a compatible server makes of it
		reply.StopReason = StopEnd
	}
	if msg.Refusal != "" {
		reply.StopReason = StopRefusal
		if reply.Refusal == nil {
			reply.Refusal = &Refusal{}
		}
		reply.Refusal.Explanation = msg.Refusal
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never offered
		}
		input, ok := jsonObject(tc.Function.Arguments)
		if !ok {
			if reply.StopReason == StopMaxTokens {
				continue // cut off mid-arguments
			}
			return nil, fmt.Errorf("provider: openai: tool call %q (%s): arguments are not a JSON object", tc.ID, tc.Function.Name)
		}
		reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	if reply.StopReason == StopEnd && len(reply.ToolCalls) > 0 {
		reply.StopReason = StopToolCalls
	}
	return reply, nil
}

// jsonObject returns s as a JSON object; blank means {}.
func jsonObject(s string) (json.RawMessage, bool) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return json.RawMessage("{}"), true
	}
	if b[0] != '{' || !json.Valid(b) {
		return nil, false
	}
	return json.RawMessage(b), true
}

// objectOrEmpty returns in, or {} when it is empty.
func objectOrEmpty(in json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage("{}")
	}
	return in
}

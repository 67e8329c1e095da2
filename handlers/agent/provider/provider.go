// Package provider puts model providers behind one small interface for the
// agent handler kind: OpenAI-compatible chat completions, Anthropic
// messages and a deterministic scripted provider. A provider turns a
// provider-neutral conversation into one model call and the reply back.
package provider

import (
	"context"
	"encoding/json"
)

// Provider makes one model call.
type Provider interface {
	// Complete sends the conversation and returns the model's reply. A
	// refusal is a reply (Reply.Refusal), not an error. Errors are transport
	// or API failures; they are retryable unless marked with Permanent.
	Complete(ctx context.Context, req *Request) (*Reply, error)
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int // most output tokens of this call
}

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of the conversation. A user message carries Text
// and/or ToolResults (the results of the previous assistant message's tool
// calls, in call order); an assistant message carries Text and/or ToolCalls.
type Message struct {
	Role        string       `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ToolCall is a call the model asks for.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"` // a JSON object
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"` // JSON text or plain text
	IsError bool   `json:"is_error,omitempty"`
}

// ToolSpec offers a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"` // a JSON Schema object
}

// Stop reasons, normalised across providers.
const (
	StopEnd       = "end"        // the model finished its message
	StopToolCalls = "tool_calls" // the model asks for tool calls
	StopMaxTokens = "max_tokens" // cut by the output token limit
	StopRefusal   = "refusal"    // the model declined
)

// Reply is the model's answer to one call.
type Reply struct {
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	StopReason string     `json:"stop_reason"`
	// Refusal is set when the model declined to continue (StopRefusal).
	Refusal *Refusal `json:"refusal,omitempty"`
	Usage   Usage    `json:"usage"`
}

// Refusal is what a provider reports about a refusal, when it says.
type Refusal struct {
	Category    string `json:"category,omitempty"`
	Explanation string `json:"explanation,omitempty"`
}

// Usage counts tokens of one call.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// permanentError marks an error not worth retrying (bad request, auth).
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not retryable.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	for err != nil {
		if _, ok := err.(permanentError); ok {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

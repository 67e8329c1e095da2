package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
)

// Scripted is a deterministic provider.Provider that replies from a
// script (config.script of provider "scripted"): for each model call it
// takes the first reply whose step (if set) equals the number of assistant
// messages already in the conversation and whose when (if set) occurs in
// the conversation's user text and tool results, joined. When none
// matches it replies with StopEnd, no text and no tool calls. The same
// conversation always gets the same reply. Usage is estimated at one
// token per 4 bytes (of the system prompt and messages for input, of the
// reply's text and tool inputs for output).
type Scripted struct {
	replies []ScriptReply
}

// NewScripted returns a scripted provider over replies.
func NewScripted(replies []ScriptReply) *Scripted { return &Scripted{replies: replies} }

// Complete picks the reply for req's conversation; it fails only when ctx
// is done.
func (s *Scripted) Complete(ctx context.Context, req *provider.Request) (*provider.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	step := 0
	var seen strings.Builder
	inBytes := len(req.System)
	for _, m := range req.Messages {
		inBytes += len(m.Text)
		if m.Role == provider.RoleAssistant {
			step++
			for _, c := range m.ToolCalls {
				inBytes += len(c.Input)
			}
			continue
		}
		seen.WriteString(m.Text)
		seen.WriteByte('\n')
		for _, r := range m.ToolResults {
			inBytes += len(r.Content)
			seen.WriteString(r.Content)
			seen.WriteByte('\n')
		}
	}
	reply := &provider.Reply{StopReason: provider.StopEnd}
	for _, r := range s.replies {
		if r.Step != nil && *r.Step != step {
			continue
		}
		if r.When != "" && !strings.Contains(seen.String(), r.When) {
			continue
		}
		reply = scriptedReply(r, step)
		break
	}
	out := len(reply.Text)
	for _, c := range reply.ToolCalls {
		out += len(c.Input)
	}
	reply.Usage = provider.Usage{InputTokens: tokens(inBytes), OutputTokens: tokens(out)}
	return reply, nil
}

func scriptedReply(r ScriptReply, step int) *provider.Reply {
	reply := &provider.Reply{Text: r.Text, StopReason: provider.StopEnd}
	for i, c := range r.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", step, i)
		}
		input := c.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		reply.ToolCalls = append(reply.ToolCalls, provider.ToolCall{ID: id, Name: c.Name, Input: input})
	}
	switch {
	case r.Refusal != nil:
		reply.StopReason = provider.StopRefusal
		reply.Refusal = &provider.Refusal{Category: r.Refusal.Category, Explanation: r.Refusal.Explanation}
	case r.Stop == provider.StopMaxTokens:
		reply.StopReason = provider.StopMaxTokens
	case len(reply.ToolCalls) > 0:
		reply.StopReason = provider.StopToolCalls
	}
	return reply
}

func tokens(bytes int) int { return (bytes + 3) / 4 }

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/egress"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/mcp/remote"
	"github.com/actionsledger/actionsledger/turns"
)

// Bounds of config.mcpServers and config.secrets (issue 17).
const (
	MaxMCPServers        = 8
	MaxMCPTools          = 64 // tools one server may list
	DefaultMCPTimeout    = 30 * time.Second
	MaxMCPTimeout        = 120 * time.Second
	MaxSecrets           = 16
	MaxSecretLen         = 4096 // bytes
	maxMCPURL            = 2048
	mcpToolNameSeparator = "__"
)

// MCPServer is one entry of config.mcpServers: an external MCP server
// whose tools join the agent's (issue 17).
type MCPServer struct {
	// Name prefixes its tools' names as the model sees them:
	// <name>__<tool>.
	Name string `json:"name"`
	// URL is the server's streamable HTTP endpoint (http or https), under
	// the server's egress rules (HTTP_ALLOW).
	URL string `json:"url"`
	// Authorization names a key of config.secrets whose value is sent as
	// the Authorization header (e.g. "Bearer ...").
	Authorization string `json:"authorization,omitempty"`
	// Approval REQUIRED gates every call of its tools (P1); NONE (default).
	Approval string `json:"approval"`
	// Tools, when set, are the only tools of the server the model gets.
	Tools []string `json:"tools,omitempty"`
	// TimeoutMS bounds connecting and listing, and each call.
	TimeoutMS int `json:"timeoutMs,omitempty"`
}

// Gated reports whether the server's tools need approval.
func (s MCPServer) Gated() bool { return s.Approval == ApprovalRequired }

func (s MCPServer) timeout() time.Duration {
	if s.TimeoutMS <= 0 {
		return DefaultMCPTimeout
	}
	return time.Duration(s.TimeoutMS) * time.Millisecond
}

var serverNamePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,23}$`)

var secretNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)

// parseSecrets reads config.secrets: names to values, write-only (the
// kind's Secrets: queries show "(redacted)", an update sending that keeps
// the stored ones).
func parseSecrets(p *problems, raw json.RawMessage) map[string]string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var redacted string
	if json.Unmarshal(raw, &redacted) == nil && redacted == turns.Redacted {
		p.add("config.secrets", "%s stands for the secrets a stored version has, and this action has none: send the secrets themselves", turns.Redacted)
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.add("config.secrets", "secrets is an object of names to strings")
		return nil
	}
	if len(m) > MaxSecrets {
		p.add("config.secrets", "at most %d secrets", MaxSecrets)
	}
	for _, k := range sortedKeys(m) {
		switch v := m[k]; {
		case !secretNamePattern.MatchString(k):
			p.add("config.secrets."+k, "a secret's name is 1-64 letters, digits, _ or -, starting with a letter or _")
		case v == "" || len(v) > MaxSecretLen:
			p.add("config.secrets."+k, "a secret is 1-%d bytes", MaxSecretLen)
		case strings.ContainsAny(v, "\r\n\x00"):
			p.add("config.secrets."+k, "a secret is sent as a header value: no line breaks or NUL")
		}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseMCPServers reads config.mcpServers.
func parseMCPServers(p *problems, raws []json.RawMessage, secrets map[string]string) []MCPServer {
	if len(raws) > MaxMCPServers {
		p.add("config.mcpServers", "at most %d MCP servers (got %d)", MaxMCPServers, len(raws))
	}
	out := make([]MCPServer, len(raws))
	names := map[string]int{}
	for i, raw := range raws {
		field := fmt.Sprintf("config.mcpServers[%d]", i)
		s := &out[i]
		var timeout *int
		if !object(p, raw, field, fields{"name": &s.Name, "url": &s.URL, "authorization": &s.Authorization,
			"approval": &s.Approval, "tools": &s.Tools, "timeoutMs": &timeout}) {
			continue
		}
		switch j, seen := names[s.Name]; {
		case p.has(field + ".name"):
		case !serverNamePattern.MatchString(s.Name):
			p.add(field+".name", "a server's name is 1-24 letters, digits, _ or -, starting with a letter (it prefixes its tools' names)")
		case seen:
			p.add(field+".name", "%q is already the name of config.mcpServers[%d]", s.Name, j)
		default:
			names[s.Name] = i
		}
		u, err := url.Parse(s.URL)
		switch {
		case p.has(field + ".url"):
		case s.URL == "":
			p.add(field+".url", "url is required: the server's streamable HTTP endpoint")
		case len(s.URL) > maxMCPURL:
			p.add(field+".url", "url is at most %d bytes", maxMCPURL)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add(field+".url", "url must be an absolute http or https URL")
		}
		switch {
		case p.has(field+".authorization") || s.Authorization == "":
		case secrets == nil || secrets[s.Authorization] == "":
			p.add(field+".authorization", "authorization names a key of config.secrets (got %q)", s.Authorization)
		}
		switch s.Approval {
		case "", ApprovalNone:
			s.Approval = ApprovalNone
		case ApprovalRequired:
		default:
			p.add(field+".approval", "approval is %s or %s (got %q)", ApprovalRequired, ApprovalNone, s.Approval)
			s.Approval = ApprovalNone
		}
		if len(s.Tools) > MaxMCPTools {
			p.add(field+".tools", "at most %d tools", MaxMCPTools)
		}
		for j, name := range s.Tools {
			if name == "" || len(name) > 128 {
				p.add(fmt.Sprintf("%s.tools[%d]", field, j), "a tool's name is 1-128 bytes")
			}
		}
		if timeout != nil {
			if *timeout < 1 || time.Duration(*timeout)*time.Millisecond > MaxMCPTimeout {
				p.add(field+".timeoutMs", "timeoutMs is 1-%d", MaxMCPTimeout.Milliseconds())
			} else {
				s.TimeoutMS = *timeout
			}
		}
	}
	return out
}

// checkEgress refuses, at create, a server url the egress rules refuse
// (a name is checked when dialled).
func checkEgress(p *problems, e *egress.Egress, servers []MCPServer) {
	for i, s := range servers {
		field := fmt.Sprintf("config.mcpServers[%d].url", i)
		u, err := url.Parse(s.URL)
		if p.has(field) || err != nil || u.Host == "" {
			continue
		}
		if e.CheckURL(u) != nil {
			p.add(field, "the url's host is a loopback, link-local or private address, which this server does not send to (allow it with HTTP_ALLOW)")
		}
	}
}

// remoteTool is a tool of an external MCP server as the model sees it.
type remoteTool struct {
	server int    // in config.mcpServers
	name   string // as the model sees it: <server>__<tool>
	tool   remote.Tool
	sess   *remote.Session
}

func (t *remoteTool) cfg(l *loop) MCPServer { return l.h.cfg.MCPServers[t.server] }

// connectMCP connects to every server of config.mcpServers and adds the
// tools each lists (its allow list applied) to the turn's. A server that
// cannot be reached fails the attempt with an error naming it, which the
// executor retries (T7); one the egress rules refuse fails it for good.
func (l *loop) connectMCP(ctx context.Context) error {
	for i, s := range l.h.cfg.MCPServers {
		if err := l.connect1(ctx, i, s); err != nil {
			l.closeMCP()
			return err
		}
	}
	return nil
}

func (l *loop) connect1(ctx context.Context, i int, s MCPServer) error {
	field := fmt.Sprintf("config.mcpServers[%d]", i)
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	srv := remote.Server{URL: s.URL, Client: l.h.opts.Egress.Client()}
	if s.Authorization != "" {
		srv.Authorization = l.h.cfg.Secrets[s.Authorization]
	}
	fail := func(err error) error {
		err = fmt.Errorf("%s: the MCP server %s (%s) is unavailable (retryable; the turn is retried): %w", field, s.Name, s.URL, err)
		l.rec.Add("note", map[string]any{"mcp_server": s.Name, "error": err.Error()})
		if errors.Is(err, egress.ErrRefused) {
			return turns.Permanent(err)
		}
		return err
	}
	sess, err := remote.Dial(ctx, srv)
	if err != nil {
		return fail(err)
	}
	l.sessions = append(l.sessions, sess)
	list, err := sess.Tools(ctx, MaxMCPTools)
	if err != nil {
		return fail(err)
	}
	allowed := map[string]bool{}
	for _, name := range s.Tools {
		allowed[name] = true
	}
	listed := map[string]bool{}
	for _, t := range list {
		listed[t.Name] = true
		if len(allowed) > 0 && !allowed[t.Name] {
			continue
		}
		name := s.Name + mcpToolNameSeparator + t.Name
		switch {
		case !namePattern.MatchString(name):
			l.rec.Add("note", map[string]any{"mcp_server": s.Name, "tool": t.Name, "text": "left out: " + quoteJSON(name) + " is not a name a model accepts (1-64 letters, digits, _ or -)"})
			continue
		case l.tools[name] != nil || l.remote[name] != nil:
			return turns.Permanent(fmt.Errorf("%s: the tool name %q is taken twice; rename the server or the tool reference", field, name))
		}
		rt := &remoteTool{server: i, name: name, tool: t, sess: sess}
		l.remote[name] = rt
		l.remoteNames = append(l.remoteNames, name)
		l.specs = append(l.specs, provider.ToolSpec{Name: name, Description: t.Description, InputSchema: t.InputSchema})
	}
	for _, name := range s.Tools {
		if !listed[name] {
			l.rec.Add("note", map[string]any{"mcp_server": s.Name, "tool": name, "text": "config names this tool but the server does not list it"})
		}
	}
	return nil
}

// closeMCP ends the turn's MCP sessions.
func (l *loop) closeMCP() {
	for _, s := range l.sessions {
		_ = s.Close()
	}
	l.sessions = nil
}

// callRemote calls a tool of an external MCP server and returns the result
// for the model. The tool's error is an error result; a server that cannot
// be reached is an error result saying so (retryable), so the model can
// try again or go on without it; a cancelled turn fails the attempt.
func (l *loop) callRemote(ctx context.Context, callID string, t *remoteTool, input jsonvalue.Value, approved bool) (*provider.ToolResult, error) {
	s := t.cfg(l)
	entry := map[string]any{"call_id": callID, "tool": t.name, "mcp_server": s.Name, "mcp_tool": t.tool.Name, "input": input}
	if approved {
		entry["approved"] = true
	}
	l.rec.Add("tool_call", entry)
	l.calls++
	cctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	cctx, span := observe.Child(cctx, "mcp.call", observe.ToolName.String(t.name))
	res, err := t.sess.Call(cctx, t.tool.Name, json.RawMessage(input))
	observe.End(span, err)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return l.result(callID, t.name, fmt.Sprintf("%s (retryable): the MCP server %s is unavailable: %v", fault.UpstreamUnavailable, s.Name, err), true), nil
	}
	return l.result(callID, t.name, res.Text, res.IsError), nil
}

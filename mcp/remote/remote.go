// Package remote is the client side of MCP (issue 17): an agent's turn
// connects to the external MCP servers its config names, lists their tools
// and calls them, over streamable HTTP with the go-sdk client.
//
// Every error that is not the server's own answer (a JSON-RPC error) wraps
// ErrUnreachable: the server could not be reached, broke the connection,
// answered with an HTTP error or did not answer in time. Such errors are
// worth retrying later; the caller says so.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrUnreachable marks a failure to talk to the server (see the package doc).
var ErrUnreachable = errors.New("the MCP server could not be reached")

// Server is an external MCP server.
type Server struct {
	// URL is its streamable HTTP endpoint.
	URL string
	// Authorization, when set, is sent as the Authorization header of every
	// request (e.g. "Bearer <token>").
	Authorization string
	// Client sends the requests (the server's egress rules); nil:
	// http.DefaultClient.
	Client *http.Client
}

// Session is a connection to a Server.
type Session struct {
	cs *gomcp.ClientSession
}

// Dial connects to s (the MCP initialize handshake) within ctx.
func Dial(ctx context.Context, s Server) (*Session, error) {
	hc := s.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	if s.Authorization != "" {
		c := *hc
		next := c.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		c.Transport = header{value: s.Authorization, next: next}
		hc = &c
	}
	c := gomcp.NewClient(&gomcp.Implementation{Name: "actionsledger-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc,
		MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, classify(err)
	}
	return &Session{cs: cs}, nil
}

// header sets the Authorization header on every request.
type header struct {
	value string
	next  http.RoundTripper
}

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.value)
	return h.next.RoundTrip(r)
}

// Close ends the session.
func (s *Session) Close() error { return s.cs.Close() }

// Tool is a tool the server lists.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema (an object schema).
	InputSchema json.RawMessage
}

// Tools lists the server's tools, at most max of them (more is an error:
// the agent's model could not be shown them all).
func (s *Session) Tools(ctx context.Context, max int) ([]Tool, error) {
	var out []Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, classify(err)
		}
		if len(out) == max {
			return nil, fmt.Errorf("the server lists more than %d tools", max)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// Result is a call's answer: its content as text (text items as they are,
// other items and structured content as JSON) and whether the tool
// reported an error.
type Result struct {
	Text    string
	IsError bool
}

// Call calls tool name with args (a JSON object). A JSON-RPC error (say an
// unknown tool) comes back as a Result with IsError; a failure to reach the
// server is an error wrapping ErrUnreachable.
func (s *Session) Call(ctx context.Context, name string, args json.RawMessage) (*Result, error) {
	res, err := s.cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if rpc := answer(err); rpc != nil {
		return &Result{Text: rpc.Message, IsError: true}, nil
	}
	if err != nil {
		return nil, classify(err)
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*gomcp.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		raw, err := json.Marshal(c)
		if err == nil {
			parts = append(parts, string(raw))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(raw))
		}
	}
	return &Result{Text: strings.Join(parts, "\n"), IsError: res.IsError}, nil
}

// classify wraps err in ErrUnreachable unless it is the server's JSON-RPC
// answer.
func classify(err error) error {
	if answer(err) != nil {
		return fmt.Errorf("the MCP server refused: %w", err)
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// CodeRejected is the JSON-RPC code the go-sdk's client gives the errors
// of its transport (its jsonrpc2.ErrRejected, "rejected by transport"):
// the request did not reach the server, the connection broke or the
// answer was an HTTP error without a JSON-RPC body.
const CodeRejected = -32005

// answer returns the server's JSON-RPC error in err, or nil when err holds
// none: the first JSON-RPC error in err's chain, unless it is the
// transport's own (CodeRejected), which says the server never answered.
func answer(err error) *jsonrpc.Error {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code == CodeRejected {
		return nil
	}
	return rpc
}

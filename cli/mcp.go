package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actionsledger/actionsledger/client"
	"github.com/actionsledger/actionsledger/mcp"
	"github.com/actionsledger/actionsledger/mcp/remote"
)

// MCPCmd is `actionsledger mcp`: an MCP server on stdin/stdout (one
// JSON-RPC message a line, what desktop clients start as a subprocess),
// bridged to the server's streamable HTTP endpoint /mcp, or
// /mcp/actions/<id> with --action, under --token (docs/mcp.md).
//
// It connects first (the MCP initialize handshake, with the token), so a
// server that does not answer ends it with ExitUnreachable and a refused
// token with ExitRefused before anything is served. Then the tools the
// server lists are listed on stdio with their names, descriptions and
// input schemas; a tools/call is sent to the server as it came (arguments
// and _meta, so a progress token reaches it) and answered with the
// server's result or JSON-RPC error; the server's progress notifications
// for that call are passed on. When the server's tool list changes, it
// is read again. It ends when stdin ends (exit 0) or the connection to
// the server breaks (ExitUnreachable).
type MCPCmd struct {
	Action string `placeholder:"ID" help:"Serve one action's endpoint (/mcp/actions/ID) instead of /mcp."`
}

// refusedError is the MCP endpoint refusing the bridge (HTTP 401 or 403:
// no token, an unknown or revoked one): ExitRefused.
type refusedError struct {
	status  int
	message string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the MCP endpoint refused the connection (HTTP %d): %s", e.status, e.message)
}

// Run serves until stdin ends or the server's connection breaks.
func (c *MCPCmd) Run(ctx context.Context, env *Env) error {
	endpoint := env.Client.Base() + "/mcp"
	if c.Action != "" {
		id, err := uuid.Parse(c.Action)
		if err != nil {
			return usagef("--action %q is not an action id (a UUID)", c.Action)
		}
		endpoint = env.Client.Base() + mcp.Endpoint(id)
	}
	hc := env.Client.HTTPClient()
	seen := &refusals{next: hc.Transport}
	hc.Transport = seen

	b := &bridge{progress: map[any]*gomcp.ServerSession{}}
	up := gomcp.NewClient(&gomcp.Implementation{Name: "actionsledger-mcp-bridge", Version: "1"}, &gomcp.ClientOptions{
		ProgressNotificationHandler: b.forwardProgress,
		ToolListChangedHandler: func(ctx context.Context, _ *gomcp.ToolListChangedRequest) {
			_ = b.sync(ctx) // a failure shows on the next call
		},
	})
	cs, err := up.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		if r := seen.refused(); r != nil {
			return r
		}
		return &client.TransportError{URL: endpoint, What: "the MCP endpoint did not answer", Err: err}
	}
	defer cs.Close()
	b.upstream = cs
	b.server = gomcp.NewServer(&gomcp.Implementation{Name: "actionsledger", Version: "1"},
		&gomcp.ServerOptions{HasTools: true})
	if err := b.sync(ctx); err != nil {
		if r := seen.refused(); r != nil {
			return r
		}
		return &client.TransportError{URL: endpoint, What: "listing the MCP endpoint's tools failed", Err: err}
	}

	stdio := &gomcp.IOTransport{Reader: io.NopCloser(env.Stdin), Writer: nopCloser{env.Stdout}}
	served := make(chan error, 1)
	go func() { served <- b.server.Run(ctx, stdio) }()
	broken := make(chan error, 1)
	go func() { broken <- cs.Wait() }()
	select {
	case err := <-served:
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("serving MCP on stdio: %w", err)
		}
		return nil
	case err := <-broken:
		return &client.TransportError{URL: endpoint, What: "the connection to the MCP endpoint ended", Err: err}
	}
}

// bridge mirrors the upstream session's tools on the stdio server.
type bridge struct {
	upstream *gomcp.ClientSession
	server   *gomcp.Server

	mu       sync.Mutex
	listed   map[string]bool
	progress map[any]*gomcp.ServerSession // progress token -> the stdio session that sent it
}

// sync lists the upstream tools and makes the stdio server's list the same.
func (b *bridge) sync(ctx context.Context) error {
	var tools []*gomcp.Tool
	for t, err := range b.upstream.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		tools = append(tools, t)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := map[string]bool{}
	for _, t := range tools {
		if t.InputSchema == nil {
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		b.server.AddTool(t, b.call(t.Name))
		now[t.Name] = true
	}
	var gone []string
	for name := range b.listed {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	b.server.RemoveTools(gone...)
	b.listed = now
	return nil
}

// call forwards a tools/call of name to the upstream session.
func (b *bridge) call(name string) gomcp.ToolHandler {
	return func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		params := &gomcp.CallToolParams{Name: name, Arguments: req.Params.Arguments, Meta: req.Params.Meta}
		if token := req.Params.GetProgressToken(); token != nil {
			b.mu.Lock()
			b.progress[token] = req.Session
			b.mu.Unlock()
			defer func() {
				b.mu.Lock()
				delete(b.progress, token)
				b.mu.Unlock()
			}()
		}
		res, err := b.upstream.CallTool(ctx, params)
		if err != nil {
			var rpc *jsonrpc.Error
			if errors.As(err, &rpc) && rpc.Code != remote.CodeRejected {
				return nil, rpc // the server's answer, passed on as it is
			}
			return nil, &jsonrpc.Error{Code: mcp.CodeUnavailable,
				Message: "the actionsledger server could not be reached: " + err.Error(),
				Data:    json.RawMessage(`{"code":"UNAVAILABLE","retryable":true}`)}
		}
		return res, nil
	}
}

// forwardProgress passes an upstream progress notification to the stdio
// session whose call carries its token.
func (b *bridge) forwardProgress(ctx context.Context, req *gomcp.ProgressNotificationClientRequest) {
	b.mu.Lock()
	ss := b.progress[req.Params.ProgressToken]
	b.mu.Unlock()
	if ss != nil {
		_ = ss.NotifyProgress(ctx, req.Params)
	}
}

// refusals is a transport that remembers the first HTTP 401 or 403 the
// MCP endpoint answered, with its JSON-RPC error's message.
type refusals struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen *refusedError
}

func (r *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	var body struct {
		Error struct{ Message string }
	}
	msg := http.StatusText(resp.StatusCode)
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	r.mu.Lock()
	if r.seen == nil {
		r.seen = &refusedError{status: resp.StatusCode, message: msg}
	}
	r.mu.Unlock()
	return resp, nil
}

func (r *refusals) refused() *refusedError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// nopCloser lets the bridge's stdout outlive the MCP session.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

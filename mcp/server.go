package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/tools"
	"github.com/actionsledger/actionsledger/turns"
)

// Options configure a Server. Actions and Tools are required; Sessions
// and Turns serve requests to actions served over MCP (without them such
// actions are not listed).
type Options struct {
	Actions  *action.Store
	Tools    *tools.Service
	Sessions *session.Store
	Turns    *turns.Store
	// Feed wakes a request waiting for its answer when its session changes;
	// without one it reads the session every Poll.
	Feed *ledger.Feed
	Log  *slog.Logger
	// CallTimeout bounds one tools/call (the HTTP front's RequestTimeout);
	// past it the call is cancelled and answered with TIMEOUT (retryable).
	// Default DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxInFlight caps the MCP requests served at once (the front's
	// MaxStreams); more are answered HTTP 503 with Retry-After. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxBodyBytes caps a request body (HTTP 413 past it); default 4 MiB,
	// the GraphQL endpoint's.
	MaxBodyBytes int64
	// Unavailable reports whether an error means the database could not be
	// reached (the server's test): such a call is answered UNAVAILABLE,
	// retryable, instead of INTERNAL. Optional.
	Unavailable func(error) bool
	// AskWait bounds how long a request to an action served over MCP waits
	// for its answer; past it the call is answered TIMEOUT with the
	// request's key, which a new call gives to wait again (the request
	// itself is not affected). Default DefaultAskWait.
	AskWait time.Duration
	// Heartbeat is how often a waiting request repeats its last progress
	// notification, so clients that reset their timeout on progress keep
	// waiting. Default DefaultHeartbeat.
	Heartbeat time.Duration
	// Poll is how often a waiting request reads its session besides the
	// Feed's wake-ups (a missed notification costs at most Poll). Default
	// DefaultPoll.
	Poll time.Duration
}

// Defaults of Options.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultMaxInFlight = 256
	DefaultMaxBody     = 4 << 20
	DefaultAskWait     = 15 * time.Minute
	DefaultHeartbeat   = 20 * time.Second
	DefaultPoll        = 5 * time.Second
)

// Server serves MCP over streamable HTTP (see the package doc). It is an
// http.Handler for /mcp and /mcp/actions/{id}; put it behind the
// authentication of the GraphQL endpoint (a principal must be on every
// request's context).
type Server struct {
	opts     Options
	log      *slog.Logger
	sdk      *gomcp.Server
	http     http.Handler
	inFlight atomic.Int64
}

// ScopePrefix is the path prefix of the endpoints serving one action.
const ScopePrefix = "/mcp/actions/"

// Endpoint is the path of the MCP endpoint that serves action id alone.
func Endpoint(id uuid.UUID) string { return ScopePrefix + id.String() }

// Serves reports whether the endpoint serves the action version comp: a
// tool (as the tool), or an action with an mcp block (as its request
// tool, I4), when the caller may call it.
func Serves(comp *action.Compiled) bool { return comp != nil && (comp.Tool != nil || comp.MCP != nil) }

// NewServer returns a Server.
func NewServer(opts Options) *Server {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBody
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.AskWait <= 0 {
		opts.AskWait = DefaultAskWait
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	s := &Server{opts: opts, log: opts.Log}
	s.sdk = gomcp.NewServer(&gomcp.Implementation{Name: "actionsledger", Title: "actionsledger tool actions", Version: "1"},
		&gomcp.ServerOptions{
			Instructions: "Tools are the tool actions of an actionsledger server that your token may call (CALL), " +
				"and the actions it serves over MCP, such as agents (_meta actionsledger/kind: request). " +
				"A tool call is recorded like a GraphQL callTool: its execution and, for tools with a session, a CALL input. " +
				"A call of an action served over MCP is a request to one of its sessions (a REQUEST input), answered by the turn that takes it; " +
				"progress notifications tell what it waits on, such as a person's approval in the inbox.",
			// The SDK logs each request's connection at INFO: keep warnings only.
			Logger:       slog.New(warnOnly{opts.Log.Handler()}),
			Capabilities: &gomcp.ServerCapabilities{Tools: &gomcp.ToolCapabilities{}},
		})
	s.sdk.AddReceivingMiddleware(s.route)
	// Stateless: every POST stands alone (its own principal, no session
	// state kept in this process, any replica can answer); see the doc.
	h := gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return s.sdk },
		&gomcp.StreamableHTTPOptions{Stateless: true, Logger: slog.New(warnOnly{opts.Log.Handler()}), MaxRequestBodyBytes: opts.MaxBodyBytes})
	s.http = withCodes(http.NewCrossOriginProtection().Handler(h))
	return s
}

// httpKey carries, into the SDK's handlers, what the HTTP request says:
// its principal is on the context already; this adds the scope (the one
// action an endpoint serves), the client's Mcp-Session-Id and the
// request's own context, whose end cancels the call (the SDK's handler
// contexts outlive the request).
type httpKey struct{}

type request struct {
	scope      uuid.UUID // uuid.Nil: every action
	mcpSession string
	ctx        context.Context
}

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// ServeHTTP serves /mcp and /mcp/actions/{id}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var scope uuid.UUID
	if rest, ok := strings.CutPrefix(r.URL.Path, ScopePrefix); ok {
		id, err := uuid.Parse(rest)
		if err != nil || id.String() != rest {
			writeError(w, http.StatusNotFound, fault.NotFound, "no such MCP endpoint: /mcp serves every tool, /mcp/actions/<action id> one action")
			return
		}
		scope = id
	} else if r.URL.Path != "/mcp" {
		writeError(w, http.StatusNotFound, fault.NotFound, "no such MCP endpoint: /mcp serves every tool, /mcp/actions/<action id> one action")
		return
	}
	p, ok := auth.From(r.Context())
	if !ok || p.Session != nil {
		// A handler credential reads its own session through GraphQL only.
		writeError(w, http.StatusForbidden, fault.Forbidden, "not allowed: this credential may not use MCP")
		return
	}
	if s.inFlight.Add(1) > int64(s.opts.MaxInFlight) {
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fault.Unavailable, "the server serves as many MCP requests as it may; retry later")
		return
	}
	defer s.inFlight.Add(-1)
	// The server keeps no MCP session state (every POST stands alone), but
	// it names each client's session: a response to a request without an
	// Mcp-Session-Id carries a new one, which clients send back on every
	// request. Requests to actions served over MCP can map it to a session
	// (request.mcp_session, docs/mcp.md). Ending it (DELETE) ends nothing.
	sid := r.Header.Get(sessionHeader)
	switch {
	case len(sid) > maxSessionHeader:
		writeError(w, http.StatusBadRequest, fault.BadInput, "Mcp-Session-Id is at most 128 bytes")
		return
	case r.Method == http.MethodDelete && sid != "":
		w.WriteHeader(http.StatusNoContent)
		return
	case r.Method == http.MethodPost && sid == "":
		w.Header().Set(sessionHeader, uuid.NewString())
	}
	if r.Method == http.MethodPost {
		// A request to an action served over MCP waits for its turn, up to
		// AskWait: the server's write timeout would cut it short.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.AskWait + time.Minute))
	}
	ctx := context.WithValue(r.Context(), httpKey{}, &request{scope: scope, mcpSession: sid, ctx: r.Context()})
	s.http.ServeHTTP(w, r.WithContext(ctx))
}

// maxSessionHeader bounds the Mcp-Session-Id a client sends, in bytes.
const maxSessionHeader = 128

// route answers tools/list and tools/call from the database; every other
// method goes to the SDK.
func (s *Server) route(next gomcp.MethodHandler) gomcp.MethodHandler {
	return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
		switch r := req.(type) {
		case *gomcp.ListToolsRequest:
			return s.listTools(ctx, r)
		case *gomcp.CallToolRequest:
			return s.callTool(ctx, r)
		}
		return next(ctx, method, req)
	}
}

// caller is the principal and scope of the HTTP request a method came in.
func caller(ctx context.Context) (auth.Principal, *request, error) {
	p, ok := auth.From(ctx)
	r, _ := ctx.Value(httpKey{}).(*request)
	if !ok || r == nil {
		return auth.Principal{}, nil, rpcError(codeForbidden, fault.Forbidden, "not allowed")
	}
	return p, r, nil
}

// pageSize is how many tools one tools/list answer holds.
const pageSize = 100

// bound limits a method's work to CallTimeout and to the HTTP request it
// came in (the SDK's handler contexts outlive it).
func (s *Server) bound(ctx context.Context, r *request) (context.Context, func()) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	stop := context.AfterFunc(r.ctx, cancel) // the client went away
	return ctx, func() { stop(); cancel() }
}

func (s *Server) listTools(ctx context.Context, req *gomcp.ListToolsRequest) (gomcp.Result, error) {
	p, r, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	ctx, done := s.bound(ctx, r)
	defer done()
	list, err := s.catalog(ctx, p, r.scope)
	if err != nil {
		return nil, s.rpcFailure(ctx, err, "list tools")
	}
	after := ""
	if req.Params != nil {
		after = req.Params.Cursor
	}
	res := &gomcp.ListToolsResult{Tools: []*gomcp.Tool{}}
	for _, e := range list {
		if e.gated || (after != "" && e.name <= after) {
			continue
		}
		if len(res.Tools) == pageSize {
			res.NextCursor = res.Tools[pageSize-1].Name
			break
		}
		res.Tools = append(res.Tools, e.tool())
	}
	return res, nil
}

func (s *Server) callTool(ctx context.Context, req *gomcp.CallToolRequest) (gomcp.Result, error) {
	p, r, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	ctx, done := s.bound(ctx, r)
	defer done()
	list, err := s.catalog(ctx, p, r.scope)
	if err != nil {
		return nil, s.rpcFailure(ctx, err, "list tools")
	}
	var e *entry
	for i := range list {
		if list[i].name == req.Params.Name {
			e = &list[i]
		}
	}
	if e == nil {
		// The same answer whether the tool does not exist or the caller
		// may not call it.
		return nil, rpcError(codeInvalidParams, fault.NotFound, "unknown tool %q", req.Params.Name)
	}
	if e.served {
		return s.ask(ctx, p, r, e, req)
	}
	if e.gated {
		return toolError(fault.New(fault.ApprovalRequired, "",
			"%s requires a person's approval for every call, which a direct MCP call cannot wait for: ask an agent that may call it (its turn waits for the approval in the inbox), or call it through GraphQL", e.name)), nil
	}
	input := req.Params.Arguments
	if len(strings.TrimSpace(string(input))) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	res, err := s.opts.Tools.Call(ctx, e.v.ActionID, []byte(input))
	if err != nil {
		return s.callError(ctx, e, err)
	}
	return callResult(res), nil
}

// callError maps a failed call: the tool's and the caller's faults are tool
// errors (isError, with the code) the client's model can read and act on;
// running out of time and an unreachable database are retryable tool
// errors; anything else is a JSON-RPC internal error whose text is logged,
// not shown.
func (s *Server) callError(ctx context.Context, e *entry, err error) (gomcp.Result, error) {
	fe := fault.As(err)
	switch {
	case fe != nil && fe.Code != fault.Internal:
		return toolError(fe), nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return toolError(fault.New(fault.Timeout, "", "the call to %s was cancelled or ran out of time (%s); it did not commit", e.name, s.opts.CallTimeout)), nil
	case s.opts.Unavailable != nil && s.opts.Unavailable(err):
		s.log.Warn("mcp: tools/call: database unavailable", "tool", e.name, "err", err)
		return toolError(fault.New(fault.Unavailable, "", "the database is unavailable; retry later")), nil
	}
	return nil, s.internal(err, "tools/call "+e.name)
}

// rpcFailure is a failed method as a JSON-RPC error: UNAVAILABLE
// (retryable) when the database could not be reached, TIMEOUT when the
// request ran out of time or was cancelled, else INTERNAL (logged).
func (s *Server) rpcFailure(ctx context.Context, err error, what string) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return rpcError(CodeUnavailable, fault.Timeout, "%s was cancelled or ran out of time (%s at most)", what, s.opts.CallTimeout)
	case s.opts.Unavailable != nil && s.opts.Unavailable(err):
		s.log.Warn("mcp: "+what+": database unavailable", "err", err)
		return rpcError(CodeUnavailable, fault.Unavailable, "the database is unavailable; retry later")
	}
	return s.internal(err, what)
}

func (s *Server) internal(err error, what string) error {
	s.log.Error("mcp: "+what, "err", err)
	return rpcError(codeInternal, fault.Internal, "internal error")
}

// callResult is a committed call as MCP shows it: the output as JSON text,
// the output itself as structured content when it is an object, and the
// execution (and tool session) in _meta.
func callResult(res *tools.Result) *gomcp.CallToolResult {
	meta := gomcp.Meta{MetaExecutionID: res.ExecutionID.String(), MetaActionID: res.ActionID.String()}
	if res.SessionID != "" {
		meta[MetaSessionID] = res.SessionID
	}
	out := &gomcp.CallToolResult{Meta: meta, Content: []gomcp.Content{&gomcp.TextContent{Text: string(res.Output)}}}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(string(res.Output)))
	dec.UseNumber()
	if dec.Decode(&obj) == nil && obj != nil {
		out.StructuredContent = obj
	}
	return out
}

// Keys of _meta in call results.
const (
	MetaExecutionID = "actionsledger/executionId"
	MetaActionID    = "actionsledger/actionId"
	MetaSessionID   = "actionsledger/sessionId"
	MetaCode        = "actionsledger/code"
)

// toolError is a failed call as MCP shows it: isError, the text
// "CODE: message", and {error: {code, message, field?, retryable?}} as
// structured content.
func toolError(fe *fault.Error) *gomcp.CallToolResult {
	detail := map[string]any{"code": fe.Code, "message": fe.Message}
	if fe.Field != "" {
		detail["field"] = fe.Field
	}
	if fault.Retryable(fe.Code) {
		detail["retryable"] = true
	}
	return &gomcp.CallToolResult{
		IsError:           true,
		Meta:              gomcp.Meta{MetaCode: fe.Code},
		Content:           []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf("%s: %s", fe.Code, fe.Error())}},
		StructuredContent: map[string]any{"error": detail},
	}
}

// warnOnly passes on records at WARN and above.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(a)} }
func (h warnOnly) WithGroup(n string) slog.Handler      { return warnOnly{h.Handler.WithGroup(n)} }

package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// Subscriptions over HTTP (issue 12). Two transports carry them:
// graphql-transport-ws over a WebSocket (GET /graphql with Upgrade:
// websocket) and server-sent events (POST /graphql with Accept:
// text/event-stream). Both are "streams": long-lived requests that take
// their own path through the front (see WithLoadersAndLimits):
//
//   - no http.TimeoutHandler (it buffers the whole answer, cannot flush or
//     hijack, and would cut the stream at RequestTimeout); operations other
//     than subscriptions sent over a stream still get RequestTimeout
//     (streamGuard);
//   - the server's read and write deadlines are lifted for the connection,
//     and each write gets a deadline of its own instead (writeGrace), so a
//     client that stops reading is dropped, never held;
//   - at most Limits.MaxStreams at once, so streams cannot take every
//     connection the server serves (HTTP 503, UNAVAILABLE, retryable), and
//     Limits.MaxSocketSubscriptions subscriptions per WebSocket;
//   - they end when the server shuts down (Serve cancels them), and when
//     the change feed closes.
//
// Everything else applies as to any request: authentication (the bearer
// token of the request, or for a WebSocket also the connection_init
// payload's "Authorization"), the field rules, the limits on operations,
// the error presenter and panic recovery.

// MaxConnSubscriptions is the default of Limits.MaxSocketSubscriptions: the
// subscriptions one WebSocket carries at once (SUBSCRIPTION_LIMIT_EXCEEDED).
const MaxConnSubscriptions = 100

// Keep-alive of the WebSocket transport: the server pings every
// wsPingInterval and drops a client that has not answered within two;
// connection_init must come within wsInitTimeout.
const (
	wsPingInterval  = 25 * time.Second
	wsInitTimeout   = 10 * time.Second
	ssePingInterval = 25 * time.Second
)

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// checkHandshake answers, with a coded error, a WebSocket upgrade the
// WebSocket library would refuse with plain text: an incomplete handshake
// (HTTP 400, BAD_USER_INPUT) or a page of another origin (HTTP 403,
// FORBIDDEN: a browser page elsewhere must not reach a loopback dev
// server through its user's browser). It returns false when it answered.
func checkHandshake(w http.ResponseWriter, r *http.Request) bool {
	if !headerHas(r.Header, "Connection", "upgrade") || r.Header.Get("Sec-WebSocket-Key") == "" ||
		r.Header.Get("Sec-WebSocket-Version") != "13" {
		writeError(w, http.StatusBadRequest, fault.BadInput,
			"not a WebSocket handshake: it needs Connection: Upgrade, Sec-WebSocket-Key and Sec-WebSocket-Version: 13")
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			writeError(w, http.StatusForbidden, fault.Forbidden, "WebSocket connections are accepted from pages of this server's own origin only")
			return false
		}
	}
	return true
}

func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// isEventStream reports whether r is a request gqlgen's SSE transport
// serves: a JSON POST accepting text/event-stream.
func isEventStream(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// streamKey marks a request's context as a stream's, with its
// subscription count and the request timeout its other operations get.
type streamKey struct{}

type streamState struct {
	timeout time.Duration
	maxSubs int32
	subs    atomic.Int32
}

// streams counts the streams a front serves.
type streams struct {
	n   atomic.Int64
	max int64
}

// serve runs h for a stream request: no request timeout, no server
// deadlines but one per write, ended by the server's shutdown.
func (s *streams) serve(w http.ResponseWriter, req *http.Request, h http.Handler, lim Limits) {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fault.Unavailable, "the server serves as many subscriptions as it may; retry later")
		return
	}
	defer s.n.Add(-1)
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if done, ok := req.Context().Value(shutdownKey{}).(context.Context); ok {
		stop := context.AfterFunc(done, cancel)
		defer stop()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ctx = context.WithValue(ctx, streamKey{}, &streamState{timeout: lim.RequestTimeout, maxSubs: int32(lim.MaxSocketSubscriptions)})
	sw := &streamWriter{ResponseWriter: w, rc: rc, cancel: cancel}
	defer sw.finish()
	h.ServeHTTP(sw, req.WithContext(ctx))
}

// streamWriter gives every write of a stream a deadline of its own and ends
// the stream (cancel) when one fails: gqlgen's transports do not stop on a
// failed write. A hijacked connection (WebSocket) gets the same per write.
// Once the handler has returned, writes are dropped: the SSE transport's
// keep-alive goroutine can still wake then, and net/http panics on a write
// to a finished response (outside the handler, so nothing recovers it).
type streamWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc

	mu   sync.Mutex
	done bool
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return 0, http.ErrHandlerTimeout
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(writeGrace))
	n, err := w.ResponseWriter.Write(p)
	if err != nil {
		w.cancel()
	}
	return n, err
}

func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(writeGrace))
	if err := w.rc.Flush(); err != nil {
		w.cancel()
	}
}

// finish stops the writes once the handler has returned.
func (w *streamWriter) finish() {
	w.cancel()
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

func (w *streamWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := w.rc.Hijack()
	if err != nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &deadlineConn{Conn: conn}, brw, nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// deadlineConn is a hijacked connection whose every write must finish
// within writeGrace.
type deadlineConn struct {
	net.Conn
	mu sync.Mutex
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.Conn.SetWriteDeadline(time.Now().Add(writeGrace))
	return c.Conn.Write(p)
}

// wsTransport is the WebSocket transport: graphql-transport-ws (and the
// older graphql-ws subprotocol), pings, an init timeout, messages no larger
// than a request body, and the principal from connection_init when the
// upgrade request carried no Authorization header (see Authenticate).
func wsTransport(log *slog.Logger) transport.Websocket {
	limit := int64(MaxBodyBytes)
	return transport.Websocket{
		InitFunc:              wsInit,
		InitTimeout:           wsInitTimeout,
		KeepAlivePingInterval: wsPingInterval,
		PingPongInterval:      wsPingInterval,
		PayloadReadLimit:      &limit,
		ErrorFunc: func(ctx context.Context, err error) {
			if !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				log.Debug("websocket", "err", err)
			}
		},
	}
}

// WebSocket close codes of graphql-transport-ws and RFC 6455 used when
// connection_init is refused.
const (
	wsForbidden     = 4403 // no valid credentials: do not reconnect as is
	wsTryAgainLater = 1013 // the token could not be checked now
	wsInternalError = 1011
)

// wsInit authenticates a WebSocket whose upgrade request had no
// Authorization header from connection_init's {"Authorization": "Bearer
// ..."}; a refusal closes the socket with 4403 (or 1013 when the check
// could not be made now) and the error code as the close reason.
func wsInit(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	if _, ok := auth.From(ctx); ok {
		return ctx, nil, nil
	}
	d, ok := ctx.Value(deferredAuthKey{}).(deferred)
	if !ok {
		return refuseInit(ctx, wsForbidden, fault.Unauthenticated, "no principal"), nil, errors.New("unauthenticated")
	}
	header := payload.Authorization()
	p, fail := d.authn(ctx, header)
	if fail != nil {
		code := wsForbidden
		switch fail.code {
		case fault.Unavailable, fault.Timeout:
			code = wsTryAgainLater
		case fault.Internal:
			code = wsInternalError
		}
		return refuseInit(ctx, code, fail.code, fail.message), nil, errors.New(fail.message)
	}
	return watchCredential(auth.With(ctx, p), d.authn, header, p, d.recheck), nil, nil
}

func refuseInit(ctx context.Context, code int, errCode, message string) context.Context {
	reason := errCode + ": " + message
	if len(reason) > 120 { // a close reason is at most 123 bytes
		reason = errCode
	}
	return transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, code), reason)
}

// streamGuard applies the front's rules to operations by transport: a
// subscription needs a stream (on a plain POST it would hold the request
// until its first update, then drop the rest); on a stream, an operation
// other than a subscription still gets the request timeout, and a
// WebSocket carries at most Limits.MaxSocketSubscriptions subscriptions at once.
type streamGuard struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
	graphql.OperationInterceptor
} = streamGuard{}

func (streamGuard) ExtensionName() string                   { return "StreamGuard" }
func (streamGuard) Validate(graphql.ExecutableSchema) error { return nil }

func (streamGuard) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return nil
	}
	// One root field per subscription, counted by response name as the
	// GraphQL spec does (gqlparser's rule lets one field under two aliases
	// through, and the executor then fails the stream uncoded).
	if fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"}); len(fields) != 1 {
		return limitError(errcode.ValidationFailed, "a subscription selects exactly one field (this one selects %d)", len(fields))
	}
	if _, ok := ctx.Value(streamKey{}).(*streamState); !ok {
		return limitError(fault.MethodNotAllowed,
			"a subscription needs a stream: POST with Accept: text/event-stream, or a WebSocket (graphql-transport-ws)")
	}
	return nil
}

func (streamGuard) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	st, ok := ctx.Value(streamKey{}).(*streamState)
	oc := graphql.GetOperationContext(ctx)
	if !ok || oc == nil || oc.Operation == nil {
		return next(ctx)
	}
	if oc.Operation.Operation != ast.Subscription {
		ctx, cancel := context.WithTimeout(ctx, st.timeout)
		h := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			resp := h(ctx)
			if resp == nil {
				cancel()
			}
			return resp
		}
	}
	if st.subs.Add(1) > st.maxSubs {
		st.subs.Add(-1)
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{limitError(fault.SubscriptionLimit,
			"a connection carries at most %d subscriptions at once", st.maxSubs)}})
	}
	context.AfterFunc(ctx, func() { st.subs.Add(-1) })
	return next(ctx)
}

package graph

import (
	"context"
	"encoding/base64"
	"errors"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
)

// Subscriptions (issue 12). Each runs one goroutine that sends updates down
// an unbuffered channel that gqlgen's transport drains: a client that reads
// slowly holds its goroutine back, never anyone else. What changed is read
// once per process and change, for every subscriber: ledgerEvents through
// the ledger's Tail, sessionUpdates through one reader per watched session
// (live_session.go), inboxUpdates through one inbox reader (live_inbox.go),
// each woken by the process's change feed (ledger.Feed). What a slow
// subscriber misses meanwhile is caught up or, when that cannot be done,
// ends the subscription with SUBSCRIPTION_LAGGED. docs/subscriptions.md
// tells the whole story.

// streamEnd is why a subscription ended, for Streams to report.
type streamEnd struct {
	mu   sync.Mutex
	err  error
	sent bool
}

type streamEndKey struct{}

// Streams is a gqlgen extension that ends a subscription whose resolver
// stopped with an error with one last response carrying that error (through
// the error presenter, so it has extensions.code and, when retrying helps,
// extensions.retryable), on every transport. Without it the stream would
// just end, and the client could not tell a lagged subscriber from a
// finished one.
type Streams struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
	graphql.ResponseInterceptor
} = Streams{}

// ExtensionName names the extension.
func (Streams) ExtensionName() string { return "Streams" }

// Validate accepts any schema.
func (Streams) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation gives a subscription a place for its end reason.
func (Streams) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if oc := graphql.GetOperationContext(ctx); oc != nil && oc.Operation != nil && oc.Operation.Operation == ast.Subscription {
		ctx = context.WithValue(ctx, streamEndKey{}, &streamEnd{})
	}
	return next(ctx)
}

// InterceptResponse adds the end reason once the stream has ended.
func (Streams) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	end, _ := ctx.Value(streamEndKey{}).(*streamEnd)
	if resp != nil || end == nil {
		return resp
	}
	end.mu.Lock()
	defer end.mu.Unlock()
	if end.err == nil || end.sent {
		return nil
	}
	end.sent = true
	graphql.AddError(ctx, end.err)
	return &graphql.Response{Errors: graphql.GetErrors(ctx)}
}

// endStream records why the subscription of ctx ends.
func endStream(ctx context.Context, err error) {
	if end, _ := ctx.Value(streamEndKey{}).(*streamEnd); end != nil {
		end.mu.Lock()
		end.err = err
		end.mu.Unlock()
	}
}

// Why a subscription ends early.
var (
	errShuttingDown = fault.New(fault.Unavailable, "", "the server is shutting down; subscribe again")
	errNoFeed       = fault.New(fault.NotImplemented, "", "this process does not serve subscriptions")
)

func lagged(format string, args ...any) error {
	return fault.New(fault.SubscriptionLagged, "", "the subscription fell behind: "+format+"; subscribe again", args...)
}

type credentialKey struct{}

// WithCredential marks ctx as a stream's whose credential is watched:
// cred ends, with the reason as its cause (context.Cause), when the
// credential the stream was opened with is no longer good (a revoked
// token, changed policies). Each subscription of the stream then ends with
// that reason as its last response.
func WithCredential(ctx, cred context.Context) context.Context {
	return context.WithValue(ctx, credentialKey{}, cred)
}

// stream runs produce in a goroutine of its own, which ends the channel it
// returns when produce returns: on ctx's end quietly, on an error with the
// error as the stream's last response (Streams). produce's context also
// ends when the stream's credential does (WithCredential), and the stream
// then ends with the credential's reason. send blocks until the transport
// takes the value and reports false once produce's context has ended. A
// panic ends the stream with INTERNAL, never the process.
func stream[T any](ctx context.Context, r *Resolver, produce func(ctx context.Context, send func(T) bool) error) <-chan T {
	out := make(chan T)
	pctx, cancel := context.WithCancelCause(ctx)
	if cred, ok := ctx.Value(credentialKey{}).(context.Context); ok {
		stop := context.AfterFunc(cred, func() { cancel(context.Cause(cred)) })
		context.AfterFunc(pctx, func() { stop() })
	}
	go func() {
		defer close(out)
		defer cancel(nil)
		defer func() {
			if v := recover(); v != nil {
				r.Log.Error("panic in subscription", "panic", v, "stack", string(debug.Stack()))
				endStream(ctx, &fault.Error{Code: fault.Internal, Message: "internal error"})
			}
		}()
		send := func(v T) bool {
			select {
			case out <- v:
				return true
			case <-pctx.Done():
				return false
			}
		}
		err := produce(pctx, send)
		switch {
		case ctx.Err() != nil:
		case pctx.Err() != nil:
			endStream(ctx, context.Cause(pctx))
		case errors.Is(err, ledger.ErrFeedClosed):
			endStream(ctx, errShuttingDown)
		case err != nil:
			endStream(ctx, err)
		}
	}()
	return out
}

// ledgerEvents streams committed events after a position: replayed from the
// database, then followed live through the Tail, which reads by position,
// so no event is skipped however the commits interleave.
func (r *Resolver) ledgerEvents(ctx context.Context, after, typ *string) (<-chan *ledger.Event, error) {
	if r.Tail == nil {
		return nil, errNoFeed
	}
	if typ != nil && !ledger.TypeShaped(*typ) {
		// No event has such a type: following it would wait for ever.
		return nil, fault.New(fault.BadInput, "type", "%.60q is no event type: dot-separated names of letters, digits, _ and - (entry.inserted)", *typ)
	}
	pos := int64(-1)
	if after != nil && *after != "" {
		var err error
		if pos, err = positionCursor(*after); err != nil {
			return nil, err
		}
	}
	head, err := r.Tail.Acquire(ctx)
	if errors.Is(err, ledger.ErrFeedClosed) {
		return nil, errShuttingDown
	}
	if err != nil {
		return nil, err
	}
	if pos < 0 {
		pos = head
	}
	t := deref(typ)
	return stream(ctx, r, func(ctx context.Context, send func(*ledger.Event) bool) error {
		defer r.Tail.Release()
		for {
			evs, seen, err := r.Tail.Next(ctx, pos, t, DefaultPage)
			if err != nil {
				return err
			}
			for i := range evs {
				if !send(&evs[i]) {
					return nil
				}
			}
			pos = seen
		}
	}), nil
}

// positionCursor reads a ledger position given as Event.position (decimal)
// or as an events page's endCursor.
func positionCursor(s string) (int64, error) {
	v := s
	if raw, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		if p, ok := strings.CutPrefix(string(raw), "position:"); ok {
			v = p
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fault.New(fault.BadInput, "after", "after is a position (Event.position) or an events page's endCursor")
	}
	return n, nil
}

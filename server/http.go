// Package server wires the service: the HTTP/GraphQL front, the
// dispatcher and turn executor, and their shared database pool.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// Limits of the GraphQL endpoint.
const (
	MaxBodyBytes  = 4 << 20 // request body
	MaxComplexity = 200_000 // list fields weigh `first` times their children
	MaxDepth      = 15      // selection nesting
	MaxTokens     = 20_000  // parser token limit
)

// GraphQL returns the /graphql handler for the resolver.
func GraphQL(r *graph.Resolver, log *slog.Logger) http.Handler {
	cfg := graph.Config{Resolvers: r}
	cfg.Complexity = complexity()
	srv := handler.New(graph.NewExecutableSchema(cfg))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.SetParserTokenLimit(MaxTokens)
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(extension.FixedComplexityLimit(MaxComplexity))
	srv.Use(depthLimit{max: MaxDepth})
	srv.AroundFields(rejectNUL)
	srv.SetErrorPresenter(presenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.Error("panic in resolver", "panic", v, "stack", string(debug.Stack()))
		return &fault.Error{Code: fault.Internal, Message: "internal error"}
	})
	return WithLoadersAndLimits(r, srv)
}

// WithLoadersAndLimits applies the body limit and per-request loaders.
func WithLoadersAndLimits(r *graph.Resolver, h http.Handler) http.Handler {
	h = graph.WithLoaders(r.LedgerStore, h)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, MaxBodyBytes)
		h.ServeHTTP(w, req)
	})
}

// DevPrincipal marks every request as the loopback dev principal.
func DevPrincipal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), auth.Principal{ID: "dev", Dev: true})))
	})
}

// Mux returns the service's routes: GraphQL at /graphql, GraphiQL at /,
// a health check at /healthz.
func Mux(gql http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/graphql", gql)
	mux.Handle("GET /{$}", playground.Handler("actionsledger", "/graphql"))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

// presenter maps errors to GraphQL errors with a stable extensions.code and
// extensions.field; anything unexpected becomes INTERNAL without its text.
func presenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		if gerr.Extensions == nil {
			gerr.Extensions = map[string]any{}
		}
		if _, ok := gerr.Extensions["code"]; ok && fault.As(err) == nil {
			return gerr // gqlgen's own validation and parse errors
		}
		var mbe *http.MaxBytesError
		switch fe := fault.As(err); {
		case fe != nil:
			gerr.Message = fe.Error()
			gerr.Extensions["code"] = fe.Code
			field := fe.Field
			if field == "" {
				field = argName(err)
			}
			if field != "" {
				gerr.Extensions["field"] = field
			}
			if fe.Code == fault.Internal {
				log.Error("internal error", "err", err)
			}
		case errors.As(err, &mbe):
			gerr.Message = fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes)
			gerr.Extensions["code"] = fault.PayloadTooLarge
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			gerr.Message = "request cancelled or timed out"
			gerr.Extensions["code"] = "TIMEOUT"
		default:
			var ge *gqlerror.Error
			if errors.As(err, &ge) && ge.Extensions != nil && ge.Extensions["code"] != nil {
				return gerr
			}
			log.Error("internal error", "err", err, "path", gerr.Path.String())
			gerr.Message = "internal error"
			gerr.Extensions["code"] = fault.Internal
		}
		return gerr
	}
}

// argName extracts the argument name from gqlgen's argument path errors.
func argName(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) && len(ge.Path) > 0 {
		if s, ok := ge.Path[len(ge.Path)-1].(ast.PathName); ok {
			return string(s)
		}
	}
	return ""
}

// rejectNUL refuses string arguments holding NUL characters, which
// PostgreSQL text cannot store (HARD-PARTS 7).
func rejectNUL(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc != nil && fc.IsResolver {
		for name, v := range fc.Args {
			if s, ok := v.(string); ok && strings.IndexByte(s, 0) >= 0 {
				return nil, fault.New(fault.BadInput, name, "text may not contain the NUL character")
			}
			if s, ok := v.(*string); ok && s != nil && strings.IndexByte(*s, 0) >= 0 {
				return nil, fault.New(fault.BadInput, name, "text may not contain the NUL character")
			}
		}
	}
	return next(ctx)
}

// Timeouts for the HTTP server.
var (
	ReadHeaderTimeout = 10 * time.Second
	RequestTimeout    = 60 * time.Second
)

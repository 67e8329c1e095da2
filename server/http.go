// Package server wires the service: the HTTP/GraphQL front, the
// dispatcher and turn executor, and their shared database pool.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

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
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Limits of the GraphQL endpoint.
const (
	MaxBodyBytes  = 4 << 20 // request body
	MaxComplexity = 200_000 // list fields weigh `first` times their children
	MaxDepth      = 15      // selection nesting
	MaxTokens     = 20_000  // parser token limit
)

// Front chooses the optional parts of the HTTP front. Turn both off on a
// server whose schema should not be browsable.
type Front struct {
	// Introspection answers __schema and __type queries; off, an operation
	// selecting them is refused with INTROSPECTION_DISABLED.
	Introspection bool
	// GraphiQL serves the GraphiQL page at /; off, / is 404 Not Found.
	GraphiQL bool
}

// GraphQL returns the /graphql handler for the resolver.
func GraphQL(r *graph.Resolver, log *slog.Logger, front Front) http.Handler {
	cfg := graph.Config{Resolvers: r}
	cfg.Complexity = complexity()
	srv := handler.New(graph.NewExecutableSchema(cfg))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.SetParserTokenLimit(MaxTokens)
	srv.SetValidationRulesFn(validationRules)
	if front.Introspection {
		srv.Use(extension.Introspection{})
	} else {
		// gqlgen then refuses introspection fields one by one with an
		// uncoded error; refuse the whole operation up front with a code.
		srv.Use(noIntrospection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(extension.FixedComplexityLimit(MaxComplexity))
	srv.Use(depthLimit{max: MaxDepth})
	srv.AroundFields(authorize)
	srv.AroundFields(checkText)
	srv.SetErrorPresenter(presenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.Error("panic in resolver", "panic", v, "stack", string(debug.Stack()))
		return &fault.Error{Code: fault.Internal, Message: "internal error"}
	})
	return WithLoadersAndLimits(r, srv)
}

// WithLoadersAndLimits applies the body limit and per-request loaders. A
// POST body is read and checked here, before gqlgen's transport sees it, so
// that a body over MaxBodyBytes is refused with HTTP 413 and PAYLOAD_TOO_LARGE,
// and one that is not a GraphQL request (not JSON, or not an object with a
// string query) with HTTP 400 and BAD_USER_INPUT; gqlgen would report both
// without a code (as INTERNAL here) and echo the whole body in its message.
func WithLoadersAndLimits(r *graph.Resolver, h http.Handler) http.Handler {
	h = graph.WithLoaders(r.LedgerStore, h)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, MaxBodyBytes)
		if req.Method == http.MethodPost && req.Header.Get("Upgrade") == "" {
			if !readPost(w, req) {
				return
			}
		}
		h.ServeHTTP(w, req)
	})
}

// readPost reads and checks a POST body, leaving it readable again in req.
// It answers the request itself and returns false when the body is refused.
func readPost(w http.ResponseWriter, req *http.Request) bool {
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, fault.BadInput, "a POST request's Content-Type is application/json")
		return false
	}
	body, err := io.ReadAll(req.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fault.PayloadTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, fault.BadInput, "the request body could not be read")
		return false
	}
	var params graphql.RawParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&params); err != nil {
		writeError(w, http.StatusBadRequest, fault.BadInput,
			"the request body is not a GraphQL request: a JSON object with a string query and optional operationName, variables and extensions")
		return false
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// writeError answers with one GraphQL error carrying code.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(graphql.Response{Errors: gqlerror.List{{
		Message: message, Extensions: map[string]any{"code": code}}}})
}

// DevPrincipal marks every request as the loopback dev principal.
func DevPrincipal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), auth.Principal{ID: "dev", Dev: true})))
	})
}

// Mux returns the service's routes: GraphQL at /graphql, GraphiQL at /
// (when front.GraphiQL), a health check at /healthz.
func Mux(gql http.Handler, front Front) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/graphql", gql)
	if front.GraphiQL {
		mux.Handle("GET /{$}", playground.Handler("actionsledger", "/graphql"))
	}
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
			if ge, ok := err.(*gqlerror.Error); ok && ge.Unwrap() == nil && len(ge.Path) == 0 {
				// gqlgen's own request-level refusals without a code, such as
				// malformed persisted-query extensions: the client's fault.
				gerr.Extensions["code"] = fault.BadInput
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

// checkText refuses arguments holding text PostgreSQL cannot store
// (HARD-PARTS 7): a NUL character or invalid UTF-8 in any string, at any
// depth of an input object (BAD_USER_INPUT), and JSON values inside input
// objects that jsonvalue.Check refuses (INVALID_JSON, PAYLOAD_TOO_LARGE).
// JSON arguments at the top level are left to the store that writes them,
// which checks them with the same rules. Invalid UTF-8 reaches arguments
// only undecoded (a GET query string): JSON bodies replace it with U+FFFD.
func checkText(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc != nil && fc.IsResolver {
		names := make([]string, 0, len(fc.Args))
		for name := range fc.Args {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if err := checkArg(reflect.ValueOf(fc.Args[name]), name, true); err != nil {
				return nil, err
			}
		}
	}
	return next(ctx)
}

var jsonValueType = reflect.TypeFor[jsonvalue.Value]()

// checkArg walks an argument's value; path names it as the client wrote it
// (input.triggers[1].event), using the json names of struct fields, which
// match the schema's.
func checkArg(v reflect.Value, path string, top bool) error {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == jsonValueType {
		if top || v.Len() == 0 {
			return nil
		}
		return jsonvalue.Check(v.Bytes(), path)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkArg(v.Elem(), path, top)
	case reflect.String:
		s := v.String()
		if strings.IndexByte(s, 0) >= 0 {
			return fault.New(fault.BadInput, path, "text may not contain the NUL character")
		}
		if !utf8.ValidString(s) {
			return fault.New(fault.BadInput, path, "text must be valid UTF-8")
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes such as a UUID
		}
		for i := range v.Len() {
			if err := checkArg(v.Index(i), fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return err
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			if err := checkArg(k, path, false); err != nil {
				return err
			}
			if err := checkArg(v.MapIndex(k), fmt.Sprintf("%s.%v", path, k), false); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if err := checkArg(v.Field(i), path+"."+name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// Timeouts for the HTTP server.
var (
	ReadHeaderTimeout = 10 * time.Second
	RequestTimeout    = 60 * time.Second
)

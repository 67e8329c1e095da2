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
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/text"
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
	// GraphiQL serves the GraphiQL page at /graphiql (see
	// mountGraphiQL); off, those paths are 404 Not Found.
	GraphiQL bool
	// GraphiQLFiles is the built GraphiQL page (index.html, assets/); nil
	// means the one embedded in the binary, console.GraphiQL().
	GraphiQLFiles fs.FS
	// Console serves the web console under /console/ (see mountConsole);
	// off, those paths are 404 Not Found. / redirects to the console, or
	// to GraphiQL when only GraphiQL is on.
	Console bool
	// ConsoleFiles is the built console; nil means the one embedded in
	// the binary, console.Console().
	ConsoleFiles fs.FS
	// Limits gives MaxMutationFields and RequestTimeout (the rest of
	// Limits is for Serve); zero fields take DefaultLimits.
	Limits Limits
}

// MaxValidationSteps bounds the work of validating one GraphQL document
// (see validationBudget); past it the operation is refused with
// COMPLEXITY_LIMIT_EXCEEDED before it is validated.
const MaxValidationSteps = 50_000

// GraphQL returns the /graphql handler for the resolver.
func GraphQL(r *graph.Resolver, log *slog.Logger, front Front) http.Handler {
	lim := front.Limits.withDefaults()
	cfg := graph.Config{Resolvers: r}
	cfg.Complexity = complexity()
	srv := handler.New(graph.NewExecutableSchema(cfg))
	// gqlgen picks the first transport that takes a request: the streams
	// (a WebSocket upgrade is a GET, an SSE request a JSON POST) first.
	srv.AddTransport(transport.Options{})
	srv.AddTransport(wsTransport(log))
	srv.AddTransport(transport.SSE{KeepAlivePingInterval: ssePingInterval})
	srv.AddTransport(overHTTP{getQueries{}})
	srv.AddTransport(overHTTP{transport.POST{}})
	cache := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(cache)
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
	// After the persisted query is looked up, before gqlgen validates it.
	srv.Use(validationBudget{cache: cache, tokens: MaxTokens, max: MaxValidationSteps})
	srv.Use(&complexityLimit{max: MaxComplexity})
	srv.Use(depthLimit{max: MaxDepth})
	srv.Use(&mutationLimit{max: lim.MaxMutationFields})
	srv.Use(&strictVariables{})
	srv.Use(operationNames{})
	srv.Use(streamGuard{})
	srv.Use(graph.Streams{})
	srv.Use(graph.Loaders{Resolver: r})
	srv.AroundFields(authorize)
	srv.AroundFields(checkText)
	srv.SetErrorPresenter(presenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.Error("panic in resolver", "panic", v, "stack", string(debug.Stack()))
		return &fault.Error{Code: fault.Internal, Message: "internal error"}
	})
	return WithLoadersAndLimits(r, srv, lim)
}

// WithLoadersAndLimits applies the body limit, per-request loaders and
// lim.RequestTimeout, and answers what gqlgen's transports would refuse
// without extensions.code (issue 10 item 10). A POST body is read and
// checked here, before gqlgen's transport sees it, so that a body over
// MaxBodyBytes is refused with HTTP 413 and PAYLOAD_TOO_LARGE, one that is
// not a GraphQL request (not JSON, or not an object with a string query)
// with HTTP 400 and BAD_USER_INPUT, and one not received within the
// server's ReadTimeout with HTTP 408 and TIMEOUT. A GET's variables and
// extensions must be JSON (HTTP 400, BAD_USER_INPUT); methods other than
// GET, POST, OPTIONS and HEAD, and upgrades to anything but a WebSocket,
// are refused with HTTP 405 and METHOD_NOT_ALLOWED.
//
// The request timeout starts once the body is read: a body read that
// fails cancels the request's context, and http.TimeoutHandler would then
// answer an empty 503 in place of the 408. Past the timeout the client gets
// HTTP 503 with TIMEOUT (retryable) and the context of the handler's work
// is cancelled, which stops its database calls.
//
// Streams (a WebSocket upgrade, a POST accepting text/event-stream) take a
// path of their own around the request timeout (see stream.go); loaders
// are then installed per response by graph.Loaders.
func WithLoadersAndLimits(r *graph.Resolver, h http.Handler, lim Limits) http.Handler {
	lim = lim.withDefaults()
	live := &streams{max: int64(lim.MaxStreams)}
	timed := http.TimeoutHandler(r.WithLoaders(h), lim.RequestTimeout, timeoutBody)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, MaxBodyBytes)
		switch {
		case isWebSocket(req) && req.Method == http.MethodGet:
			if checkHandshake(w, req) {
				live.serve(w, req, h, lim)
			}
			return
		case req.Header.Get("Upgrade") != "":
			w.Header().Set("Allow", allowed)
			writeError(w, http.StatusMethodNotAllowed, fault.MethodNotAllowed,
				"this server upgrades connections only to a WebSocket (graphql-transport-ws); send queries with GET or POST, mutations with POST")
			return
		case req.Method == http.MethodPost:
			if !readPost(w, req) {
				return
			}
			if isEventStream(req) {
				live.serve(w, req, h, lim)
				return
			}
		case req.Method == http.MethodGet:
			if !checkGet(w, req) {
				return
			}
		case req.Method == http.MethodOptions:
			timed.ServeHTTP(w, req) // no body
			return
		default:
			w.Header().Set("Allow", allowed)
			writeError(w, http.StatusMethodNotAllowed, fault.MethodNotAllowed,
				fmt.Sprintf("method %s is not allowed on /graphql: send queries with GET or POST, mutations with POST", req.Method))
			return
		}
		// TimeoutHandler writes its answer without a Content-Type; gqlgen
		// replaces this one with its own.
		w.Header().Set("Content-Type", "application/json")
		timed.ServeHTTP(timeoutCode{w}, req)
	})
}

// timeoutBody is what a request past RequestTimeout is answered.
const timeoutBody = `{"errors":[{"message":"request timed out","extensions":{"code":"` + fault.Timeout + `","retryable":true}}]}`

// allowed are the methods /graphql answers.
const allowed = "GET, POST, OPTIONS"

// readPost reads and checks a POST body, leaving it readable again in req.
// It answers the request itself and returns false when the body is refused.
func readPost(w http.ResponseWriter, req *http.Request) bool {
	mt, mp, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, fault.BadInput, "a POST request's Content-Type is application/json")
		return false
	}
	if cs, ok := mp["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		// The body is read as UTF-8 whatever it says: refuse another.
		writeError(w, http.StatusUnsupportedMediaType, fault.BadInput,
			fmt.Sprintf("a POST request's body is UTF-8 JSON (Content-Type application/json; charset=utf-8), not %s", cs))
		return false
	}
	body, err := io.ReadAll(req.Body)
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fault.PayloadTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
		return false
	case errors.As(err, &ne) && ne.Timeout():
		writeError(w, http.StatusRequestTimeout, fault.Timeout, "the request body was not received in time")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, fault.BadInput, "the request body could not be read")
		return false
	}
	if field := nonUnicode(body); field != "" {
		writeFieldError(w, http.StatusBadRequest, fault.BadInput, field,
			field+" holds text that is not Unicode: an invalid UTF-8 byte or an unpaired surrogate escape (\\ud800-\\udfff)")
		return false
	}
	params, err := decodePost(body)
	var se *json.SyntaxError
	var dup duplicateParam
	switch {
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), maxDepthMsg):
		writeError(w, http.StatusBadRequest, fault.BadInput, fmt.Sprintf(
			"the request body nests deeper than %d levels, which is not read; a JSON value may nest at most %d", bodyMaxDepth, jsonvalue.MaxDepth))
		return false
	case errors.As(err, &dup):
		writeFieldError(w, http.StatusBadRequest, fault.BadInput, string(dup),
			fmt.Sprintf("the request body names %s more than once; a GraphQL request names each parameter once", string(dup)))
		return false
	case errors.Is(err, errTrailingData):
		writeError(w, http.StatusBadRequest, fault.BadInput,
			"the request body holds more after its JSON object; send one GraphQL request per body")
		return false
	case err != nil || !params.variablesObject() || !params.hasQuery():
		writeError(w, http.StatusBadRequest, fault.BadInput,
			"the request body is not a GraphQL request: a JSON object with a string query and optional operationName, variables and extensions")
		return false
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// maxDepthMsg ends encoding/json's SyntaxError for a body nested deeper
// than bodyMaxDepth, the decoder's fixed bound ("invalid character '['
// exceeded max depth").
const (
	maxDepthMsg  = "exceeded max depth"
	bodyMaxDepth = 10000
)

// postParams is a POST body's shape as gqlgen's transport decodes it
// (graphql.RawParams), with the variables kept as their JSON text: the
// transport decodes them again, and a bulk write's 1,000 records decoded
// twice were a measurable share of its CPU (issue 14).
type postParams struct {
	Query         string
	hasQueryParam bool // query was given, even as "" or null
	OperationName string
	Variables     json.RawMessage
	Extensions    map[string]any
}

// duplicateParam is decodePost's error for a parameter named twice.
type duplicateParam string

func (d duplicateParam) Error() string { return "parameter " + string(d) + " named twice" }

// errTrailingData is decodePost's error for data after the body's object.
var errTrailingData = errors.New("data after the request's JSON object")

// decodePost reads a POST body in one pass: a JSON object whose query and
// operationName are strings or null, variables any value (checked by
// variablesObject) and extensions an object or null; other members are
// skipped, as gqlgen skips them. Names match ignoring case, as gqlgen
// matches them. It refuses a parameter named twice
// (duplicateParam: encoding/json would keep the last, and a proxy reading
// the first would see another request) and anything after the object
// (errTrailingData: encoding/json would read the first object and run it).
func decodePost(body []byte) (postParams, error) {
	var p postParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return p, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return p, err
		}
		name, _ := t.(string)
		// encoding/json, and so gqlgen's transport, matches member names
		// to fields ignoring case (Unicode folding): so does this.
		for _, known := range postParamNames {
			if strings.EqualFold(name, known) {
				name = known
				break
			}
		}
		if seen[name] {
			return p, duplicateParam(name)
		}
		seen[name] = true
		var target any
		switch name {
		case "query":
			p.hasQueryParam = true
			target = &p.Query
		case "operationName":
			target = &p.OperationName
		case "variables":
			target = &p.Variables
		case "extensions":
			target = &p.Extensions
		default:
			target = new(json.RawMessage)
		}
		if err := dec.Decode(target); err != nil {
			return p, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return p, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return p, errTrailingData
	}
	return p, nil
}

// postParamNames are the members of a GraphQL request body.
var postParamNames = [...]string{"query", "operationName", "variables", "extensions"}

// variablesObject reports whether the variables are absent, null or an
// object, as graphql.RawParams's map takes them.
func (p postParams) variablesObject() bool {
	v := bytes.TrimSpace(p.Variables)
	return len(v) == 0 || string(v) == "null" || v[0] == '{'
}

// hasQuery reports whether a request body names its document: a query
// parameter (even an empty one, which fails as GraphQL), or a persisted
// query's hash in extensions. A body with neither is not a GraphQL request
// (HTTP 400, as GraphQL over HTTP asks of invalid parameters).
func (p postParams) hasQuery() bool {
	return p.hasQueryParam || p.Extensions["persistedQuery"] != nil
}

// checkGet checks what gqlgen's GET transport would refuse without a code:
// a malformed query string, variables or extensions that are not JSON.
func checkGet(w http.ResponseWriter, req *http.Request) bool {
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.BadInput, "the URL's query string is malformed")
		return false
	}
	for _, name := range []string{"variables", "extensions"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			writeError(w, http.StatusBadRequest, fault.BadInput, fmt.Sprintf("the %s parameter is not a JSON object", name))
			return false
		}
		if !jsonText([]byte(v)) {
			writeFieldError(w, http.StatusBadRequest, fault.BadInput, name,
				name+" holds text that is not Unicode: an unpaired surrogate escape (\\ud800-\\udfff)")
			return false
		}
	}
	query := q.Get("query")
	if query == "" && !strings.Contains(q.Get("extensions"), "persistedQuery") {
		writeFieldError(w, http.StatusBadRequest, fault.BadInput, "query",
			"a GET request names its operation in the query parameter (or a persisted query's hash in extensions)")
		return false
	}
	if utf8.ValidString(query) && !graphQLText(query) { // invalid bytes: refused per argument
		writeFieldError(w, http.StatusBadRequest, fault.BadInput, "query",
			"query holds text that is not Unicode: an unpaired surrogate escape (\\ud800-\\udfff) in a string")
		return false
	}
	return true
}

// getQueries is gqlgen's GET transport refusing operations other than
// queries, before they run, with HTTP 405 and METHOD_NOT_ALLOWED (gqlgen's
// own refusal is HTTP 406 without a code). It checks after gqlgen has
// parsed and validated the operation, so an operation named by a persisted
// query hash is checked too.
type getQueries struct{ transport.GET }

func (t getQueries) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	refused := new(bool)
	t.GET.Do(refusedWriter{ResponseWriter: w, refused: refused}, r, queriesOnly{GraphExecutor: exec, refused: refused})
}

// queriesOnly refuses operations other than queries after creating their
// operation context, and records that it did.
type queriesOnly struct {
	graphql.GraphExecutor
	refused *bool
}

func (e queriesOnly) CreateOperationContext(ctx context.Context, p *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	oc, errs := e.GraphExecutor.CreateOperationContext(ctx, p)
	if len(errs) == 0 && oc.Operation != nil && oc.Operation.Operation != ast.Query {
		*e.refused = true
		return oc, gqlerror.List{limitError(fault.MethodNotAllowed,
			"a %s must be sent with POST; GET carries queries only", oc.Operation.Operation)}
	}
	return oc, errs
}

// refusedWriter answers HTTP 405 with Allow: POST once queriesOnly refused.
type refusedWriter struct {
	http.ResponseWriter
	refused *bool
}

func (w refusedWriter) WriteHeader(code int) {
	if *w.refused {
		w.Header().Set("Allow", http.MethodPost)
		code = http.StatusMethodNotAllowed
	}
	w.ResponseWriter.WriteHeader(code)
}

// writeError answers with one GraphQL error carrying code, and
// extensions.retryable when fault.Retryable(code).
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeFieldError(w, status, code, "", message)
}

// writeFieldError is writeError naming the part of the request at fault
// in extensions.field ("" for none).
func writeFieldError(w http.ResponseWriter, status int, code, field, message string) {
	if n, ok := w.(codeNoter); ok {
		n.noteCode(code) // for the access log
	}
	ext := map[string]any{"code": code}
	if field != "" {
		ext["field"] = field
	}
	if fault.Retryable(code) {
		ext["retryable"] = true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// No data entry: nothing ran (docs/errors.md).
	_ = json.NewEncoder(w).Encode(struct {
		Errors gqlerror.List `json:"errors"`
	}{gqlerror.List{{Message: text.Cut(message, MaxErrorMessage), Extensions: ext}}})
}

// DevPrincipal marks every request as the loopback dev principal.
func DevPrincipal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), auth.Principal{ID: "dev", Dev: true})))
	})
}

// Mux returns the service's routes: GraphQL at /graphql, GraphiQL at
// /graphiql and / (when front.GraphiQL; its files under /graphiql/assets/),
// a health check at /healthz. Any other path (or method on those routes)
// is answered HTTP 404 with code NOT_FOUND.
func Mux(gql http.Handler, front Front) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/graphql", gql)
	if front.GraphiQL {
		mountGraphiQL(mux, front.GraphiQLFiles)
	}
	if front.Console {
		mountConsole(mux, front.ConsoleFiles)
	}
	switch {
	case front.Console:
		mux.HandleFunc("GET /{$}", redirectTo(ConsolePath))
	case front.GraphiQL:
		mux.HandleFunc("GET /{$}", redirectTo(GraphiQLPath))
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, fault.NotFound, "no such route: GraphQL is served at /graphql")
	})
	return mux
}

// healthz answers 200 "ok" while the process serves HTTP.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// present maps errors to GraphQL errors with a stable extensions.code and
// extensions.field; anything unexpected becomes INTERNAL without its text.
// A request that ran out of time is TIMEOUT and a database that cannot be
// reached UNAVAILABLE (see unavailable), both with extensions.retryable
// true (issue 10 item 7).
func present(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		if gerr.Extensions == nil {
			gerr.Extensions = map[string]any{}
		}
		if _, ok := gerr.Extensions["code"]; ok && fault.As(err) == nil {
			return gerr // gqlgen's own validation and parse errors, our limits
		}
		var mbe *http.MaxBytesError
		fe := fault.As(err)
		switch {
		case fe != nil && fe.Code != fault.Internal:
			gerr.Message = fe.Error()
			gerr.Extensions["code"] = fe.Code
			field := fe.Field
			if field == "" {
				field = argName(err)
			}
			if field != "" {
				gerr.Extensions["field"] = field
			}
		case errors.As(err, &mbe):
			gerr.Message = fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes)
			gerr.Extensions["code"] = fault.PayloadTooLarge
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			gerr.Message = "request cancelled or timed out"
			gerr.Extensions["code"] = fault.Timeout
		case unavailable(err):
			log.Warn("database unavailable", "err", err, "path", gerr.Path.String())
			gerr.Message = "the database is unavailable; retry later (a write may have committed: retry it with its idempotency key)"
			gerr.Extensions["code"] = fault.Unavailable
		case fe != nil:
			log.Error("internal error", "err", err)
			gerr.Message = fe.Error()
			gerr.Extensions["code"] = fe.Code
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
		if code, _ := gerr.Extensions["code"].(string); fault.Retryable(code) {
			gerr.Extensions["retryable"] = true
		}
		return gerr
	}
}

// presenter maps errors (see present) and tells the request's access log
// the code of the first.
func presenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	present := present(log)
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := present(ctx, err)
		variableField(gerr)
		literalField(ctx, gerr)
		if gerr.Message == "operation  not found" { // gqlgen's, for several operations and no operationName
			gerr.Message = "the document has several operations: name the one to run in operationName"
		}
		// Messages may quote the request (a name of a megabyte): keep the
		// answer small.
		gerr.Message = text.Cut(gerr.Message, MaxErrorMessage)
		code, _ := gerr.Extensions["code"].(string)
		infoOf(ctx).noteCode(code)
		return gerr
	}
}

// MaxErrorMessage is the longest error message the server writes, in
// bytes; longer ones are cut on a character boundary.
const MaxErrorMessage = 2000

// variableField names the variable of gqlparser's coercion errors (path
// [variable NAME ...]) in extensions.field as variables.NAME..., the way
// strictVariables names its own.
func variableField(gerr *gqlerror.Error) {
	if len(gerr.Path) < 2 || gerr.Path[0] != ast.PathName("variable") {
		return
	}
	if _, ok := gerr.Extensions["field"]; ok {
		return
	}
	var b strings.Builder
	b.WriteString("variables")
	for _, p := range gerr.Path[1:] {
		switch x := p.(type) {
		case ast.PathName:
			b.WriteString("." + string(x))
		case ast.PathIndex:
			fmt.Fprintf(&b, "[%d]", int(x))
		}
	}
	if gerr.Extensions == nil {
		gerr.Extensions = map[string]any{}
	}
	gerr.Extensions["field"] = b.String()
	// gqlparser's message for a number that does not convert shows the
	// failed conversion's zero ("cannot use value 0 as Int" for 1.5).
	if name, ok := gerr.Path[1].(ast.PathName); ok && len(gerr.Path) == 2 && strings.HasPrefix(gerr.Message, "cannot use value ") {
		switch {
		case strings.HasSuffix(gerr.Message, " as Int"):
			gerr.Message = fmt.Sprintf("variable %s: an Int takes a whole number within 32 bits", name)
		case strings.HasSuffix(gerr.Message, " as Float"):
			gerr.Message = fmt.Sprintf("variable %s: a Float takes a number within the range of a float64", name)
		}
	}
}

// requiredArgument and requiredInputField take the name out of
// gqlparser's messages for a missing argument and a missing field of an
// input object.
var (
	requiredArgument   = regexp.MustCompile(`^Field "[^"]*" argument "([^"]+)" of type "[^"]*" is required`)
	requiredInputField = regexp.MustCompile(`^Field "[^".]*\.([^"]+)" of required type "[^"]*" was not provided`)
)

// literalField names, in extensions.field, the argument of gqlparser's
// validation errors about a value written in the document, which carry
// only its position: the argument's name and the path inside an input
// object or a list (input.triggers[0].event), as resolvers and
// variableField name them; a missing argument by its name, a missing
// input field by its path.
func literalField(ctx context.Context, gerr *gqlerror.Error) {
	if _, ok := gerr.Extensions["field"]; ok {
		return
	}
	set := func(field string) {
		if gerr.Extensions == nil {
			gerr.Extensions = map[string]any{}
		}
		gerr.Extensions["field"] = field
	}
	switch gerr.Rule {
	case "ProvidedRequiredArguments":
		if m := requiredArgument.FindStringSubmatch(gerr.Message); m != nil {
			set(m[1])
		}
		return
	case "ValuesOfCorrectType":
	default:
		return
	}
	if len(gerr.Locations) == 0 || !graphql.HasOperationContext(ctx) {
		return
	}
	oc := graphql.GetOperationContext(ctx)
	doc := oc.Doc
	if doc == nil {
		// Validation failed, so gqlgen kept no document: parse it again
		// (an error's path only, and the request passed the token limit).
		var err error
		if doc, err = parser.ParseQuery(&ast.Source{Input: oc.RawQuery}); err != nil {
			return
		}
	}
	at := gerr.Locations[0]
	var path string
	var inValue func(v *ast.Value, p string) bool
	inValue = func(v *ast.Value, p string) bool {
		if v == nil {
			return false
		}
		if v.Position != nil && v.Position.Line == at.Line && v.Position.Column == at.Column {
			path = p
			return true
		}
		for i, c := range v.Children {
			cp := p + "." + c.Name
			if v.Kind == ast.ListValue {
				cp = fmt.Sprintf("%s[%d]", p, i)
			}
			if inValue(c.Value, cp) {
				return true
			}
		}
		return false
	}
	var inSet func(ss ast.SelectionSet) bool
	inSet = func(ss ast.SelectionSet) bool {
		for _, sel := range ss {
			switch x := sel.(type) {
			case *ast.Field:
				for _, a := range x.Arguments {
					if inValue(a.Value, a.Name) {
						return true
					}
				}
				if inSet(x.SelectionSet) {
					return true
				}
			case *ast.InlineFragment:
				if inSet(x.SelectionSet) {
					return true
				}
			}
		}
		return false
	}
	sets := make([]ast.SelectionSet, 0, len(doc.Operations)+len(doc.Fragments))
	for _, op := range doc.Operations {
		sets = append(sets, op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		sets = append(sets, f.SelectionSet)
	}
	if !slices.ContainsFunc(sets, inSet) {
		return
	}
	if m := requiredInputField.FindStringSubmatch(gerr.Message); m != nil {
		path += "." + m[1]
	}
	set(path)
}

// unavailable reports whether err says the database could not be reached
// or lost the connection, so that the same request may succeed later:
// connecting failed (pgconn.ConnectError), the connection broke or timed
// out (pgconn's connection-level errors, which all carry SafeToRetry, net
// errors, and the bare io.EOF or io.ErrUnexpectedEOF pgconn returns when a
// connection ends mid-message), the server refused or ended the session
// (SQLSTATE class 08, 57P01-57P03 as it shuts down, restarts or starts up,
// 53300 too many connections), or the pool is closed.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch c := pe.Code; {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var conn interface{ SafeToRetry() bool }
	return errors.As(err, &ce) || errors.As(err, &conn) || errors.As(err, &ne) ||
		pgconn.Timeout(err) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
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
		path := make(argPath, 0, 8)
		for _, name := range names {
			path = append(path[:0], argStep{name: name})
			if err := checkArg(reflect.ValueOf(fc.Args[name]), &path, true); err != nil {
				return nil, err
			}
		}
	}
	return next(ctx)
}

var jsonValueType = reflect.TypeFor[jsonvalue.Value]()

// argPath names the value checkArg is at, inside an argument, as the
// client wrote it (input.triggers[1].event): a stack of steps, pushed and
// popped as the walk goes, spelled out only for an error, so that a bulk
// write's hundreds of records cost no string formatting or allocation
// (issue 14).
type argPath []argStep

// argStep is one step of an argPath: a field's or the argument's name, a
// list index (name empty, key nil), or a map's key.
type argStep struct {
	name  string
	index int
	key   any
}

func (p argPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.key != nil:
			fmt.Fprintf(&b, ".%v", s.key)
		case s.name == "":
			fmt.Fprintf(&b, "[%d]", s.index)
		case i == 0:
			b.WriteString(s.name)
		default:
			b.WriteByte('.')
			b.WriteString(s.name)
		}
	}
	return b.String()
}

// checkArg walks an argument's value; path names it, using the json names
// of struct fields, which match the schema's.
func checkArg(v reflect.Value, path *argPath, top bool) error {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == jsonValueType {
		if top || v.Len() == 0 {
			return nil
		}
		return jsonvalue.Check(v.Bytes(), path.String())
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
			return fault.New(fault.BadInput, path.String(), "text may not contain the NUL character")
		}
		if !utf8.ValidString(s) {
			return fault.New(fault.BadInput, path.String(), "text must be valid UTF-8")
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes such as a UUID
		}
		for i := range v.Len() {
			if err := path.in(argStep{index: i}, func() error { return checkArg(v.Index(i), path, false) }); err != nil {
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
			if err := path.in(argStep{key: k.Interface()}, func() error { return checkArg(v.MapIndex(k), path, false) }); err != nil {
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
			if err := path.in(argStep{name: name}, func() error { return checkArg(v.Field(i), path, false) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// in runs check with step pushed on the path.
func (p *argPath) in(step argStep, check func() error) error {
	*p = append(*p, step)
	err := check()
	*p = (*p)[:len(*p)-1]
	return err
}

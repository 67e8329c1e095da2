package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/schedule"
)

// requestInfo is what the layers of one request learn about it for its
// access log line, metrics and span (issue 12): the GraphQL operation's
// name and type, and the code of its first error. The presenter may write
// it from the goroutine http.TimeoutHandler runs the request in while the
// access log reads it, hence the lock.
type requestInfo struct {
	mu        sync.Mutex
	operation string // as the client named it; "" for none
	opType    string // query, mutation, subscription; "" before parsing
	code      string // the first error's extensions.code; "" for none
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return ri
}

// noteCode records code as the request's first error code, unless one was
// recorded before.
func (ri *requestInfo) noteCode(code string) {
	if ri == nil || code == "" {
		return
	}
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.code == "" {
		ri.code = code
	}
}

func (ri *requestInfo) noteOperation(name, typ string) {
	if ri == nil {
		return
	}
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if name != "" {
		ri.operation = name
	}
	if typ != "" {
		ri.opType = typ
	}
}

func (ri *requestInfo) read() (operation, opType, code string) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	return ri.operation, ri.opType, ri.code
}

// codeNoter is a ResponseWriter that takes the code of an error writeError
// answers (the access log's recorder).
type codeNoter interface{ noteCode(code string) }

// recorder captures a response's status for the access log and passes
// everything else through, Flush and Hijack included (streaming transports).
type recorder struct {
	http.ResponseWriter
	info   *requestInfo
	status int
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *recorder) noteCode(code string) { w.info.noteCode(code) }

// Flush passes a streaming response's flush on.
func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes a connection upgrade on.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("server: the connection cannot be hijacked")
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// quietPaths are probed by machines every few seconds; their access lines
// are logged at debug.
var quietPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// AccessLog logs one line per request (issue 12): method, path, GraphQL
// operation name, the code of the first error ("ok" for none), HTTP status
// and duration; at info, or at debug for /healthz, /readyz and /metrics.
// It never logs headers, bodies or variables (tokens and inputs stay out
// of the log). A request refused without a GraphQL error code gets
// "HTTP_<status>" as its code.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		ri := &requestInfo{}
		rec := &recorder{ResponseWriter: w, info: ri}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri)))
		level := slog.LevelInfo
		if quietPaths[r.URL.Path] {
			level = slog.LevelDebug
		}
		if !log.Enabled(r.Context(), level) {
			return
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		op, _, code := ri.read()
		log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "operation", op,
			"code", outcomeCode(code, status), "status", status, "duration_ms", ms(time.Since(began)))
	})
}

// outcomeCode is a request's code for logs and metrics: its first error's
// code, "ok" for none, "HTTP_<status>" for a failure without one.
func outcomeCode(code string, status int) string {
	switch {
	case code != "":
		return code
	case status >= 400:
		return "HTTP_" + strconv.Itoa(status)
	}
	return "ok"
}

// ObserveGraphQL wraps the /graphql handler (issue 12): a span per request,
// the root of its trace unless the request carries a W3C traceparent, named
// "<type> <operation>" once the operation is known ("graphql" when it never
// parsed), and actionsledger_graphql_requests_total and
// actionsledger_graphql_request_duration_seconds. The span is in the
// context of everything the request does synchronously: resolvers, tool
// calls, database queries. t and m may be nil.
func ObserveGraphQL(t trace.Tracer, m *observe.Metrics, next http.Handler) http.Handler {
	if t == nil {
		t = observe.Tracer(nil)
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		ctx := r.Context()
		ri := infoOf(ctx)
		if ri == nil { // not behind AccessLog
			ri = &requestInfo{}
			ctx = context.WithValue(ctx, requestInfoKey{}, ri)
		}
		rec, ok := w.(*recorder)
		if !ok {
			rec = &recorder{ResponseWriter: w, info: ri}
		}
		ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span := t.Start(ctx, "graphql", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		next.ServeHTTP(rec, r.WithContext(ctx))
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		op, typ, code := ri.read()
		code = outcomeCode(code, status)
		m.GraphQLRequest(op, code, time.Since(began))
		if span.IsRecording() {
			if typ != "" {
				span.SetName(typ + " " + op)
				span.SetAttributes(attribute.String("graphql.operation.type", typ))
			}
			span.SetAttributes(attribute.String("graphql.operation.name", op),
				attribute.Int("http.response.status_code", status), observe.ErrorCode.String(code))
			if code != "ok" {
				span.SetStatus(codes.Error, code)
			}
		}
		span.End()
	})
}

// operationNames is a gqlgen extension that tells the request's
// requestInfo the operation's name and type: the operationName parameter
// first, then the operation the document selected.
type operationNames struct{}

var (
	_ graphql.OperationParameterMutator = operationNames{}
	_ graphql.OperationContextMutator   = operationNames{}
)

func (operationNames) ExtensionName() string                   { return "OperationNames" }
func (operationNames) Validate(graphql.ExecutableSchema) error { return nil }
func (operationNames) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	infoOf(ctx).noteOperation(p.OperationName, "")
	return nil
}

func (operationNames) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation != nil {
		infoOf(ctx).noteOperation(oc.Operation.Name, string(oc.Operation.Operation))
	}
	return nil
}

// noteRefusedOperation names the operation of a request refused before it
// ran (gqlgen names only operations that validate): it parses the document
// again, without validating it, within the parser's token limit.
func noteRefusedOperation(ctx context.Context, p *graphql.RawParams) {
	ri := infoOf(ctx)
	if ri == nil || p.Query == "" {
		return
	}
	if op, typ, _ := ri.read(); op != "" && typ != "" {
		return
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, MaxTokens)
	if err != nil {
		return
	}
	if op := doc.Operations.ForName(p.OperationName); op != nil {
		ri.noteOperation(op.Name, string(op.Operation))
	}
}

// timeoutCode notes TIMEOUT when http.TimeoutHandler answers timeoutBody.
type timeoutCode struct{ http.ResponseWriter }

func (w timeoutCode) Write(b []byte) (int, error) {
	if len(b) == len(timeoutBody) && string(b) == timeoutBody {
		if n, ok := w.ResponseWriter.(codeNoter); ok {
			n.noteCode(fault.Timeout)
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w timeoutCode) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Readiness checks what /readyz reports (issue 12).
type Readiness struct {
	// Ping reaches the database (with the check's short timeout).
	Ping func(ctx context.Context) error
	// Versions returns the schema version applied and the newest embedded.
	Versions func(ctx context.Context) (current, latest int64, err error)
	// Alive returns when the dispatcher last completed a round; MaxQuiet
	// is how long ago that may be.
	Alive    func() time.Time
	MaxQuiet time.Duration
	// Timeout bounds each database check (ReadyTimeout when 0).
	Timeout time.Duration
}

// ReadyTimeout bounds each database check of /readyz.
const ReadyTimeout = 2 * time.Second

// check is one line of /readyz's answer.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Handler answers /readyz: HTTP 200 when every check passes, 503 when one
// fails, with {"ready": bool, "checks": [{"name", "ok", "detail"}]}; the
// checks are database (reachable), migrations (the database's schema
// version is the newest this binary embeds) and dispatcher (it completed a
// round within MaxQuiet); "tzdata" names the release of the embedded
// timezone database that clocks use.
func (rd Readiness) Handler() http.Handler {
	timeout := rd.Timeout
	if timeout <= 0 {
		timeout = ReadyTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		var checks []check
		db := check{Name: "database", OK: true}
		if err := rd.Ping(ctx); err != nil {
			db.OK, db.Detail = false, "unreachable: "+errText(err)
		}
		checks = append(checks, db)
		mig := check{Name: "migrations", OK: db.OK}
		if !db.OK {
			mig.Detail = "not checked: the database is unreachable"
		} else if cur, latest, err := rd.Versions(ctx); err != nil {
			mig.OK, mig.Detail = false, "unknown: "+errText(err)
		} else if cur != latest {
			mig.OK, mig.Detail = false, fmt.Sprintf("schema version %d, this binary's is %d", cur, latest)
		} else {
			mig.Detail = fmt.Sprintf("schema version %d", cur)
		}
		checks = append(checks, mig)
		disp := check{Name: "dispatcher", OK: true}
		switch last := rd.Alive(); {
		case last.IsZero():
			disp.OK, disp.Detail = false, "has not completed a round yet"
		case time.Since(last) > rd.MaxQuiet:
			disp.OK, disp.Detail = false, fmt.Sprintf("last round %s ago (limit %s)", time.Since(last).Round(time.Millisecond), rd.MaxQuiet)
		default:
			disp.Detail = fmt.Sprintf("last round %s ago", time.Since(last).Round(time.Millisecond))
		}
		checks = append(checks, disp)
		ready := db.OK && mig.OK && disp.OK
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": ready, "checks": checks, "tzdata": schedule.TZDataVersion()})
	})
}

// errText describes a check's error without database details: a timeout,
// an unreachable database or, for anything else, its class.
func errText(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case unavailable(err):
		return "connection failed"
	}
	return "error"
}

// ms is d in milliseconds with microsecond precision, for log lines.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/schedule"
	"github.com/actionsledger/actionsledger/server"
)

// newObservedEnv is newSteppedEnv (nothing runs in the background; step
// drives dispatch and turns) with the logger at info, the database gauges
// read at every scrape, and the tracer provider of cfg.
func newObservedEnv(t testing.TB, cfg server.Config) *env {
	t.Helper()
	logs := &logBuffer{}
	log, err := observe.NewLogger(logs, observe.LogJSON, "info")
	require.NoError(t, err)
	cfg.DatabaseURL = pgtest.NewDB(t)
	cfg.Clock = clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cfg.MetricsCacheTTL = -1
	app, err := server.New(context.Background(), cfg, log)
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.Close()
	})
	return &env{app: app, srv: srv, logs: logs}
}

// scrape GETs /metrics and returns its samples by name with labels, as
// written ("name{a=\"x\",b=\"y\"}"), mapped to their values.
func (e *env) scrape(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// logLines decodes the JSON log lines with message msg.
func (e *env) logLines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const turnTraceOp = `query TurnTrace($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") {
  turns(first: 10) { nodes { number execution { id traceId children(first: 5) { nodes { id traceId } } } } } } } } }`

type tracedTurn struct {
	Number    int
	Execution struct {
		ID       string
		TraceID  *string
		Children struct {
			Nodes []struct {
				ID      string
				TraceID *string
			}
		}
	}
}

func (e *env) tracedTurns(t testing.TB, actionID string) map[int]tracedTurn {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct {
				Session struct{ Turns struct{ Nodes []tracedTurn } }
			}
		}
	}
	e.ok(t, turnTraceOp, map[string]any{"a": actionID}, &out)
	turns := map[int]tracedTurn{}
	for _, tu := range out.Actions.Action.Session.Turns.Nodes {
		turns[tu.Number] = tu
	}
	return turns
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// Issue 12 (Observability), over HTTP to a real handler with the agent
// story of issue 5: an approval raised, answered, the approved tool call
// run, a refused turn held. Traces (an in-memory exporter): a span per
// GraphQL operation named by it, a dispatch batch span, a turn span that
// is the root of its trace and whose trace id is the execution's traceId
// read through GraphQL, model and tool call spans inside it, pgx query
// spans as its children. Metrics: counters moved by the turns, gauges
// right at each point. Logs: one access line per request, one per turn
// outcome and per interrupt, no inputs at info.
func TestIssue12TracesMetricsAndLogs(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newObservedEnv(t, server.Config{TracerProvider: tp})

	toolID, actionID := uuid.NewString(), uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account", "description": "Freeze an account.",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"},
				"properties": map[string]any{"account_id": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"},
					"requested_by": map[string]any{"type": "string"}}}}}}, nil)
	e.ok(t, createOp, map[string]any{"id": actionID, "input": agentMonitor(toolID)}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")

	m := e.scrape(t)
	head := float64(e.countRows(t, `SELECT count(*) FROM events`))
	require.Equal(t, head, m[`actionsledger_events_appended_total`])
	require.Equal(t, head, m[`actionsledger_dispatch_lag_positions`], "nothing dispatched yet")
	require.Equal(t, 1.0, m[`actionsledger_metrics_database_up`])

	e.step(t) // turn 1 pauses before the gated call
	m = e.scrape(t)
	require.Equal(t, 0.0, m[`actionsledger_dispatch_lag_positions`])
	require.Equal(t, 0.0, m[`actionsledger_dispatch_lag_seconds`])
	require.Equal(t, 1.0, m[`actionsledger_sessions{status="WAITING"}`])
	require.Equal(t, 0.0, m[`actionsledger_sessions{status="OPEN"}`])
	require.Equal(t, 1.0, m[`actionsledger_interrupts_open{kind="APPROVAL"}`])
	require.Equal(t, 1.0, m[`actionsledger_interrupts_total{event="raised",kind="APPROVAL"}`])
	require.Equal(t, 1.0, m[`actionsledger_turns_total{kind="agent",outcome="SUCCEEDED"}`])
	require.Equal(t, 1.0, m[`actionsledger_turn_inputs_count`])
	require.Equal(t, float64(e.countRows(t, `SELECT count(*) FROM turn_inputs`)), m[`actionsledger_turn_inputs_sum`])
	require.GreaterOrEqual(t, m[`actionsledger_dispatch_batches_total`], 1.0)
	require.Equal(t, head, m[`actionsledger_dispatch_events_total`])
	require.Greater(t, m[`actionsledger_db_pool_acquires_total{pool="main"}`], 0.0)

	var turns map[int]tracedTurn
	turns = e.tracedTurns(t, actionID)
	var ap struct {
		Actions struct {
			Action struct {
				Session struct {
					Approvals []struct{ InterruptID string }
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") { approvals { interruptId } } } } }`,
		map[string]any{"a": actionID}, &ap)
	require.Len(t, ap.Actions.Action.Session.Approvals, 1)
	interruptID := ap.Actions.Action.Session.Approvals[0].InterruptID
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": actionID, "interruptId": interruptID}, nil)
	e.step(t) // turn 2 runs the approved tool call
	e.put(t, "entry", "e2", map[string]any{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}, "")
	e.step(t) // turn 3 is refused and held

	// A request that fails validation, and one the router refuses.
	requireError(t, e.do(t, `query Broken { nope }`, nil), "GRAPHQL_VALIDATION_FAILED", "")
	resp, err := e.srv.Client().Get(e.srv.URL + "/nope")
	require.NoError(t, err)
	resp.Body.Close()

	m = e.scrape(t)
	require.Equal(t, 2.0, m[`actionsledger_turns_total{kind="agent",outcome="SUCCEEDED"}`])
	require.Equal(t, 1.0, m[`actionsledger_turns_total{kind="agent",outcome="HELD"}`])
	require.Equal(t, 3.0, m[`actionsledger_turn_duration_seconds_count{kind="agent",outcome="SUCCEEDED"}`]+m[`actionsledger_turn_duration_seconds_count{kind="agent",outcome="HELD"}`])
	require.Equal(t, 1.0, m[`actionsledger_handler_errors_total{code="refused",kind="agent"}`])
	require.Equal(t, 1.0, m[`actionsledger_interrupts_total{event="answered",kind="APPROVAL"}`])
	require.Equal(t, 1.0, m[`actionsledger_interrupts_total{event="raised",kind="HOLD"}`])
	require.Equal(t, 0.0, m[`actionsledger_interrupts_open{kind="APPROVAL"}`])
	require.Equal(t, 1.0, m[`actionsledger_interrupts_open{kind="HOLD"}`])
	require.Equal(t, 1.0, m[`actionsledger_sessions{status="WAITING"}`])
	require.Equal(t, 0.0, m[`actionsledger_session_inputs_pending`], "the held turn's input is RECEIVED, not pending")
	require.Equal(t, 3.0, m[`actionsledger_turn_claim_wait_seconds_count`])
	require.Equal(t, 1.0, m[`actionsledger_graphql_requests_total{code="ok",operation="Approve"}`])
	require.Equal(t, 1.0, m[`actionsledger_graphql_requests_total{code="GRAPHQL_VALIDATION_FAILED",operation="Broken"}`])
	require.Equal(t, 1.0, m[`actionsledger_graphql_requests_total{code="ok",operation="TurnTrace"}`])
	require.Equal(t, 3.0, m[`actionsledger_graphql_requests_total{code="ok",operation="anonymous"}`], "two creates, one approvals query")
	require.Equal(t, 3.0, m[`actionsledger_graphql_requests_total{code="ok",operation="Put"}`])
	for name := range m {
		require.NotContains(t, name, actionID, "no action id as a label")
		require.NotContains(t, name, "3f0c9f8e", "no session id as a label")
	}

	// Traces.
	turns = e.tracedTurns(t, actionID)
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var all []sdktrace.ReadOnlySpan
	for _, s := range spans.GetSpans().Snapshots() {
		byID[s.SpanContext().SpanID()] = s
		all = append(all, s)
	}
	// under reports whether s descends from the span with id.
	under := func(s sdktrace.ReadOnlySpan, id trace.SpanID) bool {
		for p := s.Parent(); p.IsValid(); {
			if p.SpanID() == id {
				return true
			}
			ps, ok := byID[p.SpanID()]
			if !ok {
				return false
			}
			p = ps.Parent()
		}
		return false
	}
	turnSpan := func(n int) sdktrace.ReadOnlySpan {
		t.Helper()
		tu := turns[n]
		require.NotNil(t, tu.Execution.TraceID, "turn %d has a traceId", n)
		for _, s := range all {
			if s.Name() == "turn" && s.SpanContext().TraceID().String() == *tu.Execution.TraceID {
				require.False(t, s.Parent().IsValid(), "a turn is the root of its trace")
				require.Equal(t, tu.Execution.ID, attr(s, observe.ExecutionID))
				require.Equal(t, actionID, attr(s, observe.ActionID))
				require.Equal(t, "3f0c9f8e-account", attr(s, observe.SessionID))
				require.Equal(t, strconv.Itoa(n), attr(s, observe.TurnNumber))
				return s
			}
		}
		require.FailNow(t, "no turn span", "turn %d, trace %s", n, *tu.Execution.TraceID)
		return nil
	}
	t1, t2, t3 := turnSpan(1), turnSpan(2), turnSpan(3)
	require.Equal(t, "SUCCEEDED", attr(t2, observe.Outcome))
	require.Equal(t, "HELD", attr(t3, observe.Outcome))
	require.NotEqual(t, t1.SpanContext().TraceID(), t2.SpanContext().TraceID(), "each turn is a trace of its own")

	count := func(pred func(s sdktrace.ReadOnlySpan) bool) int {
		n := 0
		for _, s := range all {
			if pred(s) {
				n++
			}
		}
		return n
	}
	require.Positive(t, count(func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "model.call" && under(s, t1.SpanContext().SpanID()) && attr(s, observe.Provider) == "scripted"
	}), "a model call span under turn 1")
	require.Len(t, turns[2].Execution.Children.Nodes, 1)
	child := turns[2].Execution.Children.Nodes[0]
	require.Equal(t, 1, count(func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "tool.call" && under(s, t2.SpanContext().SpanID()) && attr(s, observe.ExecutionID) == child.ID
	}), "the approved tool call is a span under turn 2")
	require.Equal(t, turns[2].Execution.TraceID, child.TraceID, "the tool call's execution keeps its turn's trace")
	require.Positive(t, count(func(s sdktrace.ReadOnlySpan) bool {
		return s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == t2.SpanContext().SpanID() &&
			attr(s, "db.system.name") == "postgresql" && attr(s, "db.query.text") != ""
	}), "pgx queries are children of the turn span")
	require.Positive(t, count(func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "dispatch.batch" && !s.Parent().IsValid() && attr(s, observe.Events) != ""
	}), "a dispatch batch span")
	var approve sdktrace.ReadOnlySpan
	for _, s := range all {
		if s.Name() == "mutation Approve" {
			approve = s
		}
	}
	require.NotNil(t, approve, "a span per GraphQL operation, named by it")
	require.Equal(t, trace.SpanKindServer, approve.SpanKind())
	require.Equal(t, "ok", attr(approve, observe.ErrorCode))
	require.Positive(t, count(func(s sdktrace.ReadOnlySpan) bool {
		return attr(s, "db.system.name") == "postgresql" && under(s, approve.SpanContext().SpanID())
	}), "the queries of a request are in its trace")
	require.Positive(t, count(func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "query Broken" && attr(s, observe.ErrorCode) == "GRAPHQL_VALIDATION_FAILED"
	}))

	// Logs.
	requests := e.logLines(t, "request")
	require.NotEmpty(t, requests)
	var sawApprove, sawBroken, sawNotFound bool
	for _, l := range requests {
		require.NotEmpty(t, l["method"])
		require.Contains(t, l, "duration_ms")
		switch {
		case l["operation"] == "Approve":
			sawApprove = l["code"] == "ok" && l["status"] == 200.0 && l["path"] == "/graphql" && l["method"] == "POST"
		case l["operation"] == "Broken":
			sawBroken = l["code"] == "GRAPHQL_VALIDATION_FAILED" && l["status"] == 200.0
		case l["path"] == "/nope":
			sawNotFound = l["code"] == "NOT_FOUND" && l["status"] == 404.0
		}
	}
	require.True(t, sawApprove && sawBroken && sawNotFound, "access lines: %v", requests)
	settled := e.logLines(t, "turn settled")
	require.Len(t, settled, 3)
	for i, l := range settled {
		require.Equal(t, actionID, l["action"])
		require.Equal(t, "3f0c9f8e-account", l["session"])
		require.Equal(t, float64(i+1), l["turn"])
		require.Equal(t, 1.0, l["attempts"])
		require.Contains(t, l, "duration_ms")
		require.Equal(t, *turns[i+1].Execution.TraceID, l["trace"])
	}
	require.Equal(t, "HELD", settled[2]["status"])
	raised := e.logLines(t, "interrupt raised")
	require.Len(t, raised, 2)
	require.Equal(t, "APPROVAL", raised[0]["kind"])
	require.Equal(t, "freeze_account", raised[0]["tool"])
	require.Equal(t, "HOLD", raised[1]["kind"])
	answered := e.logLines(t, "interrupt answered")
	require.Len(t, answered, 1)
	require.Equal(t, "APPROVE", answered[0]["decision"])
	require.Equal(t, interruptID, answered[0]["interrupt"])
	require.NotContains(t, e.logs.String(), "large entry", "inputs stay out of the log at info")
	require.NotContains(t, e.logs.String(), "suspicious-transfer", "inputs stay out of the log at info")
}

// Issue 12: /readyz answers 200 naming its checks while the database is
// reachable, migrations are current and the dispatcher runs; 503 naming
// the failed check when the database is gone or a migration is missing;
// 200 again once the database is back. /healthz and /metrics need no
// credentials under AUTH=on, like /readyz.
func TestIssue12ReadyzFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.New(ctx, server.Config{DatabaseURL: u.String(), Poll: 50 * time.Millisecond, Auth: true, MetricsCacheTTL: -1,
		Clock: clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}, log)
	require.NoError(t, err)
	srv := httptest.NewServer(app.AuthHandler())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		app.Close()
	})
	type answer struct {
		Ready  bool
		Checks []struct {
			Name   string
			OK     bool
			Detail string
		}
		TZData string
	}
	ready := func() (int, answer) {
		resp, err := noKeepAlive.Get(srv.URL + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		var a answer
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
		return resp.StatusCode, a
	}
	failed := func(a answer) []string {
		var names []string
		for _, c := range a.Checks {
			if !c.OK {
				names = append(names, c.Name)
			}
		}
		return names
	}
	poll(t, "/readyz to answer 200", func() bool { st, _ := ready(); return st == http.StatusOK })
	st, a := ready()
	require.Equal(t, http.StatusOK, st)
	require.True(t, a.Ready)
	require.Len(t, a.Checks, 3)
	require.Equal(t, schedule.TZDataVersion(), a.TZData, "the embedded timezone database's release")
	require.Empty(t, failed(a))
	for _, path := range []string{"/metrics", "/healthz"} {
		resp, err := noKeepAlive.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s needs no token", path)
	}

	proxy.down()
	st, a = ready()
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.False(t, a.Ready)
	require.Contains(t, failed(a), "database")
	resp, err := noKeepAlive.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "/metrics answers while the database is gone")
	require.Regexp(t, regexp.MustCompile(`(?m)^actionsledger_metrics_database_up 0$`), string(body))

	proxy.up(t)
	poll(t, "/readyz to answer 200 again", func() bool { st, _ := ready(); return st == http.StatusOK })

	// A database behind this binary's schema is not ready.
	admin, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var latest int64
	require.NoError(t, admin.QueryRow(context.Background(), `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version) RETURNING version_id`).Scan(&latest))
	st, a = ready()
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, []string{"migrations"}, failed(a))
	_, err = admin.Exec(context.Background(), `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest)
	require.NoError(t, err)
	st, _ = ready()
	require.Equal(t, http.StatusOK, st)
}

// Issue 12: a dispatcher that has not completed a round within MaxQuiet
// (or ever) makes /readyz answer 503, naming the dispatcher.
func TestIssue12ReadyzDispatcherQuiet(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	versions := func(context.Context) (int64, int64, error) { return 12, 12, nil }
	for name, alive := range map[string]time.Time{"never": {}, "long ago": time.Now().Add(-time.Hour)} {
		rd := server.Readiness{Ping: ok, Versions: versions, Alive: func() time.Time { return alive }, MaxQuiet: 5 * time.Second}
		rec := httptest.NewRecorder()
		rd.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, name)
		require.Contains(t, rec.Body.String(), `{"name":"dispatcher","ok":false`, name)
	}
	rd := server.Readiness{Ping: ok, Versions: versions, Alive: time.Now, MaxQuiet: 5 * time.Second}
	rec := httptest.NewRecorder()
	rd.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}

// Issue 12: pprof is served only on DEBUG_ADDR, refused on a non-loopback
// address without DebugPublic, and never on the service's listener.
func TestIssue12PprofOnItsOwnAddress(t *testing.T) {
	t.Parallel()
	e := newObservedEnv(t, server.Config{})
	resp, err := e.srv.Client().Get(e.srv.URL + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no pprof on the service's listener")

	app, err := server.New(context.Background(), server.Config{DatabaseURL: pgtest.NewDB(t), DebugAddr: "0.0.0.0:0"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer app.Close()
	err = app.Run(context.Background())
	require.ErrorContains(t, err, "DEBUG_ADDR")

	srv := httptest.NewServer(server.DebugMux())
	defer srv.Close()
	resp, err = srv.Client().Get(srv.URL + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "goroutine profile")
}

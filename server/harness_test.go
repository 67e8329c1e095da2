package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

// env is one running service over a fresh database: the GraphQL handler
// behind httptest and the dispatcher and turn executor running for real.
type env struct {
	app  *server.App
	srv  *httptest.Server
	logs *logBuffer
}

// newEnv starts a service for t. The clock is a Manual clock (nothing in
// these tests depends on time passing); the background loops run until t ends.
// Its pool holds at most 5 connections (the service's default is 20): each
// new connection to a fresh database costs PostgreSQL a cold catalog cache
// and a plan for every statement it runs, and these tests never need more
// (docs/development.md, "Test time").
func newEnv(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clk := clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	app, err := server.New(ctx, server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clk, Poll: 50 * time.Millisecond, MaxConns: 5}, log)
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		require.NoError(t, <-done)
		app.Close()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	return &env{app: app, srv: srv, logs: logs}
}

// logBuffer collects the service's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gqlError is one entry of a response's errors.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

func (e gqlError) code() string  { s, _ := e.Extensions["code"].(string); return s }
func (e gqlError) field() string { s, _ := e.Extensions["field"].(string); return s }

// response is a decoded GraphQL response with its HTTP status.
type response struct {
	Status int
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// post sends a raw body to /graphql and returns the status and body.
func (e *env) post(t testing.TB, body []byte) (int, []byte) {
	t.Helper()
	resp, err := e.srv.Client().Post(e.srv.URL+"/graphql", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// do sends one operation with variables (nil for none) and decodes the
// response; numbers stay json.Number.
func (e *env) do(t testing.TB, query string, vars map[string]any) response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	return e.doRaw(t, body)
}

// doRaw posts body and decodes the GraphQL response.
func (e *env) doRaw(t testing.TB, body []byte) response {
	t.Helper()
	status, raw := e.post(t, body)
	var r response
	require.NoError(t, json.Unmarshal(raw, &r), "response is not JSON: %s", raw)
	r.Status = status
	return r
}

// ok sends an operation, requires no errors and decodes data into out.
func (e *env) ok(t testing.TB, query string, vars map[string]any, out any) {
	t.Helper()
	r := e.do(t, query, vars)
	require.Empty(t, r.Errors, "errors: %+v", r.Errors)
	require.Equal(t, http.StatusOK, r.Status)
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(r.Data))
		dec.UseNumber()
		require.NoError(t, dec.Decode(out))
	}
}

// requireAlive checks the service still answers a plain query.
func (e *env) requireAlive(t testing.TB) {
	t.Helper()
	var out struct {
		Ledger struct {
			Events struct{ Nodes []any }
		}
	}
	e.ok(t, `{ ledger { events(first: 1) { nodes { id } } } }`, nil, &out)
	require.NotContains(t, e.logs.String(), "panic", "the service logged a panic")
}

// requireError checks r failed with an error of code (and, when field is
// non-empty, that field) and that no error leaks SQL or Go internals.
func requireError(t testing.TB, r response, code, field string) gqlError {
	t.Helper()
	require.NotEmpty(t, r.Errors, "expected %s error, got data %s", code, r.Data)
	requireCodes(t, r)
	for _, e := range r.Errors {
		if e.code() == code && (field == "" || e.field() == field) {
			return e
		}
	}
	require.Failf(t, "no matching error", "want code %s field %q, got %+v", code, field, r.Errors)
	return gqlError{}
}

// requireCodes checks every error carries extensions.code and none leaks
// database or runtime text.
func requireCodes(t testing.TB, r response) {
	t.Helper()
	for _, e := range r.Errors {
		require.NotEmpty(t, e.code(), "error without extensions.code: %+v", e)
		for _, leak := range []string{"SQLSTATE", "pgx", "goroutine", "runtime error", "ERROR:"} {
			require.NotContains(t, e.Message, leak, "error message leaks internals: %+v", e)
		}
	}
}

// poll calls f until it reports true or the deadline passes.
func poll(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting for "+what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// example reads a GraphQL operation of package examples.
func example(t testing.TB, name string) string {
	t.Helper()
	b, err := fs.ReadFile(examples.FS, name)
	require.NoError(t, err)
	return string(b)
}

// countRows runs a count query against the test database.
func (e *env) countRows(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.app.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// putValueOp writes a key-value record; value is sent as a JSON variable.
const putValueOp = `mutation Put($ns: String!, $key: String!, $value: JSON!, $ik: String) {
  ledger { putValue(namespace: $ns, key: $key, value: $value, idempotencyKey: $ik) {
    namespace key value version updatedAt event { id eventType position data }
  } }
}`

// kv is putValue's response shape.
type kv struct {
	Namespace string
	Key       string
	Value     json.RawMessage
	Version   json.Number
	UpdatedAt string
	Event     struct {
		ID        string
		EventType string
		Position  string
		Data      json.RawMessage
	}
}

// put writes a record and returns it.
func (e *env) put(t testing.TB, ns, key string, value any, ik string) kv {
	t.Helper()
	vars := map[string]any{"ns": ns, "key": key, "value": value}
	if ik != "" {
		vars["ik"] = ik
	}
	var out struct{ Ledger struct{ PutValue kv } }
	e.ok(t, putValueOp, vars, &out)
	return out.Ledger.PutValue
}

// jsonEq compares two JSON documents, numbers by their exact text.
func jsonEq(t testing.TB, want string, got json.RawMessage) {
	t.Helper()
	require.Equal(t, canon(t, []byte(want)), canon(t, got))
}

func canon(t testing.TB, raw []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "not JSON: %s", raw)
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// gqlString quotes s as a GraphQL string literal.
func gqlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

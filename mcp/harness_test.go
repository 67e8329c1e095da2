package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

const adminToken = "mcp-test-admin-token-0123456789abcdef-0123"

// env is one running service over a fresh database (dispatcher, timers and
// executor running for real) behind an httptest server: with auth, the
// handler that needs bearer tokens on /graphql and /mcp.
type env struct {
	app  *server.App
	srv  *httptest.Server
	auth bool
	logs *logBuffer
}

func newEnv(t *testing.T, auth bool, mutate ...func(*server.Config)) *env {
	t.Helper()
	return startEnv(t, auth, true, mutate...)
}

// newSteppedEnv is newEnv without the background loops: step runs the
// dispatcher and the executor until they have nothing left to do.
func newSteppedEnv(t *testing.T, auth bool, mutate ...func(*server.Config)) *env {
	t.Helper()
	return startEnv(t, auth, false, mutate...)
}

// step dispatches every event and runs every runnable turn.
func (e *env) step(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for {
		n, err := e.app.Dispatcher.DispatchOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	for {
		ran, err := e.app.Executor.RunOnce(ctx)
		require.NoError(t, err)
		if !ran {
			return
		}
	}
}

func startEnv(t *testing.T, auth, run bool, mutate ...func(*server.Config)) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)),
		Poll: 50 * time.Millisecond, Auth: auth}
	if auth {
		cfg.AdminToken = adminToken
	}
	for _, m := range mutate {
		m(&cfg)
	}
	app, err := server.New(ctx, cfg, log)
	require.NoError(t, err)
	h := app.Handler()
	if auth {
		h = app.AuthHandler()
	}
	srv := httptest.NewServer(h)
	done := make(chan error, 1)
	if run {
		go func() { done <- app.Run(ctx) }()
	} else {
		done <- nil
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		require.NoError(t, <-done)
		app.Close()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	return &env{app: app, srv: srv, auth: auth, logs: logs}
}

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

// gql runs a GraphQL operation (as the admin under auth), fails the test
// on errors and decodes data into out (when not nil).
func (e *env) gql(t *testing.T, query string, vars map[string]any, out any) {
	t.Helper()
	errs := e.gqlErrors(t, adminToken, query, vars, out)
	require.Empty(t, errs, "GraphQL errors")
}

// gqlErrors runs an operation with token and returns its errors.
func (e *env) gqlErrors(t *testing.T, token, query string, vars map[string]any, out any) []map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if e.auth && token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r struct {
		Data   json.RawMessage  `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
	if out != nil && len(r.Errors) == 0 {
		require.NoError(t, json.Unmarshal(r.Data, out))
	}
	return r.Errors
}

// token creates a token for principal with the policies (action, resource pairs).
func (e *env) token(t *testing.T, principal string, policies ...[2]string) string {
	_, tok := e.tokenWithID(t, principal, policies...)
	return tok
}

func (e *env) tokenWithID(t *testing.T, principal string, policies ...[2]string) (id, token string) {
	t.Helper()
	pols := make([]map[string]any, len(policies))
	for i, p := range policies {
		pols[i] = map[string]any{"action": p[0], "resource": p[1]}
	}
	var out struct {
		Auth struct {
			CreateToken struct{ ID, Token string } `json:"createToken"`
		} `json:"auth"`
	}
	e.gql(t, `mutation($p: String!, $pol: [PolicyInput!]!) { auth { createToken(principal: $p, policies: $pol) { id token } } }`,
		map[string]any{"p": principal, "pol": pols}, &out)
	return out.Auth.CreateToken.ID, out.Auth.CreateToken.Token
}

// createTool stores a Starlark tool action; tool is the definition's tool block.
func (e *env) createTool(t *testing.T, name, source string, tool map[string]any) uuid.UUID {
	t.Helper()
	id := uuid.New()
	e.gql(t, `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { actionId } } }`,
		map[string]any{"id": id, "in": map[string]any{"name": name, "kind": "starlark", "source": source, "tool": tool}}, nil)
	return id
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens an MCP client session (the go-sdk client) on path with
// token ("" for none); the error is Connect's.
func (e *env) connect(t *testing.T, path, token string) (*gomcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token: token, next: http.DefaultTransport}
	}
	c := gomcp.NewClient(&gomcp.Implementation{Name: "actionsledger-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: e.srv.URL + path, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (e *env) mustConnect(t *testing.T, path, token string) *gomcp.ClientSession {
	t.Helper()
	cs, err := e.connect(t, path, token)
	require.NoError(t, err)
	return cs
}

func toolNames(t *testing.T, cs *gomcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	return names
}

func call(t *testing.T, cs *gomcp.ClientSession, name string, args any) (*gomcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
}

// text is a result's first text content.
func text(t *testing.T, r *gomcp.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, r.Content)
	tc, ok := r.Content[0].(*gomcp.TextContent)
	require.True(t, ok, "content %T", r.Content[0])
	return tc.Text
}

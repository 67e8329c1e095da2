package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

// served is a service answered by server.Serve, the *http.Server App.Run
// builds, on a real loopback listener, with the limits of its Config.
type served struct {
	app  *server.App
	base string // http://127.0.0.1:port
	logs *logBuffer
}

// serve starts a service for t with cfg (a fresh database unless
// cfg.DatabaseURL is set) and h(app) as its handler (app.Handler when nil).
func serve(t testing.TB, cfg server.Config, h func(*server.App) http.Handler) *served {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = pgtest.NewDB(t)
	}
	cfg.Clock = clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	app, err := server.New(context.Background(), cfg, log)
	require.NoError(t, err)
	if h == nil {
		h = (*server.App).Handler
	}
	t.Cleanup(func() { // after the listeners' cleanups: they stop serving first
		app.Close()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	s := &served{app: app, logs: logs}
	s.listen(t, h(app), cfg.Limits)
	return s
}

// listen serves h with lim on a new loopback listener until t ends and
// points s.base at it.
func (s *served) listen(t testing.TB, h http.Handler, lim server.Limits) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, h, lim) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	s.base = "http://" + ln.Addr().String()
}

// noKeepAlive sends each request on a new connection: the tests set idle
// timeouts short enough to race a reused one (the raw-connection tests
// check keep-alive itself).
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// send makes one request and returns its status, headers and GraphQL
// body, decoded when its Content-Type says JSON.
func (s *served) send(t testing.TB, method, path string, body []byte, header map[string]string) (int, http.Header, response) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := noKeepAlive.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r response
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && method != http.MethodHead {
		require.NoError(t, json.Unmarshal(raw, &r), "%s %s answered %d with a body that is not JSON: %q", method, path, resp.StatusCode, raw)
	}
	r.Status = resp.StatusCode
	return resp.StatusCode, resp.Header, r
}

// do posts one operation.
func (s *served) do(t testing.TB, query string, vars map[string]any) response {
	t.Helper()
	_, _, r := s.send(t, http.MethodPost, "/graphql", operation(query, vars), nil)
	return r
}

// ok posts one operation and requires it to succeed.
func (s *served) ok(t testing.TB, query string, vars map[string]any) json.RawMessage {
	t.Helper()
	r := s.do(t, query, vars)
	require.Empty(t, r.Errors, "errors: %+v", r.Errors)
	return r.Data
}

// requireAlive checks that the service answers a plain query at once.
func (s *served) requireAlive(t testing.TB) {
	t.Helper()
	s.ok(t, `{ ledger { events(first: 1) { nodes { id } } } }`, nil)
	require.NotContains(t, s.logs.String(), "panic", "the service logged a panic")
}

// countEvents counts the events of one type.
func (s *served) countEvents(t testing.TB, typ string) int {
	t.Helper()
	var n int
	require.NoError(t, s.app.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = $1`, typ).Scan(&n))
	return n
}

// retryable reports extensions.retryable of e.
func retryable(e gqlError) bool { b, _ := e.Extensions["retryable"].(bool); return b }

// Issue 10 item 1: a 1.3 KB fragment bomb, and the documents that made
// gqlparser's validation quadratic, are refused with
// COMPLEXITY_LIMIT_EXCEEDED before any walk of their expansion, over HTTP,
// with introspection on and off; the server answers the next request.
func TestIssue10FragmentBombRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	docs := map[string]string{
		"fragment bomb":          server.FragmentBomb("query", "Query", 30, "__typename"),
		"introspecting bomb":     server.FragmentBomb("query", "Query", 30, "__schema { types { name } }"),
		"mutation bomb":          server.FragmentBomb("mutation", "Mutation", 30, `ledger { appendEvent(type: "bomb.x", data: {}) { id } }`),
		"same response name":     server.SameNameFields(6000),
		"fragments side by side": server.SideBySideFragments(1400),
		"nested same names":      server.NestedSameName(60, 60),
	}
	for _, cfg := range []server.Config{{}, {DisableIntrospection: true}} {
		s := serve(t, cfg, nil)
		for name, q := range docs {
			start := time.Now()
			r := s.do(t, q, nil)
			t.Logf("%s (%d bytes, introspection off %v): %v", name, len(q), cfg.DisableIntrospection, time.Since(start))
			e := requireError(t, r, "COMPLEXITY_LIMIT_EXCEEDED", "")
			require.Contains(t, e.Message, "too large to validate", name)
			require.Contains(t, []string{"", "null"}, string(r.Data), name)
			s.requireAlive(t)
		}
		// The same bomb sent with GET, and a small one, which passes.
		_, _, r := s.send(t, http.MethodGet, "/graphql?query="+url.QueryEscape(docs["fragment bomb"]), nil, nil)
		requireError(t, r, "COMPLEXITY_LIMIT_EXCEEDED", "")
		s.ok(t, server.FragmentBomb("query", "Query", 3, "__typename"), nil)
		require.Zero(t, s.countEvents(t, "bomb.x"))
	}
}

// Issue 10 item 1: no request's work survives its deadline. A write that
// waits on the ledger head past the request timeout is answered 503
// TIMEOUT (retryable) and never commits, even when the head is free the
// moment after: the single write (group commit: its group is rolled back,
// not committed on its behalf) and the bulk write (its COMMIT is sent only
// while the request lives). A write sent after them commits.
func TestIssue10RequestTimeoutCancelsDatabaseWork(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{Limits: server.Limits{RequestTimeout: 2 * time.Second}}, nil)
	ctx := context.Background()
	bulkOp := `mutation($type: String!) { ledger { appendEvents(events: [{type: $type, data: 1}, {type: $type, data: 2}]) { id } } }`
	for name, body := range map[string][]byte{
		"appendEvent":  operation(appendEventOp, map[string]any{"type": "late.write", "data": 1}),
		"appendEvents": operation(bulkOp, map[string]any{"type": "late.write"}),
	} {
		tx, err := s.app.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT * FROM ledger_head FOR UPDATE`)
		require.NoError(t, err)

		status, _, r := s.send(t, http.MethodPost, "/graphql", body, nil)
		require.Equal(t, http.StatusServiceUnavailable, status, name)
		e := requireError(t, r, "TIMEOUT", "")
		require.True(t, retryable(e), "TIMEOUT is retryable: %+v", e)
		// The head is free at once; the write queued behind it on the
		// head (if it were still there) would commit first.
		require.NoError(t, tx.Commit(ctx))
		s.ok(t, appendEventOp, map[string]any{"type": "next.write", "data": 1})
		require.Zero(t, s.countEvents(t, "late.write"), "%s: the timed-out write committed", name)
	}
	waiting := func() int {
		var n int
		require.NoError(t, s.app.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n
	}
	require.Zero(t, waiting())
	require.Equal(t, 2, s.countEvents(t, "next.write"))
	s.requireAlive(t)
}

// rawConn dials the server and sends raw bytes.
func (s *served) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// A safety net: nothing below should wait this long.
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return c
}

// requireClosed reads until the server closes c and fails when the
// safety deadline comes first.
func requireClosed(t *testing.T, r io.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}

// Issue 10 item 6: a body trickled one byte at a time is cut off at the
// read timeout, answered 408 TIMEOUT and the connection closed, while a
// normal request on another connection is answered meanwhile. Headers
// trickled past the header timeout and a kept-alive connection left idle
// past the idle timeout are closed too.
func TestIssue10SlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	lim := server.Limits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: 700 * time.Millisecond, IdleTimeout: 500 * time.Millisecond}
	s := serve(t, server.Config{Limits: lim}, nil)

	// Slow body: a 1,000-byte body at 10 bytes a second would take 100 s.
	c := s.rawConn(t)
	_, err := fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	s.requireAlive(t)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	var r response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	e := requireError(t, r, "TIMEOUT", "")
	require.True(t, retryable(e))
	requireClosed(t, br)
	close(stop)
	<-trickled

	// Slow headers.
	c = s.rawConn(t)
	_, err = fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	requireClosed(t, c)

	// Idle keep-alive connection, after one answered request.
	c = s.rawConn(t)
	_, err = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br = bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "the first request keeps the connection alive")
	requireClosed(t, br)
	s.requireAlive(t)
}

// Issue 10 item 6: with a cap of two connections, a third waits unanswered
// while the first two are served, and is answered once one of them closes.
func TestIssue10ConnectionCap(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{Limits: server.Limits{MaxConns: 2}}, nil)
	get := func(c net.Conn) (*http.Response, error) {
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	// Accepted in the order they connect: a and b take the two places.
	a, b, c := s.rawConn(t), s.rawConn(t), s.rawConn(t)
	resp, err := get(b)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, c.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	_, err = get(c)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a third connection was served beyond the cap: %v", err)

	resp, err = get(a)
	require.NoError(t, err, "an accepted connection is still served")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, a.Close())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the waiting connection is served once a place is free")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// pgProxy forwards TCP connections to PostgreSQL; down stops it (the
// listener and every forwarded connection closed, so connecting is
// refused), up starts it again on the same address.
type pgProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	p := &pgProxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.up(t)
	t.Cleanup(p.down)
	return p
}

func (p *pgProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *pgProxy) forward(c net.Conn) {
	d, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[d] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go pipe(d, c)
	go pipe(c, d)
	<-done
	c.Close()
	d.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, d)
	p.mu.Unlock()
}

func (p *pgProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// Issue 10 item 7: while the database is unreachable, reads and writes are
// answered UNAVAILABLE with extensions.retryable true (not INTERNAL), as is
// a bearer-token lookup (HTTP 503); the server stays responsive; once the
// database is back the same requests succeed, and a write retried with its
// idempotency key commits once. Sessions terminated as in a restart give
// UNAVAILABLE too, never INTERNAL.
func TestIssue10DatabaseOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	s := serve(t, server.Config{DatabaseURL: u.String()}, nil)
	authed := &served{app: s.app, logs: s.logs}
	authed.listen(t, s.app.AuthHandler(), server.Limits{})

	read := `{ ledger { events(first: 5) { nodes { id } } } }`
	write := func() response {
		return s.do(t, putValueOp, map[string]any{"ns": "outage", "key": "k", "value": 1, "ik": "outage-k-1"})
	}
	appendEv := func() response {
		return s.do(t, appendEventOp, map[string]any{"type": "outage.x", "data": 1})
	}
	s.ok(t, read, nil)

	proxy.down()
	for name, r := range map[string]response{
		"read": s.do(t, read, nil), "put with a key": write(), "append": appendEv(),
		"action": s.do(t, `{ actions { action(id: "`+uuid.NewString()+`") { id } } }`, nil),
	} {
		require.Equal(t, http.StatusOK, r.Status, name)
		e := requireError(t, r, "UNAVAILABLE", "")
		require.True(t, retryable(e), "%s: %+v", name, e)
		for _, other := range r.Errors {
			require.NotEqual(t, "INTERNAL", other.code(), "%s: %+v", name, other)
		}
	}
	status, _, r := authed.send(t, http.MethodPost, "/graphql", operation(read, nil),
		map[string]string{"Authorization": "Bearer " + strings.Repeat("x", 40)})
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.True(t, retryable(requireError(t, r, "UNAVAILABLE", "")))
	status, _, _ = s.send(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, status)
	// /mcp too: tools/list and tools/call are JSON-RPC errors UNAVAILABLE.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"any","arguments":{}}}`,
	} {
		status, e := s.mcpSend(t, http.MethodPost, "/mcp", body, nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NotNil(t, e, body)
		require.Equal(t, "UNAVAILABLE", e.Data.Code, "%s: %+v", body, e)
		require.True(t, e.Data.Retryable, body)
	}
	require.NotContains(t, s.logs.String(), "level=ERROR", "an outage is not an internal error")

	proxy.up(t)
	poll(t, "reads to succeed again", func() bool { return len(s.do(t, read, nil).Errors) == 0 })
	require.Empty(t, write().Errors)
	require.Empty(t, write().Errors, "the same key again is the same write")
	require.Equal(t, 1, s.countEvents(t, "outage.inserted"), "the keyed write committed once")
	require.Empty(t, appendEv().Errors)

	// A restart as PostgreSQL does it: every session of the database
	// terminated (57P01). A request on a dead connection may fail, but
	// only as UNAVAILABLE; the pool reconnects for the next one.
	admin, err := pgx.Connect(context.Background(), pgtest.AdminURL())
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, strings.TrimPrefix(u.Path, "/"))
	require.NoError(t, err)
	for _, r := range []response{s.do(t, read, nil), appendEv()} {
		t.Logf("after the terminate: %+v", r.Errors)
		for _, e := range r.Errors {
			require.Equal(t, "UNAVAILABLE", e.code(), "%+v", e)
			require.True(t, retryable(e))
		}
	}
	poll(t, "reads to succeed after the restart", func() bool { return len(s.do(t, read, nil).Errors) == 0 })
	require.NotContains(t, s.logs.String(), "level=ERROR")
}

// manyAliases selects __typename under n aliases.
func manyAliases(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: __typename", i)
	}
	b.WriteString(" }")
	return b.String()
}

// mutationOp selects n aliased appendEvent fields of type typ.
func mutationOp(n int, typ string) string {
	var b strings.Builder
	b.WriteString("mutation {")
	for i := range n {
		fmt.Fprintf(&b, ` a%d: ledger { appendEvent(type: %q, data: {}) { __typename } }`, i, typ)
	}
	b.WriteString(" }")
	return b.String()
}

// Issue 10 item 8: 1,000 aliased appendEvent fields are refused with
// MUTATION_LIMIT_EXCEEDED naming the count and the limit before any runs;
// the limit itself passes; fields are counted through fragments; the limit
// is configurable.
func TestIssue10MutationFieldsCapped(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	r := s.do(t, mutationOp(1000, "cap.x"), nil)
	e := requireError(t, r, "MUTATION_LIMIT_EXCEEDED", "")
	require.Contains(t, e.Message, "1000")
	require.Contains(t, e.Message, "50")
	require.EqualValues(t, 1000, e.Extensions["count"])
	require.EqualValues(t, 50, e.Extensions["limit"])
	require.Zero(t, s.countEvents(t, "cap.x"), "events appended before the refusal")
	s.requireAlive(t)

	s.ok(t, mutationOp(server.DefaultLimits.MaxMutationFields, "cap.y"), nil)
	require.Equal(t, server.DefaultLimits.MaxMutationFields, s.countEvents(t, "cap.y"))

	small := serve(t, server.Config{Limits: server.Limits{MaxMutationFields: 2}}, nil)
	frag := `mutation { ...W ...W } fragment W on Mutation { ledger {
		a: appendEvent(type: "cap.z", data: {}) { id } b: appendEvent(type: "cap.z", data: {}) { id } } }`
	requireError(t, small.do(t, frag, nil), "MUTATION_LIMIT_EXCEEDED", "")
	requireError(t, small.do(t, mutationOp(3, "cap.z"), nil), "MUTATION_LIMIT_EXCEEDED", "")
	small.ok(t, mutationOp(2, "cap.z"), nil)
	require.Equal(t, 2, small.countEvents(t, "cap.z"))
}

// Issue 10 item 10: every error the server writes carries extensions.code:
// a mutation sent with GET (HTTP 405, nothing runs), other methods,
// upgrades, bodies that are not JSON or not a GraphQL request, malformed
// GET parameters, unknown persisted queries (and a persisted mutation
// fetched with GET), and paths that do not exist.
func TestIssue10TransportErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	appendQ := `mutation { ledger { appendEvent(type: "get.x", data: {}) { id } } }`
	persisted := func(query string) string {
		ext, _ := json.Marshal(map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex(query)}})
		return "/graphql?extensions=" + url.QueryEscape(string(ext))
	}
	// Register the mutation as a persisted query (it runs once here).
	body, _ := json.Marshal(map[string]any{"query": appendQ, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex(appendQ)}}})
	_, _, r := s.send(t, http.MethodPost, "/graphql", body, nil)
	require.Empty(t, r.Errors)

	for _, tc := range []struct {
		name, method, path string
		body               []byte
		header             map[string]string
		status             int
		code               string
	}{
		{"GET mutation", http.MethodGet, "/graphql?query=" + url.QueryEscape("mutation{__typename}"), nil, nil, 405, "METHOD_NOT_ALLOWED"},
		{"GET appendEvent", http.MethodGet, "/graphql?query=" + url.QueryEscape(appendQ), nil, nil, 405, "METHOD_NOT_ALLOWED"},
		{"GET persisted mutation", http.MethodGet, persisted(appendQ), nil, nil, 405, "METHOD_NOT_ALLOWED"},
		{"GET unknown persisted query", http.MethodGet, persisted("{ __typename }"), nil, nil, 200, "PERSISTED_QUERY_NOT_FOUND"},
		{"GET variables not JSON", http.MethodGet, "/graphql?query=%7B__typename%7D&variables=%7B", nil, nil, 400, "BAD_USER_INPUT"},
		{"GET extensions not JSON", http.MethodGet, "/graphql?query=%7B__typename%7D&extensions=nope", nil, nil, 400, "BAD_USER_INPUT"},
		{"GET malformed query string", http.MethodGet, "/graphql?query=%zz", nil, nil, 400, "BAD_USER_INPUT"},
		{"GET without query", http.MethodGet, "/graphql", nil, nil, 400, "BAD_USER_INPUT"}, // not a GraphQL request, as a POST without one (docs/errors.md)
		// readPost keeps a POST body's variables as text (issue 14); what
		// is not an object is still refused as gqlgen's shape refuses it.
		{"POST variables a list", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }", "variables": [1]}`), nil, 400, "BAD_USER_INPUT"},
		{"POST variables a string", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }", "variables": "{}"}`), nil, 400, "BAD_USER_INPUT"},
		// A body is one request: what follows its object, or a parameter
		// named twice (in any case), is refused before anything runs
		// (found by a fresh helper's attack: the first object ran).
		{"POST data after the object", http.MethodPost, "/graphql", []byte(`{"query": ` + strconv.Quote(appendQ) + `}garbage`), nil, 400, "BAD_USER_INPUT"},
		{"POST two objects", http.MethodPost, "/graphql", []byte(`{"query": ` + strconv.Quote(appendQ) + `} {"query": "{ __typename }"}`), nil, 400, "BAD_USER_INPUT"},
		{"POST query twice", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }", "query": ` + strconv.Quote(appendQ) + `}`), nil, 400, "BAD_USER_INPUT"},
		{"POST query twice, other case", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }", "QUERY": ` + strconv.Quote(appendQ) + `}`), nil, 400, "BAD_USER_INPUT"},
		{"HEAD", http.MethodHead, "/graphql", nil, nil, 405, ""},
		{"PUT", http.MethodPut, "/graphql", []byte(`{}`), nil, 405, "METHOD_NOT_ALLOWED"},
		{"DELETE", http.MethodDelete, "/graphql", nil, nil, 405, "METHOD_NOT_ALLOWED"},
		{"PATCH", http.MethodPatch, "/graphql", []byte(`{"query": "{ __typename }"}`), nil, 405, "METHOD_NOT_ALLOWED"},
		// Issue 12: a WebSocket upgrade is served (subscriptions); an
		// incomplete handshake, another origin or another protocol is not.
		{"incomplete WebSocket handshake", http.MethodGet, "/graphql", nil, map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, 400, "BAD_USER_INPUT"},
		{"WebSocket from another origin", http.MethodGet, "/graphql", nil, map[string]string{"Upgrade": "websocket", "Connection": "Upgrade",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13", "Origin": "https://elsewhere.example"}, 403, "FORBIDDEN"},
		{"upgrade to h2c", http.MethodGet, "/graphql", nil, map[string]string{"Upgrade": "h2c", "Connection": "Upgrade"}, 405, "METHOD_NOT_ALLOWED"},
		{"POST latin1", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }"}`), map[string]string{"Content-Type": "application/json; charset=latin1"}, 415, "BAD_USER_INPUT"},
		{"POST text/plain", http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }"}`), map[string]string{"Content-Type": "text/plain"}, 415, "BAD_USER_INPUT"},
		{"POST not JSON", http.MethodPost, "/graphql", []byte(`query { __typename }`), nil, 400, "BAD_USER_INPUT"},
		{"POST unknown persisted query", http.MethodPost, "/graphql", []byte(`{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "` + sha256Hex("x") + `"}}}`), nil, 200, "PERSISTED_QUERY_NOT_FOUND"},
		{"path under /graphql", http.MethodGet, "/graphql/x", nil, nil, 404, "NOT_FOUND"},
		{"POST under /graphql", http.MethodPost, "/graphql/", []byte(`{}`), nil, 404, "NOT_FOUND"},
		{"unknown path", http.MethodGet, "/nope", nil, nil, 404, "NOT_FOUND"},
		{"wrong method on /healthz", http.MethodPost, "/healthz", []byte(`{}`), nil, 404, "NOT_FOUND"},
	} {
		status, hdr, r := s.send(t, tc.method, tc.path, tc.body, tc.header)
		require.Equal(t, tc.status, status, "%s: %+v", tc.name, r.Errors)
		if tc.method != http.MethodHead { // answered without a body
			requireError(t, r, tc.code, "")
		}
		require.Contains(t, hdr.Get("Content-Type"), "json", tc.name)
		if status == http.StatusMethodNotAllowed {
			require.NotEmpty(t, hdr.Get("Allow"), tc.name)
		}
	}
	require.Equal(t, 1, s.countEvents(t, "get.x"), "a mutation sent with GET ran")
	// A body nested past what encoding/json reads is refused with a
	// message that says so, not as "not a GraphQL request".
	deep := `{"query": "{ __typename }", "variables": {"v": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`
	status, _, r := s.send(t, http.MethodPost, "/graphql", []byte(deep), nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, requireError(t, r, "BAD_USER_INPUT", "").Message, "nests deeper than 10000 levels")
	for _, ct := range []string{"application/json; charset=UTF-8", "application/json;charset=utf8"} {
		status, _, r = s.send(t, http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }"}`), map[string]string{"Content-Type": ct})
		require.Equal(t, http.StatusOK, status, ct)
		require.Empty(t, r.Errors, ct)
	}
	for _, vars := range []string{`null`, ` {"a": 1} `} {
		status, _, r = s.send(t, http.MethodPost, "/graphql", []byte(`{"query": "{ __typename }", "variables": `+vars+`}`), nil)
		require.Equal(t, http.StatusOK, status, vars)
		require.Empty(t, r.Errors, vars)
	}
	status, _, _ = s.send(t, http.MethodOptions, "/graphql", nil, nil)
	require.Equal(t, http.StatusOK, status)
	s.requireAlive(t)
}

// A bulk write's item errors name the item's field as the schema spells
// it, whichever check refuses it: the server's text check or the store's
// (found by a fresh helper's attack: records[1].Value against
// records[1].value). Nothing is written.
func TestBulkItemErrorsNameSchemaFields(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	const op = `mutation($r: [ValueInput!]!) { ledger { putValues(records: $r) { key } } }`
	good := map[string]any{"namespace": "acct", "key": "a", "value": 1}
	for _, tc := range []struct {
		rec         map[string]any
		code, field string
	}{
		{map[string]any{"namespace": "acct", "key": "b", "value": map[string]any{"a": "x\u0000y"}}, "INVALID_JSON", "records[1].value"},
		{map[string]any{"namespace": "ac\u0000ct", "key": "b", "value": 1}, "BAD_USER_INPUT", "records[1].namespace"},
		{map[string]any{"namespace": "acct", "key": "b\u0000", "value": 1}, "BAD_USER_INPUT", "records[1].key"},
		{map[string]any{"namespace": "acct", "key": "b", "value": 1, "idempotencyKey": "i\u0000"}, "BAD_USER_INPUT", "records[1].idempotencyKey"},
		{map[string]any{"namespace": "acct", "key": "", "value": 1}, "BAD_USER_INPUT", "records[1].key"},
	} {
		r := s.do(t, op, map[string]any{"r": []any{good, tc.rec}})
		requireError(t, r, tc.code, tc.field)
	}
	r := s.do(t, `mutation { ledger { appendEvents(events: [{type: "ok.a", data: 1}, {type: "ok.b", data: 1, idempotencyKey: "k\u0000"}]) { id } } }`, nil)
	requireError(t, r, "BAD_USER_INPUT", "events[1].idempotencyKey")
	require.Zero(t, s.countEvents(t, "acct.inserted"))
	require.Zero(t, s.countEvents(t, "ok.a"))
}

// Reads refuse names no write could have made, with the field, instead of
// answering an empty page (found by a fresh helper's attack); the
// service's own namespaces and types stay readable.
func TestReadsRefuseMalformedNames(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	long := strings.Repeat("n", 101)
	for _, tc := range []struct{ query, field string }{
		{`{ ledger { values(namespace: "` + long + `") { nodes { key } } } }`, "namespace"},
		{`{ ledger { values(namespace: "bad space") { nodes { key } } } }`, "namespace"},
		{`{ ledger { value(namespace: "acct", key: "") { key } } }`, "key"},
		{`{ ledger { events(type: "not a type!") { nodes { id } } } }`, "type"},
	} {
		requireError(t, s.do(t, tc.query, nil), "BAD_USER_INPUT", tc.field)
	}
	for _, q := range []string{
		`{ ledger { values(namespace: "schedule") { nodes { key } } } }`,
		`{ ledger { events(type: "schedule.fired") { nodes { id } } } }`,
		`{ ledger { value(namespace: "acct", key: "k") { key } } }`,
	} {
		s.ok(t, q, nil)
	}
}

// A refused bulk write leaves the ledger fields before it that committed in
// the answer: its list is nullable, as the single writes' results are.
func TestFailedBulkWriteDoesNotHideEarlierWrites(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	r := s.do(t, `mutation { ledger {
		a: putValue(namespace: "two", key: "c", value: 1) { key version }
		b: appendEvents(events: [{type: "", data: 1}]) { id } } }`, nil)
	requireError(t, r, "BAD_USER_INPUT", "events[0].type")
	var data struct {
		Ledger struct {
			A *struct {
				Key     string
				Version int
			}
			B []any
		}
	}
	require.NoError(t, json.Unmarshal(r.Data, &data), "%s", r.Data)
	require.NotNil(t, data.Ledger.A, "the committed write is hidden: %s", r.Data)
	require.Equal(t, "c", data.Ledger.A.Key)
	require.Nil(t, data.Ledger.B)
}

// sha256Hex is a persisted query's hash.
func sha256Hex(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:])
}

// A process started while its database is unreachable waits for it
// (DatabaseWait) instead of exiting, and starts once it answers; without
// a wait it gives up at once (found by make chaos: replicas restarted
// during a PostgreSQL restart exited).
func TestStartWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	proxy.down()

	_, err = server.New(context.Background(), server.Config{DatabaseURL: u.String()}, slog.New(slog.DiscardHandler))
	require.Error(t, err, "no wait: the first refusal ends the start")

	logs := &logBuffer{}
	done := make(chan error, 1)
	go func() {
		app, err := server.New(context.Background(), server.Config{DatabaseURL: u.String(), DatabaseWait: time.Minute},
			slog.New(slog.NewTextHandler(logs, nil)))
		if err == nil {
			app.Close()
		}
		done <- err
	}()
	poll(t, "the start to wait", func() bool { return strings.Contains(logs.String(), "database unreachable; waiting for it") })
	proxy.up(t)
	require.NoError(t, <-done)
}

// mcpError is the error of a JSON-RPC response from /mcp.
type mcpError struct {
	Code    int64
	Message string
	Data    struct {
		Code      string
		Retryable bool
	}
}

// mcpSend sends body to path with method and headers (the Content-Type and
// Accept an MCP client sends unless overridden) and returns the status
// and the JSON-RPC error of the answer (nil when there is none), which
// must be JSON or one server-sent event holding JSON.
func (s *served) mcpSend(t *testing.T, method, path, body string, header map[string]string) (int, *mcpError) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := noKeepAlive.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		i := bytes.Index(raw, []byte("data: "))
		require.GreaterOrEqual(t, i, 0, "%s %s: an event stream without data: %q", method, path, raw)
		raw = raw[i+len("data: "):]
	} else {
		require.True(t, strings.HasPrefix(ct, "application/json"), "%s %s answered %d %s: %q", method, path, resp.StatusCode, ct, raw)
	}
	var m struct{ Error *mcpError }
	require.NoError(t, json.Unmarshal(raw, &m), "%q", raw)
	return resp.StatusCode, m.Error
}

// Issue 10 item 10 for /mcp: every error the endpoint writes is a JSON-RPC
// error whose data carries our code, also those the MCP SDK writes itself
// (its transport's plain-text refusals, parameters that do not decode),
// with the HTTP status the SDK chose; results pass unchanged.
func TestIssue10MCPErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	s := serve(t, server.Config{}, nil)
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code                     string
	}{
		{"GET", http.MethodGet, "/mcp", "", map[string]string{"Accept": "text/event-stream"}, 405, "METHOD_NOT_ALLOWED"},
		{"DELETE", http.MethodDelete, "/mcp", "", nil, 405, "METHOD_NOT_ALLOWED"},
		{"PUT", http.MethodPut, "/mcp", rpc("tools/list", "{}"), nil, 405, "METHOD_NOT_ALLOWED"},
		{"text/plain", http.MethodPost, "/mcp", rpc("tools/list", "{}"), map[string]string{"Content-Type": "text/plain"}, 415, "BAD_USER_INPUT"},
		{"no Accept", http.MethodPost, "/mcp", rpc("tools/list", "{}"), map[string]string{"Accept": ""}, 400, "BAD_USER_INPUT"},
		{"not JSON", http.MethodPost, "/mcp", "nope", nil, 400, "BAD_USER_INPUT"},
		{"empty body", http.MethodPost, "/mcp", "", nil, 400, "BAD_USER_INPUT"},
		{"unknown method", http.MethodPost, "/mcp", rpc("foo/bar", "{}"), nil, 400, "BAD_USER_INPUT"},
		{"no params", http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, nil, 400, "BAD_USER_INPUT"},
		{"call without id", http.MethodPost, "/mcp", `{"jsonrpc":"2.0","method":"tools/list","params":{}}`, nil, 400, "BAD_USER_INPUT"},
		{"unknown protocol version", http.MethodPost, "/mcp", rpc("tools/list", "{}"), map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, 400, "BAD_USER_INPUT"},
		{"another origin", http.MethodPost, "/mcp", rpc("tools/list", "{}"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://elsewhere.example"}, 403, "FORBIDDEN"},
		{"params that do not decode", http.MethodPost, "/mcp", rpc("tools/call", `{"name": 5}`), nil, 200, "BAD_USER_INPUT"},
		{"unknown tool", http.MethodPost, "/mcp", rpc("tools/call", `{"name": "nope"}`), nil, 200, "NOT_FOUND"},
		{"unknown endpoint", http.MethodPost, "/mcp/nope", rpc("tools/list", "{}"), nil, 404, "NOT_FOUND"},
		{"not an action id", http.MethodPost, "/mcp/actions/x", rpc("tools/list", "{}"), nil, 404, "NOT_FOUND"},
		{"over the body limit", http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":"` + strings.Repeat("x", server.MaxBodyBytes) + `"}}`, nil, 413, "PAYLOAD_TOO_LARGE"},
	} {
		status, e := s.mcpSend(t, tc.method, tc.path, tc.body, tc.header)
		require.Equal(t, tc.status, status, tc.name)
		require.NotNil(t, e, "%s: no JSON-RPC error", tc.name)
		require.Equal(t, tc.code, e.Data.Code, "%s: %+v", tc.name, e)
		require.NotEmpty(t, e.Message, tc.name)
		require.NotZero(t, e.Code, tc.name)
	}
	status, e := s.mcpSend(t, http.MethodPost, "/mcp", rpc("tools/list", "{}"), nil)
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, e)
	s.requireAlive(t)
}

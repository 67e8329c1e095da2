package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

// Helpers for the subscription tests (issue 12): a running service, an SSE
// client reading text/event-stream by hand, and a graphql-transport-ws
// client over github.com/coder/websocket.

// liveWait bounds how long a test waits for an update that must come; it
// is a guard against a hang, never a stand-in for synchronisation.
const liveWait = 30 * time.Second

// liveStart is the time on newLiveEnv's server clock, which stays there.
var liveStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// newLiveEnv starts a service with cfg (database, clock and poll filled in)
// whose dispatcher, executor, listener and change feed run, behind
// httptest: the dev principal, or with cfg.Auth the bearer-token front;
// wrap, when given, wraps the handler.
func newLiveEnv(t testing.TB, cfg server.Config, wrap ...func(http.Handler) http.Handler) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.DatabaseURL = pgtest.NewDB(t)
	cfg.Clock = clock.NewManual(liveStart)
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	app, err := server.New(ctx, cfg, log)
	require.NoError(t, err)
	h := app.Handler()
	if cfg.Auth {
		h = app.AuthHandler()
	}
	for _, w := range wrap {
		h = w(h)
	}
	srv := httptest.NewServer(h)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		srv.CloseClientConnections()
		srv.Close()
		app.Close()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	return &env{app: app, srv: srv, logs: logs}
}

// liveMsg is one message of a stream: an SSE "next" event's data or a
// graphql-transport-ws message.
type liveMsg struct {
	Type    string          `json:"type"` // next, complete, error (WebSocket); next, complete (SSE)
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// result decodes a next message's payload (an execution result).
func (m liveMsg) result(t testing.TB) response {
	t.Helper()
	require.Equal(t, "next", m.Type, "message: %s %s", m.Type, m.Payload)
	var r response
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&r))
	return r
}

// data decodes a next message's data into out, requiring no errors.
func (m liveMsg) data(t testing.TB, out any) {
	t.Helper()
	r := m.result(t)
	require.Empty(t, r.Errors, "errors: %+v", r.Errors)
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.UseNumber()
	require.NoError(t, dec.Decode(out))
}

// stream is what both clients offer: the messages of one subscription.
type stream interface {
	next(t testing.TB) liveMsg
	close()
}

// sseStream reads one SSE subscription.
type sseStream struct {
	msgs   chan liveMsg
	cancel context.CancelFunc
	status int
	header http.Header
	done   chan struct{}
}

// sse starts a subscription over server-sent events: POST /graphql with
// Accept: text/event-stream; token, when set, goes in Authorization.
func sse(t testing.TB, url, token, query string, vars map[string]any) *sseStream {
	t.Helper()
	return sseWith(t, url, token, query, vars, nil)
}

// sseWith is sse with extra request headers.
func sseWith(t testing.TB, url, token, query string, vars map[string]any, header http.Header) *sseStream {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	s := &sseStream{msgs: make(chan liveMsg, 1024), cancel: cancel, status: resp.StatusCode, header: resp.Header, done: make(chan struct{})}
	t.Cleanup(s.close)
	go func() {
		defer close(s.done)
		defer close(s.msgs)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			s.msgs <- liveMsg{Type: "http", Payload: b.Bytes()}
			return
		}
		r := bufio.NewReader(resp.Body)
		event := ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
				if event == "complete" {
					s.msgs <- liveMsg{Type: "complete"}
				}
			case strings.HasPrefix(line, "data: "):
				s.msgs <- liveMsg{Type: event, Payload: json.RawMessage(strings.TrimPrefix(line, "data: "))}
			}
		}
	}()
	return s
}

func (s *sseStream) next(t testing.TB) liveMsg {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		require.True(t, ok, "the SSE stream ended")
		return m
	case <-time.After(liveWait):
		require.FailNow(t, "no SSE message in time")
	}
	return liveMsg{}
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
}

// wsClient is a graphql-transport-ws client: it acknowledges pings and
// hands every other message to msgs.
type wsClient struct {
	conn *websocket.Conn
	msgs chan liveMsg
	done chan struct{}
	// closeStatus and closeReason are set when the server closed the socket.
	mu          sync.Mutex
	closeStatus websocket.StatusCode
	closeReason string
}

// dialWS connects to /graphql with the graphql-transport-ws subprotocol
// and sends connection_init with payload (nil for none); header goes on
// the upgrade request.
func dialWS(t testing.TB, url string, header http.Header, payload map[string]any) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveWait)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header})
	if err != nil {
		return nil, resp, err
	}
	conn.SetReadLimit(8 << 20)
	c := &wsClient{conn: conn, msgs: make(chan liveMsg, 1024), done: make(chan struct{})}
	t.Cleanup(func() {
		_ = conn.Close(websocket.StatusNormalClosure, "")
		<-c.done
	})
	go c.read()
	init := map[string]any{"type": "connection_init"}
	if payload != nil {
		init["payload"] = payload
	}
	c.send(t, init)
	return c, resp, nil
}

func (c *wsClient) read() {
	defer close(c.done)
	defer close(c.msgs)
	for {
		_, b, err := c.conn.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.closeStatus, c.closeReason = websocket.CloseStatus(err), closeReason(err)
			c.mu.Unlock()
			return
		}
		var m liveMsg
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if m.Type == "ping" {
			_ = c.conn.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		if m.Type == "pong" || m.Type == "ka" {
			continue
		}
		c.msgs <- m
	}
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

func (c *wsClient) send(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), liveWait)
	defer cancel()
	require.NoError(t, c.conn.Write(ctx, websocket.MessageText, b))
}

// recv returns the next message, or type "closed" when the socket closed.
func (c *wsClient) recv(t testing.TB) liveMsg {
	t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			return liveMsg{Type: "closed"}
		}
		return m
	case <-time.After(liveWait):
		require.FailNow(t, "no WebSocket message in time")
	}
	return liveMsg{}
}

// acked waits for connection_ack.
func (c *wsClient) acked(t testing.TB) {
	t.Helper()
	m := c.recv(t)
	require.Equal(t, "connection_ack", m.Type, "payload %s", m.Payload)
}

// subscribe starts operation id and returns its stream.
func (c *wsClient) subscribe(t testing.TB, id, query string, vars map[string]any) *wsStream {
	t.Helper()
	c.send(t, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
	return &wsStream{c: c, id: id}
}

// wsStream is one subscription of a wsClient (the client carries one at a
// time in these tests: messages of other ids fail the test).
type wsStream struct {
	c  *wsClient
	id string
}

func (s *wsStream) next(t testing.TB) liveMsg {
	t.Helper()
	m := s.c.recv(t)
	if m.Type != "closed" {
		require.Equal(t, s.id, m.ID, "message %s %s", m.Type, m.Payload)
	}
	return m
}

func (s *wsStream) close() {
	b, _ := json.Marshal(map[string]any{"id": s.id, "type": "complete"})
	_ = s.c.conn.Write(context.Background(), websocket.MessageText, b)
}

package httpkind_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/httpkind"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// createMonitor is the seed's monitor with kind http: a session per
// account, a turn per entry.
const createMonitor = `mutation($id: UUID!, $config: JSON) { actions { createAction(id: $id, input: {
  name: "http-monitor", kind: "http", config: $config
  triggers: [
    { name: "opened", event: "event.type == \"account.inserted\"",
      session: { start: { input: { account_id: "string(event.data.account_id)" } } } }
    { name: "entry", event: "event.type == \"entry.inserted\"",
      session: { resume: { id: "string(event.data.account_id)" } } }
  ]
  session: { id: "string(session.input.account_id)", turns: { on: ["entry"], maxInputs: 100 } }
}) { actionId } } }`

type stack struct {
	app *server.App
	clk *clock.Manual
}

func newStack(t *testing.T) *stack {
	t.Helper()
	clk := clock.NewManual(t0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The receivers listen on loopback, which the http kind refuses unless allowed (issue 11).
	app, err := server.New(context.Background(), server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clk, HTTPAllow: []string{"127.0.0.1"}}, log)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	return &stack{app: app, clk: clk}
}

// gql runs one GraphQL operation and returns its errors' codes and fields.
func (s *stack) gql(t *testing.T, query string, vars map[string]any) []map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	rec, req := httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	s.app.Handler().ServeHTTP(rec, req)
	var r struct {
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), rec.Body.String())
	out := make([]map[string]any, len(r.Errors))
	for i, e := range r.Errors {
		out[i] = e.Extensions
		out[i]["message"] = e.Message
	}
	return out
}

// run creates the monitor pointing at url, opens an account, posts one
// entry and steps the dispatcher and executor until nothing is left; it
// returns the session.
func (s *stack) run(t *testing.T, config map[string]any) *session.Session {
	t.Helper()
	id := uuid.New()
	require.Empty(t, s.gql(t, createMonitor, map[string]any{"id": id, "config": config}))
	return s.drive(t, id)
}

// data runs one operation that must succeed and returns its data.
func (s *stack) data(t *testing.T, query string, vars map[string]any) json.RawMessage {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	rec, req := httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	s.app.Handler().ServeHTTP(rec, req)
	var r struct {
		Data   json.RawMessage
		Errors []any
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), rec.Body.String())
	require.Empty(t, r.Errors)
	return r.Data
}

// drive opens an account for action id, posts one entry and steps the
// dispatcher and executor until nothing is left; it returns the session.
func (s *stack) drive(t *testing.T, id uuid.UUID) *session.Session {
	t.Helper()
	ctx := context.Background()
	acct := uuid.NewString()
	_, err := s.app.Ledger.PutValue(ctx, "account", acct, jsonvalue.MustEncode(map[string]any{"account_id": acct}), "")
	require.NoError(t, err)
	_, err = s.app.Ledger.PutValue(ctx, "entry", acct+"-1", jsonvalue.MustEncode(map[string]any{"account_id": acct, "amount": 12}), "")
	require.NoError(t, err)
	for {
		n, err := s.app.Dispatcher.DispatchOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	for {
		ran, err := s.app.Executor.RunOnce(ctx)
		require.NoError(t, err)
		if !ran {
			break
		}
	}
	sess, err := s.app.Sessions.Get(ctx, id, acct)
	require.NoError(t, err)
	return sess
}

// turn returns the session's only turn and its execution.
func (s *stack) turn(t *testing.T, sess *session.Session) (*turns.Turn, *turns.Execution) {
	t.Helper()
	ctx := context.Background()
	ts, err := s.app.Turns.Turns(ctx, sess.SID, 0, 10)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	x, err := s.app.Turns.Execution(ctx, ts[0].ExecutionID)
	require.NoError(t, err)
	return &ts[0], x
}

// script is a receiver answering with the given replies in order (the last
// repeats) and recording what it saw.
type script struct {
	mu      sync.Mutex
	replies []reply
	seen    []captured
}

type reply struct {
	status int
	body   string
}

func (sc *script) serve(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sc.mu.Lock()
		sc.seen = append(sc.seen, captured{header: r.Header.Clone(), body: body})
		rp := sc.replies[min(len(sc.seen), len(sc.replies))-1]
		sc.mu.Unlock()
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, rp.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func cfg(url string, timeoutMS int) map[string]any {
	return map[string]any{"url": url, "secret": secret, "timeout_ms": timeoutMS}
}

// An outcome from the receiver commits as the turn (T5, T6); the request
// verifies with the service clock's time.
func TestE2EOutcomeCommits(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sc := &script{replies: []reply{{200, `{"status": "OPEN", "state": {"seen": 1}, "output": {"ok": true}}`}}}
	sess := s.run(t, cfg(sc.serve(t), 5000))
	require.Equal(t, session.Open, sess.Status)
	require.JSONEq(t, `{"seen": 1}`, string(sess.State))
	tn, x := s.turn(t, sess)
	require.EqualValues(t, "COMPLETED", tn.Status)
	require.Equal(t, 1, x.Attempts)
	require.JSONEq(t, `{"ok": true}`, string(x.Output))

	require.Len(t, sc.seen, 1)
	got := sc.seen[0]
	require.NoError(t, httpkind.Verify(secret, got.header.Get(httpkind.HeaderTimestamp), string(got.body),
		got.header.Get(httpkind.HeaderSignature), s.clk.Now(), 0))
	var b httpkind.Body
	require.NoError(t, json.Unmarshal(got.body, &b))
	require.Equal(t, sess.ID, b.SessionID)
	require.Equal(t, 1, b.Turn)
	require.Len(t, b.Inputs, 1)
	require.Equal(t, "entry.inserted", b.Inputs[0].Event.Type)
}

// T7: a 500 is retried; the retry is the same execution (same header) and
// the turn commits once, with two attempts.
func TestE2ERetryThenSuccess(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sc := &script{replies: []reply{{500, "busy"}, {200, `{"status": "OPEN"}`}}}
	sess := s.run(t, cfg(sc.serve(t), 5000))
	tn, x := s.turn(t, sess)
	require.EqualValues(t, "COMPLETED", tn.Status)
	require.Equal(t, 2, x.Attempts)
	require.Len(t, sc.seen, 2)
	require.Equal(t, x.ID.String(), sc.seen[0].header.Get(httpkind.HeaderExecution))
	require.Equal(t, x.ID.String(), sc.seen[1].header.Get(httpkind.HeaderExecution))
	var first, second httpkind.Body
	require.NoError(t, json.Unmarshal(sc.seen[0].body, &first))
	require.NoError(t, json.Unmarshal(sc.seen[1].body, &second))
	require.Equal(t, 1, first.Attempt)
	require.Equal(t, 2, second.Attempt)
	first.Attempt, second.Attempt = 0, 0
	require.Equal(t, first, second, "a retry sees the same turn (T7)")
}

// Permanent failures fail the turn at the first attempt: a 4xx, and a
// malformed reply (action_output_invalid).
func TestE2EPermanentFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply reply
		error string
	}{
		{"bad request", reply{400, "no"}, "http: receiver answered 400"},
		{"malformed reply", reply{200, `{"status": "OPEN", "verdict": "fine"}`}, "action_output_invalid:"},
		{"invalid outcome", reply{200, `{"status": "DONE"}`}, "action_output_invalid:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			sc := &script{replies: []reply{tc.reply}}
			sess := s.run(t, cfg(sc.serve(t), 5000))
			require.Equal(t, session.Failed, sess.Status)
			tn, x := s.turn(t, sess)
			require.EqualValues(t, "FAILED", tn.Status)
			require.Equal(t, 1, x.Attempts)
			require.Len(t, sc.seen, 1)
			require.NotNil(t, x.Error)
			require.Contains(t, *x.Error, tc.error)
		})
	}
}

// T7: a receiver that does not answer within timeout_ms is retried until
// the attempts run out, then the turn fails.
func TestE2ETimeoutRetriedThenFails(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sess := s.run(t, cfg(stall(t), 20))
	require.Equal(t, session.Failed, sess.Status)
	tn, x := s.turn(t, sess)
	require.EqualValues(t, "FAILED", tn.Status)
	require.Equal(t, 3, x.Attempts)
	require.NotNil(t, x.Error)
	require.Contains(t, *x.Error, "no reply within 20ms")
}

// A3: createAction refuses a bad http config with INVALID_CONFIG and the field.
func TestE2EConfigErrorsAtCreate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, tc := range []struct {
		config map[string]any
		field  string
	}{
		{map[string]any{"secret": secret}, "config.url"},
		{map[string]any{"url": "ftp://x.test", "secret": secret}, "config.url"},
		{map[string]any{"url": "https://x.test", "secret": "short"}, "config.secret"},
		{map[string]any{"url": "https://x.test", "secret": secret, "timeout_ms": 60001}, "config.timeout_ms"},
	} {
		errs := s.gql(t, createMonitor, map[string]any{"id": uuid.New(), "config": tc.config})
		require.Len(t, errs, 1, "%v", tc.config)
		require.Equal(t, "INVALID_CONFIG", errs[0]["code"])
		require.Equal(t, "input."+tc.field, errs[0]["field"])
	}
}

// Issue 10 item 9: the signing secret is write-only. Queries show it as
// turns.Redacted; an update that sends that back keeps the secret, one
// that sends a new secret replaces it.
func TestE2ESecretIsWriteOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sc := &script{replies: []reply{{200, `{"status": "OPEN"}`}}}
	url := sc.serve(t)
	id := uuid.New()
	require.Empty(t, s.gql(t, createMonitor, map[string]any{"id": id, "config": cfg(url, 5000)}))
	read := `query($id: UUID!) { actions { action(id: $id) { definition { config } versions { definition { config } } } } }`
	out := string(s.data(t, read, map[string]any{"id": id}))
	require.NotContains(t, out, secret)
	require.Equal(t, 2, strings.Count(out, turns.Redacted), out)

	update := strings.Replace(createMonitor, "createAction(id", "updateAction(id", 1)
	kept := cfg(url, 4000)
	kept["secret"] = turns.Redacted
	require.Empty(t, s.gql(t, update, map[string]any{"id": id, "config": kept}))
	s.drive(t, id)
	require.Len(t, sc.seen, 1)
	got := sc.seen[0]
	require.NoError(t, httpkind.Verify(secret, got.header.Get(httpkind.HeaderTimestamp), string(got.body),
		got.header.Get(httpkind.HeaderSignature), s.clk.Now(), 0), "signed with the kept secret")

	fresh := cfg(url, 4000)
	fresh["secret"] = "another-secret-of-enough-bytes"
	require.Empty(t, s.gql(t, update, map[string]any{"id": id, "config": fresh}))
	s.drive(t, id)
	require.Len(t, sc.seen, 2)
	got = sc.seen[1]
	require.NoError(t, httpkind.Verify("another-secret-of-enough-bytes", got.header.Get(httpkind.HeaderTimestamp), string(got.body),
		got.header.Get(httpkind.HeaderSignature), s.clk.Now(), 0), "signed with the new secret")
	require.NotContains(t, string(s.data(t, read, map[string]any{"id": id})), "another-secret")

	// Redacted with nothing to keep is refused, naming the field.
	errs := s.gql(t, createMonitor, map[string]any{"id": uuid.New(), "config": kept})
	require.Len(t, errs, 1)
	require.Equal(t, "INVALID_CONFIG", errs[0]["code"])
	require.Equal(t, "input.config.secret", errs[0]["field"])
}

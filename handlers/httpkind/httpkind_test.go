package httpkind_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/httpkind"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

const secret = "0123456789abcdef-secret"

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// captured is one request a receiver saw.
type captured struct {
	header http.Header
	body   []byte
}

// receiver answers every request with status and reply and hands each
// request it saw to the returned channel.
func receiver(t *testing.T, status int, reply string) (string, <-chan captured) {
	t.Helper()
	seen := make(chan captured, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- captured{header: r.Header.Clone(), body: body}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, seen
}

func newHandler(t *testing.T, config string) turns.Handler {
	t.Helper()
	h, err := httpkind.Kind(clock.NewManual(t0), httpkind.AllowAll()).New(turns.Spec{Config: jsonvalue.Value(config)})
	require.NoError(t, err)
	return h
}

func config(url string) string {
	return `{"url": "` + url + `", "secret": "` + secret + `", "timeout_ms": 5000}`
}

func request() *turns.Request {
	ends := t0.Add(time.Hour)
	return &turns.Request{
		ActionID: uuid.New(), Version: 2, SessionID: "acct-1", Input: jsonvalue.Value(`{"account_id":"a"}`),
		State: jsonvalue.Value(`{"count":1}`), Turn: 3, Final: true, EndsAt: &ends, ExecutionID: uuid.New(), Attempt: 2,
		Inputs: []turns.InputView{{Identity: "event:1", Kind: "EVENT", Sequence: 1, Triggers: []string{"entry"},
			Event: &turns.EventView{ID: uuid.New(), Type: "entry.inserted", Data: jsonvalue.Value(`{"amount":12.50}`), CommitTime: t0, Position: 7}}},
	}
}

// The request carries the whole turn (T5, T9) and the execution id header
// receivers deduplicate retries by (T7).
func TestRequestCarriesTheTurn(t *testing.T) {
	t.Parallel()
	url, seen := receiver(t, 200, `{"status": "COMPLETED", "reason": "done", "state": {"n": 2}, "output": {"ok": true}}`)
	req := request()
	out, err := newHandler(t, config(url)).Run(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, &turns.Outcome{State: jsonvalue.Value(`{"n": 2}`), Status: "COMPLETED", Reason: "done", Output: jsonvalue.Value(`{"ok": true}`)}, out)

	got := <-seen
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, strconv.FormatInt(t0.Unix(), 10), got.header.Get(httpkind.HeaderTimestamp))
	require.Equal(t, req.ExecutionID.String(), got.header.Get(httpkind.HeaderExecution))
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got.body, &body))
	require.ElementsMatch(t, []string{"action_id", "version", "session_id", "input", "state", "inputs", "turn", "final", "ends_at", "execution_id", "attempt"}, keys(body))
	var b httpkind.Body
	require.NoError(t, json.Unmarshal(got.body, &b))
	require.Equal(t, req.ActionID, b.ActionID)
	require.Equal(t, 2, b.Version)
	require.Equal(t, "acct-1", b.SessionID)
	require.JSONEq(t, `{"account_id":"a"}`, string(b.Input))
	require.JSONEq(t, `{"count":1}`, string(b.State))
	require.Equal(t, 3, b.Turn)
	require.True(t, b.Final)
	require.True(t, req.EndsAt.Equal(*b.EndsAt))
	require.Equal(t, req.ExecutionID, b.ExecutionID)
	require.Equal(t, 2, b.Attempt)
	require.Len(t, b.Inputs, 1)
	require.Equal(t, "entry.inserted", b.Inputs[0].Event.Type)
	require.Equal(t, `{"amount":12.50}`, string(b.Inputs[0].Event.Data), "numbers travel exactly")
}

// A receiver verifies the signature with Verify; a changed body, another
// secret or a stale timestamp fail.
func TestSignatureVerifies(t *testing.T) {
	t.Parallel()
	url, seen := receiver(t, 200, `{"status": "OPEN"}`)
	_, err := newHandler(t, config(url)).Run(context.Background(), request())
	require.NoError(t, err)
	got := <-seen
	ts, sig := got.header.Get(httpkind.HeaderTimestamp), got.header.Get(httpkind.HeaderSignature)
	require.Regexp(t, `^v1=[0-9a-f]{64}$`, sig)

	require.NoError(t, httpkind.Verify(secret, ts, string(got.body), sig, t0.Add(time.Minute), 5*time.Minute))
	require.NoError(t, httpkind.Verify(secret, ts, string(got.body), "v1=00,"+sig, t0, time.Minute), "any listed signature may match")
	require.ErrorIs(t, httpkind.Verify(secret, ts, string(got.body)+" ", sig, t0, time.Minute), httpkind.ErrSignature)
	require.ErrorIs(t, httpkind.Verify("another-secret-of-16", ts, string(got.body), sig, t0, time.Minute), httpkind.ErrSignature)
	require.ErrorIs(t, httpkind.Verify(secret, ts, string(got.body), sig, t0.Add(10*time.Minute), 5*time.Minute), httpkind.ErrTimestamp)
	require.ErrorIs(t, httpkind.Verify(secret, ts, string(got.body), sig, t0.Add(-10*time.Minute), 5*time.Minute), httpkind.ErrTimestamp)
	require.ErrorIs(t, httpkind.Verify(secret, "soon", string(got.body), sig, t0, time.Minute), httpkind.ErrTimestamp)
}

// Reply statuses map to retryable and permanent errors (T7); a malformed
// 2xx reply is action_output_invalid.
func TestReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		status    int
		reply     string
		permanent bool
		prefix    string
	}{
		{"server error retries", 500, "boom", false, "http: receiver answered 500"},
		{"bad gateway retries", 502, "", false, "http: receiver answered 502"},
		{"too many requests retries", 429, "", false, "http: receiver answered 429"},
		{"bad request fails", 400, "no", true, "http: receiver answered 400"},
		{"not found fails", 404, "", true, "http: receiver answered 404"},
		{"redirect not followed", 302, "", true, "http: receiver answered 302"},
		{"not json", 200, "ok", true, "action_output_invalid:"},
		{"unknown key", 200, `{"status": "OPEN", "extra": 1}`, true, "action_output_invalid:"},
		{"no status", 200, `{"state": {}}`, true, "action_output_invalid:"},
		{"not an object", 200, `null`, true, "action_output_invalid:"},
		{"trailing data", 200, `{"status": "OPEN"} {}`, true, "action_output_invalid:"},
		{"status not a string", 200, `{"status": 1}`, true, "action_output_invalid:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, _ := receiver(t, tc.status, tc.reply)
			_, err := newHandler(t, config(url)).Run(context.Background(), request())
			require.Error(t, err)
			require.Equal(t, tc.permanent, turns.IsPermanent(err), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), tc.prefix), err.Error())
		})
	}
}

// A reply over 1 MiB is refused; a connection error is retryable.
func TestReplyLimitsAndConnectionErrors(t *testing.T) {
	t.Parallel()
	big := `{"status": "OPEN", "output": "` + pad(httpkind.MaxReply) + `"}`
	url, _ := receiver(t, 200, big)
	_, err := newHandler(t, config(url)).Run(context.Background(), request())
	require.True(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "action_output_invalid: the reply is larger than")

	srv := httptest.NewServer(http.NotFoundHandler())
	closed := srv.URL
	srv.Close()
	_, err = newHandler(t, config(closed)).Run(context.Background(), request())
	require.Error(t, err)
	require.False(t, turns.IsPermanent(err), "%v", err)
}

// A receiver slower than timeout_ms fails the attempt, retryably (T7).
func TestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	_, err := newHandler(t, `{"url": "`+stall(t)+`", "secret": "`+secret+`", "timeout_ms": 20}`).Run(context.Background(), request())
	require.Error(t, err)
	require.False(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "no reply within 20ms")
}

// Config is checked when the action is created (A3): each mistake names its field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	src := "x"
	for _, tc := range []struct {
		name, config, field string
		source              *string
	}{
		{"missing config", ``, "config.url", nil},
		{"null config", `null`, "config.url", nil},
		{"unknown key", `{"url": "https://x.test", "secret": "` + secret + `", "headers": {}}`, "config", nil},
		{"no url", `{"secret": "` + secret + `"}`, "config.url", nil},
		{"relative url", `{"url": "/turn", "secret": "` + secret + `"}`, "config.url", nil},
		{"ftp url", `{"url": "ftp://x.test/turn", "secret": "` + secret + `"}`, "config.url", nil},
		{"no secret", `{"url": "https://x.test"}`, "config.secret", nil},
		{"short secret", `{"url": "https://x.test", "secret": "fifteen-bytes!!"}`, "config.secret", nil},
		{"zero timeout", `{"url": "https://x.test", "secret": "` + secret + `", "timeout_ms": 0}`, "config.timeout_ms", nil},
		{"long timeout", `{"url": "https://x.test", "secret": "` + secret + `", "timeout_ms": 60001}`, "config.timeout_ms", nil},
		{"source", `{"url": "https://x.test", "secret": "` + secret + `"}`, "source", &src},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := httpkind.Kind(clock.NewManual(t0), httpkind.AllowAll()).New(turns.Spec{Config: jsonvalue.Value(tc.config), Source: tc.source})
			f := fault.As(err)
			require.NotNil(t, f, "%v", err)
			require.Equal(t, fault.InvalidConfig, f.Code)
			require.Equal(t, tc.field, f.Field)
		})
	}
	_, err := httpkind.Kind(clock.NewManual(t0), httpkind.AllowAll()).New(turns.Spec{Config: jsonvalue.Value(`{"url": "http://127.0.0.1:1/t", "secret": "` + secret + `", "timeout_ms": 60000}`)})
	require.NoError(t, err)
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func pad(n int) string {
	return strings.Repeat("a", n)
}

// stall serves a receiver that never answers until the test ends (the
// server notices a client hanging up only once it reads the body, which it
// does not) and returns its URL.
func stall(t *testing.T) string {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: cleanups run last-in first-out
	return srv.URL
}

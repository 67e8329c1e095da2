package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// stubReply is one canned HTTP answer of an apiStub.
type stubReply struct {
	status int
	body   string
}

// stubCall is one request an apiStub received.
type stubCall struct {
	method string
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

// apiStub is a local model API: it records each request and answers with
// the next canned reply, in order.
type apiStub struct {
	t       *testing.T
	url     string
	mu      sync.Mutex
	calls   []stubCall
	replies []stubReply
}

func newAPIStub(t *testing.T, replies ...stubReply) *apiStub {
	t.Helper()
	s := &apiStub{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *apiStub) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("read request body: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		s.t.Errorf("request body is not a JSON object: %v: %s", err, raw)
	}
	s.mu.Lock()
	s.calls = append(s.calls, stubCall{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body, raw: raw})
	n := len(s.calls)
	s.mu.Unlock()
	if n > len(s.replies) {
		s.t.Errorf("unexpected request %d to %s", n, r.URL.Path)
		http.Error(w, "no reply scripted", http.StatusTeapot)
		return
	}
	reply := s.replies[n-1]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	_, _ = io.WriteString(w, reply.body)
}

// requests returns the requests received so far.
func (s *apiStub) requests() []stubCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stubCall(nil), s.calls...)
}

// only returns the single request received, failing otherwise.
func (s *apiStub) only(t *testing.T) stubCall {
	t.Helper()
	calls := s.requests()
	require.Len(t, calls, 1)
	return calls[0]
}

// jsonOf decodes s the way request bodies are decoded, for comparisons.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

// weatherTools is the tool offer the tool-call tests send.
var weatherTools = []ToolSpec{
	{
		Name:        "get_weather",
		Description: "Current weather of a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":100}},"required":["city"],"additionalProperties":false}`),
	},
	{
		Name: "get_time",
		// A number float64 cannot hold, to show schemas go out verbatim.
		InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"},"skew":{"type":"integer","maximum":9007199254740993}}}`),
	},
}

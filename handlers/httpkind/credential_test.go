package httpkind_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/httpkind"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// callback is one GraphQL call made with a bearer token against srv: the
// HTTP status, the data and the error codes.
func callback(t *testing.T, srv, token, query string, vars map[string]any) (int, map[string]any, []string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, srv+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r struct {
		Data   map[string]any
		Errors []struct{ Extensions map[string]any }
	}
	require.NoError(t, json.Unmarshal(raw, &r), string(raw))
	var codes []string
	for _, e := range r.Errors {
		c, _ := e.Extensions["code"].(string)
		codes = append(codes, c)
	}
	return resp.StatusCode, r.Data, codes
}

const readSession = `query($a: UUID!, $s: String!) { actions { action(id: $a) { id session(id: $s) {
  id status input state running
  turns { nodes { number status inputs { identity } checkpoint { status } } }
  inputs { nodes { identity kind status sequence event { eventType data } } }
} } } }`

// T10: while a turn runs, the http kind's receiver gets a credential that
// reads its own session (turns and inputs) over POST /graphql with the
// authorisation layer on, and nothing else: not a second session of the
// same action, no listing, no other field, no mutation. After the turn
// commits the credential is refused (401).
func TestE2ECredentialReadsOwnSessionOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := httptest.NewServer(s.app.AuthHandler())
	t.Cleanup(api.Close)

	actionID := uuid.New()
	acctA, acctB := uuid.NewString(), uuid.NewString()

	type check struct {
		status int
		data   map[string]any
		codes  []string
	}
	var (
		mu       sync.Mutex
		creds    = map[string]string{} // session id -> credential seen
		own      check
		refusals = map[string]check{}
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b httpkind.Body
		if err := json.Unmarshal(raw, &b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		creds[b.SessionID] = b.Credential
		mu.Unlock()
		if b.SessionID == acctA && b.Credential != "" {
			// Call back into the service during the turn.
			var c check
			c.status, c.data, c.codes = callback(t, api.URL, b.Credential, readSession, map[string]any{"a": actionID, "s": acctA})
			out := map[string]check{}
			for name, q := range map[string]struct {
				query string
				vars  map[string]any
			}{
				"other session": {readSession, map[string]any{"a": actionID, "s": acctB}},
				"list sessions": {`query($a: UUID!) { actions { action(id: $a) { sessions { nodes { id } } } } }`, map[string]any{"a": actionID}},
				"definition":    {`query($a: UUID!) { actions { action(id: $a) { definition { name } } } }`, map[string]any{"a": actionID}},
				"list actions":  {`{ actions { actions { nodes { id } } } }`, nil},
				"ledger":        {`{ ledger { events { nodes { id } } } }`, nil},
				"back to the action": {`query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
					action { sessions { nodes { id } } } } } } }`, map[string]any{"a": actionID, "s": acctA}},
				"turn execution": {`query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
					turns { nodes { execution { id } } } } } } }`, map[string]any{"a": actionID, "s": acctA}},
				"close own session": {`mutation($a: UUID!, $s: String!) { actions { closeSession(actionId: $a, id: $s, reason: "x") { id } } }`,
					map[string]any{"a": actionID, "s": acctA}},
				"put value": {`mutation { ledger { putValue(namespace: "account", key: "k", value: {}) { key } } }`, nil},
			} {
				var rc check
				rc.status, rc.data, rc.codes = callback(t, api.URL, b.Credential, q.query, q.vars)
				out[name] = rc
			}
			mu.Lock()
			own, refusals = c, out
			mu.Unlock()
		}
		_, _ = io.WriteString(w, `{"status": "OPEN"}`)
	}))
	t.Cleanup(receiver.Close)

	ctx := context.Background()
	require.Empty(t, s.gql(t, createMonitor, map[string]any{"id": actionID, "config": cfg(receiver.URL, 10000)}))
	for _, acct := range []string{acctA, acctB} {
		_, err := s.app.Ledger.PutValue(ctx, "account", acct, jsonvalue.MustEncode(map[string]any{"account_id": acct}), "")
		require.NoError(t, err)
		_, err = s.app.Ledger.PutValue(ctx, "entry", acct+"-1", jsonvalue.MustEncode(map[string]any{"account_id": acct, "amount": 12}), "")
		require.NoError(t, err)
	}
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
	sess, err := s.app.Sessions.Get(ctx, actionID, acctA)
	require.NoError(t, err)
	require.Equal(t, session.Open, sess.Status)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, creds[acctA], "the credential arrives in the body")
	require.NotEmpty(t, creds[acctB])
	require.NotEqual(t, creds[acctA], creds[acctB], "each turn has its own credential")

	// Its own session, turns and inputs, read during the turn.
	require.Equal(t, http.StatusOK, own.status)
	require.Empty(t, own.codes)
	got := own.data["actions"].(map[string]any)["action"].(map[string]any)["session"].(map[string]any)
	require.Equal(t, acctA, got["id"])
	require.Equal(t, true, got["running"])
	ts := got["turns"].(map[string]any)["nodes"].([]any)
	require.Len(t, ts, 1)
	require.Equal(t, "RUNNING", ts[0].(map[string]any)["status"])
	ins := got["inputs"].(map[string]any)["nodes"].([]any)
	require.Len(t, ins, 1)
	require.Equal(t, "entry.inserted", ins[0].(map[string]any)["event"].(map[string]any)["eventType"])

	// Everything else is FORBIDDEN.
	require.Len(t, refusals, 9)
	for name, rc := range refusals {
		require.Equal(t, http.StatusOK, rc.status, name)
		require.Contains(t, rc.codes, "FORBIDDEN", name)
	}
	other := refusals["other session"].data["actions"].(map[string]any)["action"].(map[string]any)
	require.Nil(t, other["session"], "a second session of the same action is not read")

	// The turn has committed: the credential is dead.
	status, _, codes := callback(t, api.URL, creds[acctA], readSession, map[string]any{"a": actionID, "s": acctA})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, []string{"UNAUTHENTICATED"}, codes)
}

package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/httpkind"
	"github.com/actionsledger/actionsledger/server"
)

const inboxUpdatesSub = `subscription($kind: InterruptKind, $a: UUID) { inboxUpdates(kind: $kind, actionId: $a) {
  kind pending item { interruptId kind actionName action { id } session { id }
    approval { tool status } hold { cause status } } } }`

type inboxUpdate struct {
	Kind    string
	Pending int
	Item    *struct {
		InterruptID, Kind, ActionName string
		Action                        struct{ ID string }
		Session                       struct{ ID string }
		Approval                      *struct{ Tool, Status string }
		Hold                          *struct{ Cause, Status string }
	}
}

func nextInboxUpdate(t testing.TB, s stream) inboxUpdate {
	t.Helper()
	var out struct{ InboxUpdates inboxUpdate }
	s.next(t).data(t, &out)
	return out.InboxUpdates
}

// refused requires a subscription's one answer to be the error code, then
// the end of the stream.
func refused(t testing.TB, s stream, code string) {
	t.Helper()
	r := s.next(t).result(t)
	requireError(t, r, code, "")
	require.Equal(t, "null", string(r.Data))
	require.Equal(t, "complete", s.next(t).Type)
}

// Issue 12 item 2: with AUTH on, subscriptions are authorised as the
// queries they mirror, over both transports: a principal without READ on
// the action (or on the ledger) is refused before anything is read; the
// inbox covers only what the principal may read; a WebSocket takes its
// token from the upgrade's Authorization header or from connection_init,
// and is closed with 4403 without one.
func TestLiveAuthorisation(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	seed := seedInbox(t, e.env)
	e.step(t)
	_, reader := e.token(t, "reader", pol("READ", "financial.Action.document:"+seed.a))
	_, ledgerReader := e.token(t, "ledger-reader", pol("READ", "ledger"))
	_, admin := e.token(t, "admin2", pol("ADMIN", "*"))
	url := e.authed.URL
	sessA := map[string]any{"a": seed.a, "s": "a1-account"}
	sessB := map[string]any{"a": seed.b, "s": "b1-account"}

	// SSE: no token, 401; a principal without READ, FORBIDDEN.
	s := sse(t, url, "", sessionUpdatesSub, sessA)
	require.Equal(t, http.StatusUnauthorized, s.status)
	s = sse(t, url, reader, sessionUpdatesSub, sessB)
	refused(t, s, "FORBIDDEN")
	refused(t, sse(t, url, reader, ledgerEventsSub, nil), "FORBIDDEN")
	refused(t, sse(t, url, ledgerReader, sessionUpdatesSub, sessA), "FORBIDDEN")

	// Allowed: the reader follows its action's session, the ledger reader
	// the ledger (replayed from its start).
	u := nextSessionUpdate(t, sse(t, url, reader, sessionUpdatesSub, sessA))
	require.Equal(t, "WAITING", u.Session.Status)
	ev := nextEvent(t, sse(t, url, ledgerReader, ledgerEventsSub, map[string]any{"after": "0"}))
	require.Equal(t, "1", ev.Position)

	// The inbox (query and subscription) covers the actions one may read.
	require.Equal(t, 4, nextInboxUpdate(t, sse(t, url, reader, inboxUpdatesSub, nil)).Pending)
	require.Equal(t, 0, nextInboxUpdate(t, sse(t, url, reader, inboxUpdatesSub, map[string]any{"a": seed.b})).Pending)
	require.Equal(t, 0, nextInboxUpdate(t, sse(t, url, ledgerReader, inboxUpdatesSub, nil)).Pending)
	require.Equal(t, 6, nextInboxUpdate(t, sse(t, url, admin, inboxUpdatesSub, nil)).Pending)
	var q struct{ Actions struct{ Inbox inboxPage } }
	const inboxIDs = `{ actions { inbox { totalCount nodes { interruptId action { id } } } } }`
	require.NoError(t, json.Unmarshal(e.allowed(t, reader, inboxIDs, nil).Data, &q))
	require.Equal(t, 4, q.Actions.Inbox.TotalCount)
	for _, it := range q.Actions.Inbox.Nodes {
		require.Equal(t, seed.a, it.Action.ID)
	}
	require.NoError(t, json.Unmarshal(e.allowed(t, ledgerReader, inboxIDs, nil).Data, &q))
	require.Zero(t, q.Actions.Inbox.TotalCount)
	require.Empty(t, q.Actions.Inbox.Nodes)

	// WebSocket: the token in connection_init, or on the upgrade request.
	ws, _, err := dialWS(t, url, nil, map[string]any{"Authorization": "Bearer " + reader})
	require.NoError(t, err)
	ws.acked(t)
	require.Equal(t, "WAITING", nextSessionUpdate(t, ws.subscribe(t, "1", sessionUpdatesSub, sessA)).Session.Status)
	refusedWS := ws.subscribe(t, "2", sessionUpdatesSub, sessB)
	r := refusedWS.next(t).result(t)
	requireError(t, r, "FORBIDDEN", "")
	require.Equal(t, "complete", refusedWS.next(t).Type)

	ws, _, err = dialWS(t, url, http.Header{"Authorization": []string{"Bearer " + ledgerReader}}, nil)
	require.NoError(t, err)
	ws.acked(t)
	require.Equal(t, "1", nextEvent(t, ws.subscribe(t, "1", ledgerEventsSub, map[string]any{"after": "0"})).Position)

	for name, payload := range map[string]map[string]any{
		"no token":      nil,
		"unknown token": {"Authorization": "Bearer alt_unknown"},
		"not bearer":    {"Authorization": reader},
	} {
		ws, _, err := dialWS(t, url, nil, payload)
		require.NoError(t, err, name)
		require.Equal(t, "closed", ws.recv(t).Type, name)
		ws.mu.Lock()
		require.Equal(t, websocket.StatusCode(4403), ws.closeStatus, name)
		require.Contains(t, ws.closeReason, "UNAUTHENTICATED", name)
		ws.mu.Unlock()
	}
	// A bad token on the upgrade request itself: 401 before any upgrade.
	_, resp, err := dialWS(t, url, http.Header{"Authorization": []string{"Bearer alt_unknown"}}, nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// Issue 12 item 2 (T10): a handler credential reads its own session and
// nothing else; it cannot subscribe at all (a subscription would outlive
// the turn that credential dies with) nor read the inbox, over SSE or a
// WebSocket.
func TestLiveHandlerCredentialCannotSubscribe(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{Auth: true, AdminToken: adminToken, HTTPAllow: []string{"127.0.0.1"}})
	api := httptest.NewServer(e.app.AuthHandler())
	t.Cleanup(api.Close)
	// Set up as the admin: the dev principal's actions hold nothing under AUTH.
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	a := uuid.NewString()
	acct := uuid.NewString()

	type attempt struct {
		name string
		msgs []liveMsg
	}
	var mu sync.Mutex
	var attempts []attempt
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b httpkind.Body
		_ = json.Unmarshal(raw, &b)
		if b.Credential == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		own := map[string]any{"a": a, "s": acct}
		var got []attempt
		for name, sub := range map[string]struct {
			query string
			vars  map[string]any
		}{
			"own session":   {sessionUpdatesSub, own},
			"other session": {sessionUpdatesSub, map[string]any{"a": a, "s": "other"}},
			"inbox":         {inboxUpdatesSub, nil},
			"ledger":        {ledgerEventsSub, nil},
			"inbox query":   {inboxQuery, nil},
		} {
			s := sse(t, api.URL, b.Credential, sub.query, sub.vars)
			got = append(got, attempt{name: "sse " + name, msgs: []liveMsg{<-s.msgs, <-s.msgs}})
			s.close()
		}
		ws, _, err := dialWS(t, api.URL, nil, map[string]any{"Authorization": "Bearer " + b.Credential})
		if err == nil {
			ack := <-ws.msgs
			ws.subscribe(t, "1", sessionUpdatesSub, own)
			got = append(got, attempt{name: "ws own session", msgs: []liveMsg{ack, <-ws.msgs, <-ws.msgs}})
		}
		mu.Lock()
		attempts = got
		mu.Unlock()
		_, _ = io.WriteString(w, `{"status": "OPEN"}`)
	}))
	t.Cleanup(receiver.Close)

	def := monitorDef()
	def["name"], def["kind"] = "http-monitor", "http"
	def["config"] = map[string]any{"url": receiver.URL, "secret": "0123456789abcdef0123456789abcdef", "timeout_ms": 20000}
	e.ok(t, createActionOp, map[string]any{"id": a, "input": def}, nil)
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": acct, "amount": 1}, "")
	e.step(t)

	var st struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason *string
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status reason } } } }`, map[string]any{"a": a, "s": acct}, &st)
	require.Equal(t, "OPEN", st.Actions.Action.Session.Status, "%v", st.Actions.Action.Session.Reason)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 6)
	for _, at := range attempts {
		msgs := at.msgs
		if at.name == "ws own session" {
			require.Equal(t, "connection_ack", msgs[0].Type, at.name)
			msgs = msgs[1:]
		}
		r := msgs[0].result(t)
		requireError(t, r, "FORBIDDEN", "")
		require.Equal(t, "complete", msgs[1].Type, at.name)
	}
}

// Issue 12 item 2: streams are capped: past Limits.MaxStreams a new one is
// refused with HTTP 503 and UNAVAILABLE (retryable) while ordinary requests
// go on, and a WebSocket carries at most Limits.MaxSocketSubscriptions
// subscriptions at once (LIVE_MAX_STREAMS, LIVE_MAX_SOCKET_SUBSCRIPTIONS).
func TestLiveStreamLimits(t *testing.T) {
	t.Parallel()
	const perSocket = 5
	e := newLiveEnv(t, server.Config{Limits: server.Limits{MaxStreams: 2, MaxSocketSubscriptions: perSocket}})
	ws, _, err := dialWS(t, e.srv.URL, nil, nil)
	require.NoError(t, err)
	ws.acked(t)
	first := sse(t, e.srv.URL, "", ledgerEventsSub, map[string]any{"after": "0", "type": "none"})
	require.Equal(t, http.StatusOK, first.status)
	over := sse(t, e.srv.URL, "", ledgerEventsSub, nil)
	require.Equal(t, http.StatusServiceUnavailable, over.status)
	m := over.next(t)
	require.Equal(t, "http", m.Type)
	var r response
	require.NoError(t, json.Unmarshal(m.Payload, &r))
	ge := requireError(t, r, "UNAVAILABLE", "")
	require.Equal(t, true, ge.Extensions["retryable"])
	e.requireAlive(t)
	first.close()

	// One subscription more than the socket may carry: it is refused.
	for i := 0; i <= perSocket; i++ {
		ws.subscribe(t, strconv.Itoa(i), ledgerEventsSub, map[string]any{"after": "0", "type": "none"})
	}
	m = ws.recv(t)
	r = m.result(t)
	ge = requireError(t, r, "SUBSCRIPTION_LIMIT_EXCEEDED", "")
	require.Contains(t, ge.Message, "at most 5 subscriptions")
	done := ws.recv(t)
	require.Equal(t, "complete", done.Type)
	require.Equal(t, m.ID, done.ID)
}

// Issue 12 item 2: a subscription outlives the request that opened it, so
// its token is checked again while it runs: revoking the token ends its
// subscriptions with UNAUTHENTICATED, changing the principal's policies
// with FORBIDDEN (subscribing again takes the new policies), over both
// transports.
func TestLiveRevokedTokenEndsSubscriptions(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{Auth: true, AdminToken: adminToken, Live: server.LiveConfig{Recheck: 50 * time.Millisecond}})
	authed := httptest.NewServer(e.app.AuthHandler())
	t.Cleanup(authed.Close)
	ae := &authEnv{env: e, authed: authed}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		authed.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	e.appendEvent(t, "x.y", 1)
	from := map[string]any{"after": "0"}

	id, tok := ae.token(t, "watcher", pol("READ", "ledger"))
	s := sse(t, authed.URL, tok, ledgerEventsSub, from)
	require.Equal(t, "1", nextEvent(t, s).Position)
	ws, _, err := dialWS(t, authed.URL, nil, map[string]any{"Authorization": "Bearer " + tok})
	require.NoError(t, err)
	ws.acked(t)
	w := ws.subscribe(t, "1", ledgerEventsSub, from)
	require.Equal(t, "1", nextEvent(t, w).Position)
	ae.allowed(t, adminToken, `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": id})
	refused(t, s, "UNAUTHENTICATED")
	refused(t, w, "UNAUTHENTICATED")

	_, tok = ae.token(t, "changer", pol("READ", "ledger"))
	s = sse(t, authed.URL, tok, ledgerEventsSub, from)
	require.Equal(t, "1", nextEvent(t, s).Position)
	ae.token(t, "changer", pol("READ", "ledger"), pol("WRITE", "ledger:x"))
	refused(t, s, "FORBIDDEN")
}

package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
)

// The console's selections (console/app): its inbox list and badge, and
// its session screen.
const (
	consoleInboxSub = `subscription { inboxUpdates { kind pending item {
  interruptId kind actionName raisedAt
  action { id }
  session { id status }
  approval { tool toolVersion input status response { decision reason responder at } }
  hold { cause category explanation turn status skipRefusal response { decision note responder at } } } } }`
	consoleSessionSub = `subscription($a: UUID!, $s: String!) { sessionUpdates(actionId: $a, id: $s) {
  kind pendingInputs session { id status reason state running updatedAt } turn { number status checkpoint { status } }
  turnNumber attempt transcriptEntry { sequence kind data at } } }`
)

// Issue 12 item 1 (follow-up): sessionUpdates and inboxUpdates read what a
// notification says changed once per process, for all their subscribers,
// with what the console selects of it: a notification costs as many
// database reads (connections taken from the pool: a statement or a
// read-only transaction each) with one subscriber as with five. The
// service is stepped and nothing else runs, so the notifications are
// handed to the change feed by the test, as the listener would, and every
// read counted is the subscriptions'.
func TestLiveReadsSharedBySubscribers(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	s := inboxAgents(t, e)
	for _, acct := range []string{"a1", "a2"} {
		e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	}
	e.step(t)
	sid := func(id string) int64 {
		var n int64
		require.NoError(t, e.app.Pool.QueryRow(context.Background(), `SELECT sid FROM sessions WHERE action_id = $1 AND id = $2`, s.a, id).Scan(&n))
		return n
	}
	watched := map[string]any{"a": s.a, "s": "a1-account"}
	open := func(n int, query string, vars map[string]any) []stream {
		var out []stream
		for i := range n {
			if i%2 == 0 {
				out = append(out, sse(t, e.srv.URL, "", query, vars))
				continue
			}
			ws, _, err := dialWS(t, e.srv.URL, nil, nil) // a client carries one subscription here
			require.NoError(t, err)
			ws.acked(t)
			out = append(out, ws.subscribe(t, "1", query, vars))
		}
		return out
	}
	var sessions, inbox []stream
	join := func(n int, status string) {
		for _, w := range open(n, consoleSessionSub, watched) {
			require.Equal(t, status, nextSessionUpdate(t, w).Session.Status)
			sessions = append(sessions, w)
		}
		for _, w := range open(n, consoleInboxSub, nil) {
			require.Equal(t, "CURRENT", nextInboxUpdate(t, w).Kind)
			inbox = append(inbox, w)
		}
	}
	// reads publishes a notification and returns the reads until every
	// subscriber has had what until says it waits for.
	reads := func(channel, payload string, subs []stream, until func(stream)) int64 {
		e.app.Ledger.Notifier().Flush() // what the steps committed is announced (a statement of its own) before counting
		before := e.app.Pool.Stat().AcquireCount()
		e.app.Feed.Publish(channel, payload)
		for _, w := range subs {
			until(w)
		}
		return e.app.Pool.Stat().AcquireCount() - before
	}
	untilStatus := func(status string) func(stream) {
		return func(w stream) {
			for nextSessionUpdate(t, w).Session.Status != status {
			}
		}
	}
	raised := func(acct string) (payload, id string) {
		var xid string
		require.NoError(t, e.app.Pool.QueryRow(context.Background(), `SELECT raised_xid::text, id::text FROM session_interrupts
			WHERE sid = $1 AND status = 'PENDING'`, sid(acct)).Scan(&xid, &id))
		return xid + ":" + strconv.FormatInt(sid(acct), 10), id
	}
	untilRaised := func(id string) func(stream) {
		return func(w stream) {
			u := nextInboxUpdate(t, w)
			require.Equal(t, "RAISED", u.Kind)
			require.Equal(t, id, u.Item.InterruptID)
		}
	}

	// One subscriber of each: a1's turn pauses for an approval.
	join(1, "OPEN")
	e.put(t, "entry", "e-a1", map[string]any{"account_id": "a1", "amount": 100}, "")
	e.step(t)
	note := "1:" + strconv.FormatInt(sid("a1-account"), 10)
	one := reads(session.SessionsChannel, note, sessions, untilStatus("WAITING"))
	payload, id := raised("a1-account")
	oneInbox := reads(session.InboxChannel, payload, inbox, untilRaised(id))

	// Five of each: a1's approval is answered and its turn completes; a2's
	// turn pauses for one.
	join(4, "WAITING")
	e.ok(t, approveOp, map[string]any{"a": s.a, "s": "a1-account", "i": id}, nil)
	e.put(t, "entry", "e-a2", map[string]any{"account_id": "a2", "amount": 100}, "")
	e.step(t)
	five := reads(session.SessionsChannel, note, sessions, untilStatus("OPEN"))
	payload, id = raised("a2-account")
	fiveInbox := reads(session.InboxChannel, payload, inbox, untilRaised(id))

	// The answer (a COMMAND input the console does not select) costs the
	// same.
	e.ok(t, approveOp, map[string]any{"a": s.a, "s": "a2-account", "i": id}, nil)
	answered := reads(session.InboxChannel, "1:"+strconv.FormatInt(sid("a2-account"), 10), inbox, func(w stream) {
		u := nextInboxUpdate(t, w)
		require.Equal(t, "ANSWERED", u.Kind)
		require.Equal(t, id, u.Item.InterruptID)
	})

	t.Logf("reads per notification: sessionUpdates %d (1 subscriber), %d (5); inboxUpdates %d, %d, answered %d", one, five, oneInbox, fiveInbox, answered)
	require.Equal(t, int64(1), one, "sessionUpdates: one read (a snapshot of the session and its turns)")
	require.Equal(t, one, five, "sessionUpdates: one read per change, whatever the watchers")
	require.Equal(t, int64(2), oneInbox, "inboxUpdates: the changes and their actions")
	require.Equal(t, oneInbox, fiveInbox, "inboxUpdates: one read per notification, whatever the subscribers")
	require.Equal(t, oneInbox, answered, "inboxUpdates: an answer too")
}

// untilRefused reads s until its last answer, which must be the error
// code, followed by the end.
func untilRefused(t testing.TB, s stream, code string) {
	t.Helper()
	for {
		r := s.next(t).result(t)
		if len(r.Errors) == 0 {
			continue
		}
		requireError(t, r, code, "")
		require.Equal(t, "complete", s.next(t).Type)
		return
	}
}

// Issue 12 item 1 (follow-up): the shared readers keep authorisation what
// it is for queries. With AUTH on, subscribers of several principals share
// the inbox reader and a session's reader: each is told only of the
// interrupts of the actions it may read (and of its kind), and a revoked
// token ends its own subscriptions while the others go on, over both
// transports.
func TestLiveSharedReadersAuthorisation(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{Auth: true, AdminToken: adminToken, Live: server.LiveConfig{Recheck: 50 * time.Millisecond}})
	authed := e.srv
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		authed.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	ae := &authEnv{env: e, authed: authed}
	s := inboxAgents(t, e)
	e.put(t, "account", "a1", map[string]any{"account_id": "a1"}, "")
	e.put(t, "account", "b1", map[string]any{"account_id": "b1"}, "")
	e.waitSession(t, s.a, "a1-account")
	e.waitSession(t, s.b, "b1-account")
	_, readerA := ae.token(t, "reader-a", pol("READ", "financial.Action.document:"+s.a))
	_, readerB := ae.token(t, "reader-b", pol("READ", "financial.Action.document:"+s.b))
	victimID, victim := ae.token(t, "victim", pol("READ", "financial.Action.document:"+s.a))
	url := authed.URL
	dial := func(token string) *wsClient {
		ws, _, err := dialWS(t, url, nil, map[string]any{"Authorization": "Bearer " + token})
		require.NoError(t, err)
		ws.acked(t)
		return ws
	}
	wsA, wsB := dial(readerA), dial(readerB)
	watchA := map[string]any{"a": s.a, "s": "a1-account"}

	admin := sse(t, url, adminToken, inboxUpdatesSub, nil)
	holds := sse(t, url, adminToken, inboxUpdatesSub, map[string]any{"kind": "HOLD"})
	inA := sse(t, url, readerA, inboxUpdatesSub, nil)
	inB := wsB.subscribe(t, "i", inboxUpdatesSub, nil)
	victimInbox := sse(t, url, victim, inboxUpdatesSub, nil)
	for _, w := range []stream{admin, holds, inA, inB, victimInbox} {
		require.Equal(t, "CURRENT", nextInboxUpdate(t, w).Kind)
	}
	watchers := []stream{sse(t, url, readerA, sessionUpdatesSub, watchA), wsA.subscribe(t, "s", sessionUpdatesSub, watchA)}
	victimSession := sse(t, url, victim, sessionUpdatesSub, watchA)
	for _, w := range append([]stream{victimSession}, watchers...) {
		require.Equal(t, "OPEN", nextSessionUpdate(t, w).Session.Status)
	}
	expect := func(w stream, kind, id string, pending int) string {
		t.Helper()
		u := nextInboxUpdate(t, w)
		require.Equal(t, kind, u.Kind)
		require.Equal(t, pending, u.Pending)
		if id != "" {
			require.Equal(t, id, u.Item.InterruptID)
		}
		return u.Item.InterruptID
	}

	// An approval in A's session, then a hold in B's.
	e.put(t, "entry", "e-a1", map[string]any{"account_id": "a1", "amount": 100}, "")
	approval := expect(admin, "RAISED", "", 1)
	expect(inA, "RAISED", approval, 1)
	expect(victimInbox, "RAISED", approval, 1)
	e.put(t, "entry", "e-b1", map[string]any{"account_id": "b1", "amount": 1, "note": "suspicious-transfer"}, "")
	hold := expect(admin, "RAISED", "", 2)
	expect(inB, "RAISED", hold, 1)
	expect(holds, "RAISED", hold, 1)

	// The victim's token is revoked: its subscriptions end, the others'
	// go on.
	ae.allowed(t, adminToken, `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": victimID})
	untilRefused(t, victimInbox, "UNAUTHENTICATED")
	untilRefused(t, victimSession, "UNAUTHENTICATED")

	e.ok(t, approveOp, map[string]any{"a": s.a, "s": "a1-account", "i": approval}, nil)
	expect(admin, "ANSWERED", approval, 1)
	expect(inA, "ANSWERED", approval, 0) // the next after its RAISED: B's hold never reached it
	e.ok(t, `mutation($a: UUID!, $i: String!) { actions { respondToSession(actionId: $a, id: "b1-account", interruptId: $i,
		response: { hold: { decision: SKIP } }) { identity } } }`, map[string]any{"a": s.b, "i": hold}, nil)
	expect(admin, "ANSWERED", hold, 0)
	expect(inB, "ANSWERED", hold, 0) // nor A's approval B's
	expect(holds, "ANSWERED", hold, 0)

	// A's watchers followed the session through the approval to its end.
	for _, w := range watchers {
		var waited bool
		for {
			u := nextSessionUpdate(t, w)
			waited = waited || u.Session.Status == "WAITING"
			if waited && u.Session.Status == "OPEN" && u.Turn != nil && u.Turn.Status == "COMPLETED" {
				break
			}
		}
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
)

const inboxQuery = `query($first: Int, $after: String, $kind: InterruptKind, $a: UUID) { actions {
  inbox(first: $first, after: $after, kind: $kind, actionId: $a) {
    totalCount pageInfo { hasNextPage endCursor }
    nodes { interruptId kind actionName raisedAt
      action { id definition { name } }
      session { id input status action { id } }
      approval { interruptId tool toolVersion input status executionId toolAction { actionId version } execution { id } }
      hold { interruptId cause category explanation turn status }
      execution { id status turn { number } }
    } } } }`

const approveOp = `mutation($a: UUID!, $s: String!, $i: String!) { actions { respondToSession(actionId: $a, id: $s,
  interruptId: $i, response: { approval: { decision: APPROVE, reason: "ok" } }) { identity } } }`

type inboxItem struct {
	InterruptID, Kind, ActionName, RaisedAt string
	Action                                  struct {
		ID         string
		Definition struct{ Name string }
	}
	Session struct {
		ID, Status string
		Input      json.RawMessage
		Action     struct{ ID string }
	}
	Approval *struct {
		InterruptID, Tool, Status, ExecutionID string
		ToolVersion                            int
		Input                                  json.RawMessage
		ToolAction                             struct {
			ActionID string
			Version  int
		}
		Execution struct{ ID string }
	}
	Hold *struct {
		InterruptID, Cause, Category, Explanation, Status string
		Turn                                              int
	}
	Execution struct {
		ID, Status string
		Turn       struct{ Number int }
	}
}

type inboxPage struct {
	TotalCount int
	PageInfo   struct {
		HasNextPage bool
		EndCursor   *string
	}
	Nodes []inboxItem
}

func (e *env) inbox(t testing.TB, vars map[string]any) inboxPage {
	t.Helper()
	var out struct{ Actions struct{ Inbox inboxPage } }
	e.ok(t, inboxQuery, vars, &out)
	return out.Actions.Inbox
}

// inboxSeed is two agent actions over one gated tool with interrupts
// waiting: A has approvals for accounts a1-a3 and a held turn for h1; B an
// approval for b1 and a held turn for b2.
type inboxSeed struct{ tool, a, b string }

func seedInbox(t testing.TB, e *env) inboxSeed {
	t.Helper()
	s := inboxAgents(t, e)
	for _, acct := range []string{"a1", "a2", "a3", "ah1", "b1", "bh2"} {
		e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
		entry := map[string]any{"account_id": acct, "amount": 100}
		if len(acct) == 3 {
			entry["note"] = "suspicious-transfer" // the model refuses: a held turn
		}
		e.put(t, "entry", "e-"+acct, entry, "")
	}
	return s
}

// inboxAgents creates the two agents of inboxSeed, with no session yet:
// agent-a's sessions are the accounts whose id starts with "a", agent-b's
// those starting with "b".
func inboxAgents(t testing.TB, e *env) inboxSeed {
	t.Helper()
	s := inboxSeed{tool: uuid.NewString(), a: uuid.NewString(), b: uuid.NewString()}
	e.ok(t, createOp, map[string]any{"id": s.tool, "input": freezeTool()}, nil)
	for id, name := range map[string]string{s.a: "agent-a", s.b: "agent-b"} {
		def := agentMonitor(s.tool)
		def["name"] = name
		trig := def["triggers"].([]any)
		// Each agent watches accounts of its own namespace prefix.
		trig[0].(map[string]any)["event"] = `event.type == "account.inserted" && string(event.data.account_id).startsWith("` + name[len(name)-1:] + `")`
		e.ok(t, createOp, map[string]any{"id": id, "input": def}, nil)
	}
	return s
}

// newProxiedEnv is a stepped service whose database connections go
// through a proxy counting round trips.
func newProxiedEnv(t *testing.T) (*env, *pgtest.Proxy) {
	t.Helper()
	proxy := pgtest.NewProxy(t, pgtest.NewDB(t))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := server.New(context.Background(), server.Config{DatabaseURL: proxy.URL,
		Clock: clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}, log)
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.Close()
	})
	return &env{app: app, srv: srv, logs: &logBuffer{}}, proxy
}

// Issue 12 item 3: the inbox lists every pending approval request and held
// turn across sessions, oldest first, with what each asks; kind and action
// filters; paging; totalCount of the filtered inbox; and one statement per
// page plus one per kind of nested lookup, however many items.
func TestInboxQuery(t *testing.T) {
	t.Parallel()
	e, proxy := newProxiedEnv(t)
	s := seedInbox(t, e)
	e.step(t)

	all := e.inbox(t, nil)
	require.Equal(t, 6, all.TotalCount)
	require.Len(t, all.Nodes, 6)
	require.False(t, all.PageInfo.HasNextPage)
	var order []string
	rows, err := e.app.Pool.Query(context.Background(), `SELECT id::text FROM session_interrupts WHERE status = 'PENDING' ORDER BY ord`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		order = append(order, id)
	}
	require.NoError(t, rows.Err())
	var got []string
	kinds := map[string]int{}
	for _, it := range all.Nodes {
		got = append(got, it.InterruptID)
		kinds[it.Kind]++
		require.Equal(t, it.Action.ID, it.Session.Action.ID)
		require.Equal(t, it.Action.Definition.Name, it.ActionName)
		require.Equal(t, "WAITING", it.Session.Status)
		require.Equal(t, 1, it.Execution.Turn.Number)
		require.NotEmpty(t, it.RaisedAt)
		switch it.Kind {
		case "APPROVAL":
			require.Nil(t, it.Hold)
			require.Equal(t, it.InterruptID, it.Approval.InterruptID)
			require.Equal(t, "freeze_account", it.Approval.Tool)
			require.Equal(t, 1, it.Approval.ToolVersion)
			require.Equal(t, s.tool, it.Approval.ToolAction.ActionID)
			require.Equal(t, "PENDING", it.Approval.Status)
			require.Equal(t, it.Execution.ID, it.Approval.ExecutionID)
			require.Equal(t, it.Execution.ID, it.Approval.Execution.ID)
			jsonEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, it.Approval.Input)
		case "HOLD":
			require.Nil(t, it.Approval)
			require.Equal(t, it.InterruptID, it.Hold.InterruptID)
			require.Equal(t, "REFUSED", it.Hold.Cause)
			require.Equal(t, "fraud", it.Hold.Category)
			require.Equal(t, "I cannot judge this transfer", it.Hold.Explanation)
			require.EqualValues(t, "HELD", it.Execution.Status)
		}
	}
	require.Equal(t, order, got, "oldest first, in the order raised")
	require.Equal(t, map[string]int{"APPROVAL": 4, "HOLD": 2}, kinds)

	// Filters: kind, action, both; totalCount counts the filtered inbox.
	for _, c := range []struct {
		vars  map[string]any
		count int
	}{
		{map[string]any{"kind": "APPROVAL"}, 4},
		{map[string]any{"kind": "HOLD"}, 2},
		{map[string]any{"a": s.a}, 4},
		{map[string]any{"a": s.b, "kind": "HOLD"}, 1},
		{map[string]any{"a": uuid.NewString()}, 0},
	} {
		p := e.inbox(t, c.vars)
		require.Equal(t, c.count, p.TotalCount, "%v", c.vars)
		require.Len(t, p.Nodes, c.count, "%v", c.vars)
	}

	// Paging by 4: two pages, the whole inbox in order, each with the count.
	p1 := e.inbox(t, map[string]any{"first": 4})
	require.True(t, p1.PageInfo.HasNextPage)
	require.Equal(t, 6, p1.TotalCount)
	p2 := e.inbox(t, map[string]any{"first": 4, "after": *p1.PageInfo.EndCursor})
	require.False(t, p2.PageInfo.HasNextPage)
	require.Equal(t, 6, p2.TotalCount)
	paged := append(p1.Nodes, p2.Nodes...)
	require.Len(t, paged, 6)
	for i := range paged {
		require.Equal(t, order[i], paged[i].InterruptID)
	}
	empty := e.inbox(t, map[string]any{"first": 4, "after": *p2.PageInfo.EndCursor})
	require.Empty(t, empty.Nodes)
	require.Equal(t, 6, empty.TotalCount, "an empty page after a cursor still counts the inbox")
	r := e.do(t, inboxQuery, map[string]any{"first": 0})
	requireError(t, r, "BAD_USER_INPUT", "first")
	r = e.do(t, inboxQuery, map[string]any{"after": "bm9wZQ"})
	requireError(t, r, "BAD_USER_INPUT", "after")

	// Round trips: the page (with its count), then one batch per level of
	// what the nodes reach (actions, versions and executions; then the
	// executions' turns), read ahead by the resolver and not gathered by
	// timing: a page of 1 and a page of 6 cost the same, under any load.
	trips := func(first int) int64 {
		before := proxy.RoundTrips()
		e.inbox(t, map[string]any{"first": first})
		return proxy.RoundTrips() - before
	}
	one, six := trips(1), trips(6)
	t.Logf("round trips: page of 1: %d, page of 6: %d", one, six)
	require.LessOrEqual(t, one, int64(3))
	require.Equal(t, one, six, "no round trip per item")

	// An answered interrupt leaves the inbox.
	var first inboxItem
	for _, it := range all.Nodes {
		if it.Kind == "APPROVAL" {
			first = it
			break
		}
	}
	e.ok(t, approveOp, map[string]any{"a": first.Action.ID, "s": first.Session.ID, "i": first.InterruptID}, nil)
	after := e.inbox(t, nil)
	require.Equal(t, 5, after.TotalCount)
	for _, it := range after.Nodes {
		require.NotEqual(t, first.InterruptID, it.InterruptID)
	}
}

// Issue 12 items 2 and 3: inboxUpdates over both transports: the count
// when subscribing, then RAISED when a turn pauses before a gated call,
// ANSWERED when respondToSession answers it, the same for a held turn,
// and CLOSED when closing the session ends what it waited on; a kind
// filter keeps one kind.
func TestLiveInboxUpdates(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	tool := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": tool, "input": freezeTool()}, nil)
	a := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": a, "input": agentMonitor(tool)}, nil)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.waitSession(t, a, "3f0c9f8e-account")

	ws, _, err := dialWS(t, e.srv.URL, nil, nil)
	require.NoError(t, err)
	ws.acked(t)
	subs := map[string]stream{
		"sse":                  sse(t, e.srv.URL, "", inboxUpdatesSub, nil),
		"graphql-transport-ws": ws.subscribe(t, "i", inboxUpdatesSub, nil),
	}
	holds := sse(t, e.srv.URL, "", inboxUpdatesSub, map[string]any{"kind": "HOLD"})
	expect := func(s stream, name, kind, interrupt string, pending int) inboxUpdate {
		t.Helper()
		u := nextInboxUpdate(t, s)
		require.Equal(t, kind, u.Kind, name)
		require.Equal(t, pending, u.Pending, name)
		if interrupt != "" {
			require.Equal(t, interrupt, u.Item.InterruptID, name)
		}
		return u
	}
	for name, s := range subs {
		expect(s, name, "CURRENT", "", 0)
	}
	expect(holds, "holds", "CURRENT", "", 0)

	// An approval is raised, then answered.
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	var approval string
	for name, s := range subs {
		u := expect(s, name, "RAISED", approval, 1)
		approval = u.Item.InterruptID
		require.Equal(t, "APPROVAL", u.Item.Kind)
		require.Equal(t, "agent-monitor", u.Item.ActionName)
		require.Equal(t, a, u.Item.Action.ID)
		require.Equal(t, "3f0c9f8e-account", u.Item.Session.ID)
		require.Equal(t, "freeze_account", u.Item.Approval.Tool)
		require.Nil(t, u.Item.Hold)
	}
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": a, "interruptId": approval}, nil)
	for name, s := range subs {
		u := expect(s, name, "ANSWERED", approval, 0)
		require.Equal(t, "ANSWERED", u.Item.Approval.Status)
	}

	// A held turn is raised, then answered with a retry.
	e.put(t, "entry", "e2", map[string]any{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}, "")
	var hold string
	for name, s := range map[string]stream{"sse": subs["sse"], "graphql-transport-ws": subs["graphql-transport-ws"], "holds": holds} {
		u := expect(s, name, "RAISED", hold, 1)
		hold = u.Item.InterruptID
		require.Equal(t, "HOLD", u.Item.Kind)
		require.Equal(t, "REFUSED", u.Item.Hold.Cause)
	}
	e.ok(t, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": a, "interruptId": hold}, nil)
	for name, s := range map[string]stream{"sse": subs["sse"], "graphql-transport-ws": subs["graphql-transport-ws"], "holds": holds} {
		expect(s, name, "ANSWERED", hold, 0)
	}

	// Another session's approval ends with its session: CLOSED.
	e.put(t, "account", "c1", map[string]any{"account_id": "c1"}, "")
	e.waitSession(t, a, "c1-account")
	e.put(t, "entry", "e3", map[string]any{"account_id": "c1", "amount": 1}, "")
	var closed string
	for name, s := range subs {
		closed = expect(s, name, "RAISED", closed, 1).Item.InterruptID
	}
	e.ok(t, closeOp, map[string]any{"a": a, "s": "c1-account"}, nil)
	for name, s := range subs {
		u := expect(s, name, "CLOSED", closed, 0)
		require.Equal(t, "CLOSED", u.Item.Approval.Status)
	}
}

// Issue 12 follow-up item 1: the inbox reader's subscribers filter in
// memory (InboxFilter.Covers) exactly as the inbox query filters in SQL:
// by kind, by action, and by the actions the principal may read.
func TestInboxFilterCoversAsTheQuery(t *testing.T) {
	t.Parallel()
	e, _ := newProxiedEnv(t)
	s := seedInbox(t, e)
	e.step(t)
	ctx := context.Background()
	all, _, err := e.app.Sessions.InboxPending(ctx, session.InboxFilter{AllActions: true})
	require.NoError(t, err)
	ids := make([]uuid.UUID, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	changes, err := e.app.Sessions.InboxNoteChanges(ctx, session.Note{XID: 1, All: true}, ids)
	require.NoError(t, err)
	require.Len(t, changes, 6)
	a, b := uuid.MustParse(s.a), uuid.MustParse(s.b)
	approval, hold := "APPROVAL", "HOLD"
	for _, f := range []session.InboxFilter{
		{AllActions: true},
		{AllActions: true, Kind: &approval},
		{AllActions: true, Kind: &hold, ActionID: &b},
		{Readable: []uuid.UUID{a}},
		{Readable: []uuid.UUID{a}, ActionID: &b},
		{Readable: []uuid.UUID{b, uuid.New()}, Kind: &hold},
		{},
	} {
		page, _, err := e.app.Sessions.Inbox(ctx, f, 0, 100)
		require.NoError(t, err)
		var want, got []uuid.UUID
		for _, it := range page {
			want = append(want, it.ID)
		}
		for i := range changes {
			if f.Covers(&changes[i].InboxItem) {
				got = append(got, changes[i].ID)
			}
		}
		require.Equal(t, want, got, "%+v", f)
	}
}

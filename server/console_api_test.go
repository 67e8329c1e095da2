package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

const (
	acctA = "3f0c9f8e-0000-4000-8000-00000000000a"
	acctB = "3f0c9f8e-0000-4000-8000-00000000000b"
)

// Issue 13 (the console's reads): ledger.recentEvents lists events newest
// first, pages back with before (a position or a cursor), filters by type
// and refuses bad bounds; Event.sessions names the sessions an event
// reached, as origin or input; ActionSession.clock gives each entry of the
// session clock its next firing (C1, C2) from the injected clock.
func TestConsoleReads(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	id := uuid.NewString()
	def := monitorDef()
	def["session"].(map[string]any)["schedule"] = []any{map[string]any{"name": "hourly", "every": "1h"}}
	e.ok(t, createActionOp, map[string]any{"id": id, "input": def}, nil)
	put := `mutation($ns: String!, $k: String!, $v: JSON!) { ledger { putValue(namespace: $ns, key: $k, value: $v) { key } } }`
	e.ok(t, put, map[string]any{"ns": "account", "k": acctA, "v": map[string]any{"account_id": acctA}}, nil)
	e.ok(t, put, map[string]any{"ns": "account", "k": acctB, "v": map[string]any{"account_id": acctB}}, nil)
	e.ok(t, put, map[string]any{"ns": "entry", "k": "e1", "v": map[string]any{"account_id": acctA, "amount": 1}}, nil)
	e.ok(t, `mutation { ledger { appendEvent(type: "note", data: {}) { position } } }`, nil, nil)
	e.step(t)

	type ev struct {
		EventType string
		Position  string
		Sessions  []struct {
			ID     string
			Action struct{ ID string }
		}
	}
	var page struct {
		Ledger struct {
			RecentEvents struct {
				Nodes    []ev
				PageInfo struct {
					HasNextPage bool
					EndCursor   string
				}
			}
		}
	}
	recent := `query($last: Int, $before: String, $type: String) { ledger { recentEvents(last: $last, before: $before, type: $type) {
		nodes { eventType position sessions { id action { id } } } pageInfo { hasNextPage endCursor } } } }`
	e.ok(t, recent, map[string]any{"last": 2}, &page)
	got := page.Ledger.RecentEvents
	require.Len(t, got.Nodes, 2)
	require.Equal(t, []string{"note", "entry.inserted"}, []string{got.Nodes[0].EventType, got.Nodes[1].EventType}, "newest first")
	require.True(t, got.PageInfo.HasNextPage)
	require.Len(t, got.Nodes[1].Sessions, 1, "the entry reached session A as an input")
	require.Equal(t, acctA, got.Nodes[1].Sessions[0].ID)
	require.Equal(t, id, got.Nodes[1].Sessions[0].Action.ID)
	require.Empty(t, got.Nodes[0].Sessions, "a plain event reached no session")

	for _, before := range []string{got.PageInfo.EndCursor, got.Nodes[1].Position} {
		e.ok(t, recent, map[string]any{"last": 10, "before": before}, &page)
		older := page.Ledger.RecentEvents
		require.Len(t, older.Nodes, 2, "before %s", before)
		require.Equal(t, "account.inserted", older.Nodes[0].EventType)
		require.Len(t, older.Nodes[0].Sessions, 1, "an account event is the origin of its session")
		require.Equal(t, acctB, older.Nodes[0].Sessions[0].ID)
		require.False(t, older.PageInfo.HasNextPage)
	}
	e.ok(t, recent, map[string]any{"type": "account.inserted"}, &page)
	require.Len(t, page.Ledger.RecentEvents.Nodes, 2)
	requireError(t, e.do(t, recent, map[string]any{"last": 0}), "BAD_USER_INPUT", "last")
	requireError(t, e.do(t, recent, map[string]any{"before": "nope"}), "BAD_USER_INPUT", "before")

	var s struct {
		Actions struct {
			Action struct {
				Session struct {
					Clock []struct {
						Name       string
						Every      *string
						Cron       *string
						StartsTurn bool
						LastTaken  *string
						Due        *string
						Next       *string
					}
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
		clock { name every cron startsTurn lastTaken due next } } } } }`, map[string]any{"a": id, "s": acctA}, &s)
	clk := s.Actions.Action.Session.Clock
	require.Len(t, clk, 1)
	require.Equal(t, "hourly", clk[0].Name)
	require.Equal(t, "1h", *clk[0].Every)
	require.Nil(t, clk[0].Cron)
	require.False(t, clk[0].StartsTurn, "turns.on names only entry")
	require.Nil(t, clk[0].LastTaken)
	require.Nil(t, clk[0].Due, "nothing is due at the start")
	require.NotNil(t, clk[0].Next)
	require.Equal(t, "2026-03-02T10:00:00.000000Z", *clk[0].Next, "an hour after the session started (the manual clock's 09:00)")
}

// Issue 13: Query.viewer tells a client who the caller is and what it
// holds (dev mode: everything, no policies); Event.sessions leaves out the
// sessions of actions the caller may not read.
func TestViewerAndReachedUnderAuth(t *testing.T) {
	t.Parallel()
	dev := newSteppedEnv(t, server.Config{})
	var v struct {
		Viewer struct {
			ID       string
			Dev      bool
			Policies []struct{ Action, Resource string }
		}
	}
	viewer := `{ viewer { id dev policies { action resource } } }`
	dev.ok(t, viewer, nil, &v)
	require.Equal(t, "dev", v.Viewer.ID)
	require.True(t, v.Viewer.Dev)
	require.Empty(t, v.Viewer.Policies)

	e := newAuthEnv(t)
	id := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": id, "input": monitorDef()}, nil)
	e.ok(t, `mutation($k: String!, $v: JSON!) { ledger { putValue(namespace: "account", key: $k, value: $v) { key } } }`,
		map[string]any{"k": acctA, "v": map[string]any{"account_id": acctA}}, nil)
	e.step(t)
	_, reader := e.token(t, "reader", pol("READ", "ledger"))
	_, both := e.token(t, "both", pol("READ", "ledger"), pol("READ", "financial.Action.document:"+id), pol("RESPOND", "financial.Action.document:"+id))

	r := e.allowed(t, both, viewer, nil)
	require.NoError(t, json.Unmarshal(r.Data, &v))
	require.Equal(t, "both", v.Viewer.ID)
	require.False(t, v.Viewer.Dev)
	require.Len(t, v.Viewer.Policies, 3)
	requireError(t, e.as(t, "", viewer, nil), "UNAUTHENTICATED", "")

	reached := `{ ledger { recentEvents(type: "account.inserted") { nodes { sessions { id } } } } }`
	var out struct {
		Ledger struct {
			RecentEvents struct {
				Nodes []struct{ Sessions []struct{ ID string } }
			}
		}
	}
	require.NoError(t, json.Unmarshal(e.allowed(t, both, reached, nil).Data, &out))
	require.Len(t, out.Ledger.RecentEvents.Nodes, 1)
	require.Len(t, out.Ledger.RecentEvents.Nodes[0].Sessions, 1)
	require.NoError(t, json.Unmarshal(e.allowed(t, reader, reached, nil).Data, &out))
	require.Empty(t, out.Ledger.RecentEvents.Nodes[0].Sessions, "a session of an action the caller may not read is left out")
}

// Issue 13, H4: Hold.skipRefusal is null for a held turn that may be
// skipped and says why for one that resumed from approval responses, which
// respondToSession refuses to skip with SKIP_NOT_ALLOWED, so the console
// can disable Skip with the reason before anyone tries.
func TestHoldSkipRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tool, agent := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": tool, "input": freezeTool()}, nil)
	e.ok(t, createActionOp, map[string]any{"id": agent, "input": map[string]any{
		"name": "resumes-then-refuses", "kind": "agent",
		"config": map[string]any{"provider": "scripted", "system": "s",
			"tools": []any{map[string]any{"action": tool, "approval": "REQUIRED"}},
			"script": []any{
				map[string]any{"step": 0, "when": "plain-refusal", "refusal": map[string]any{"category": "c", "explanation": "not now"}},
				map[string]any{"step": 0, "toolCalls": []any{map[string]any{"name": "freeze_account", "input": map[string]any{"account_id": "a"}}}},
				map[string]any{"step": 1, "refusal": map[string]any{"category": "c", "explanation": "changed my mind"}},
			}},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session": map[string]any{"id": "string(session.input.account_id)", "turns": map[string]any{"on": []any{"entry"}}},
	}}, nil)

	type item struct {
		InterruptID string
		Kind        string
		Session     struct{ ID string }
		Hold        *struct {
			Turn        int
			SkipRefusal *string
		}
	}
	inbox := func() []item {
		var out struct {
			Actions struct{ Inbox struct{ Nodes []item } }
		}
		e.ok(t, `{ actions { inbox { nodes { interruptId kind session { id } hold { turn skipRefusal } } } } }`, nil, &out)
		return out.Actions.Inbox.Nodes
	}
	find := func(kind, sid string) *item {
		for _, it := range inbox() {
			if it.Kind == kind && it.Session.ID == sid {
				return &it
			}
		}
		return nil
	}
	for _, acct := range []string{"plain", "resumed"} {
		e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
		note := "ordinary"
		if acct == "plain" {
			note = "plain-refusal"
		}
		e.put(t, "entry", acct, map[string]any{"account_id": acct, "note": note}, "")
	}
	var plain, approval *item
	poll(t, "the plain hold and the approval", func() bool {
		plain, approval = find("HOLD", "plain"), find("APPROVAL", "resumed")
		return plain != nil && approval != nil
	})
	require.Nil(t, plain.Hold.SkipRefusal, "a plain held turn may be skipped")

	respond := `mutation($a: UUID!, $s: String!, $i: String!, $r: SessionResponseInput!) { actions {
		respondToSession(actionId: $a, id: $s, interruptId: $i, response: $r) { identity } } }`
	e.ok(t, respond, map[string]any{"a": agent, "s": "resumed", "i": approval.InterruptID,
		"r": map[string]any{"approval": map[string]any{"decision": "APPROVE"}}}, nil)
	var held *item
	poll(t, "the resumed turn to be held", func() bool { held = find("HOLD", "resumed"); return held != nil })
	require.Equal(t, 2, held.Hold.Turn)
	require.NotNil(t, held.Hold.SkipRefusal)
	require.Contains(t, *held.Hold.SkipRefusal, "turn 2 resumed from approval responses")
	r := e.do(t, respond, map[string]any{"a": agent, "s": "resumed", "i": held.InterruptID,
		"r": map[string]any{"hold": map[string]any{"decision": "SKIP"}}})
	ge := requireError(t, r, "SKIP_NOT_ALLOWED", "response.hold.decision")
	require.Contains(t, ge.Message, *held.Hold.SkipRefusal, "the refusal says what skipRefusal said")
}

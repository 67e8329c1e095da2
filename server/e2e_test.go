package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// sessionView is the shape of examples/session_query.graphql's answer.
type sessionView struct {
	Status string
	State  json.RawMessage
	Turns  struct {
		Nodes []struct {
			Number json.Number
			Status string
			Inputs []struct {
				Event *struct {
					EventType string
					Record    *struct {
						Namespace string
						Key       string
						Value     json.RawMessage
					}
				}
			}
			Checkpoint *struct {
				State  json.RawMessage
				Status string
			}
			Execution struct {
				Invocation struct {
					Output     json.RawMessage
					Transcript struct {
						Nodes []struct {
							Kind string
							Data json.RawMessage
						}
					}
				}
				Children struct{ Nodes []any }
			}
		}
	}
}

// querySession runs session_query.graphql verbatim (I2).
func (e *env) querySession(t testing.TB, actionID, id string) *sessionView {
	t.Helper()
	var out struct {
		Actions struct {
			Action *struct{ Session *sessionView }
		}
	}
	e.ok(t, example(t, "session_query.graphql"), map[string]any{"actionId": actionID, "id": id}, &out)
	require.NotNil(t, out.Actions.Action, "action %s not found", actionID)
	return out.Actions.Action.Session
}

// takenInputs counts the inputs of committed turns.
func (s *sessionView) takenInputs() int {
	n := 0
	for _, tn := range s.Turns.Nodes {
		if tn.Status != "COMPLETED" {
			return -1 // a turn is still running
		}
		n += len(tn.Inputs)
	}
	return n
}

// createMonitor sends create_monitor.graphql verbatim (A1) and checks its answer.
func (e *env) createMonitor(t testing.TB) string {
	t.Helper()
	id := uuid.NewString()
	var out struct {
		Actions struct {
			CreateAction struct {
				ActionID   string
				Definition struct {
					Session struct {
						ID    string
						Turns struct {
							On        []string
							MaxInputs json.Number
						}
					}
				}
			}
		}
	}
	e.ok(t, example(t, "create_monitor.graphql"), map[string]any{"id": id}, &out)
	ca := out.Actions.CreateAction
	require.Equal(t, id, ca.ActionID)
	require.Equal(t, "string(session.input.account_id)", ca.Definition.Session.ID)
	require.Equal(t, []string{"entry"}, ca.Definition.Session.Turns.On)
	require.Equal(t, json.Number("100"), ca.Definition.Session.Turns.MaxInputs)
	return id
}

// TestSeedExamplesEndToEnd runs the seed's CreateMonitor and Session
// operations unchanged against the HTTP handler with the dispatcher and
// executor running (A1, I2, I1, L2, L3, S2, S3, S4, T2, T3, T5, T9). The
// account record's event creates the session and is its origin, not one of
// its inputs (S2): the turns take the three entries.
func TestSeedExamplesEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	actionID := e.createMonitor(t)

	acct := uuid.NewString()
	first := e.put(t, "account", acct, map[string]any{"account_id": acct}, "open-"+acct)
	require.Equal(t, "account.inserted", first.Event.EventType)
	again := e.put(t, "account", acct, map[string]any{"account_id": acct}, "open-"+acct)
	require.Equal(t, first, again, "L3: a repeated idempotency key returns the first result")
	for i := range 3 {
		e.put(t, "entry", fmt.Sprintf("%s-%d", acct, i), map[string]any{"account_id": acct, "amount": 10 + i}, "")
	}

	var s *sessionView
	poll(t, "the session's turns to take all 3 inputs", func() bool {
		s = e.querySession(t, actionID, acct)
		// The session row and its turns are read one after the other: wait
		// until the state the row shows is the one the last turn left.
		return s != nil && s.takenInputs() == 3 && strings.Contains(canon(t, s.State), `"count":3`)
	})
	require.Equal(t, "OPEN", s.Status)
	jsonEq(t, fmt.Sprintf(`{"count": 3, "last_turn": %d}`, len(s.Turns.Nodes)), s.State)

	// S2, S3: the account.inserted event is the session's origin.
	var origin struct {
		Actions struct {
			Action struct {
				Session struct {
					Origin struct{ ID, EventType string }
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) {
	    origin { id eventType } } } } }`, map[string]any{"a": actionID, "id": acct}, &origin)
	require.Equal(t, first.Event.ID, origin.Actions.Action.Session.Origin.ID)
	require.Equal(t, "account.inserted", origin.Actions.Action.Session.Origin.EventType)

	// Turns are newest first; in delivery order they took the three entries
	// (T2, T3), and no turn took the account event.
	var types, keys []string
	count := 0
	for i := len(s.Turns.Nodes) - 1; i >= 0; i-- {
		tn := s.Turns.Nodes[i]
		require.Equal(t, json.Number(fmt.Sprint(len(s.Turns.Nodes)-i)), tn.Number)
		count += len(tn.Inputs)
		for _, in := range tn.Inputs {
			require.NotNil(t, in.Event)
			require.NotNil(t, in.Event.Record, "I1: event.record resolves the KVValue")
			types = append(types, in.Event.EventType)
			keys = append(keys, in.Event.Record.Key)
			require.Equal(t, in.Event.EventType, in.Event.Record.Namespace+".inserted")
			var v struct {
				AccountID string `json:"account_id"`
			}
			require.NoError(t, json.Unmarshal(in.Event.Record.Value, &v))
			require.Equal(t, acct, v.AccountID)
		}
		require.NotNil(t, tn.Checkpoint)
		require.Equal(t, "OPEN", tn.Checkpoint.Status)
		jsonEq(t, fmt.Sprintf(`{"count": %d, "last_turn": %s}`, count, tn.Number), tn.Checkpoint.State)

		var output struct {
			AgentID string `json:"agent_id"`
			Turn    int
			Count   int
			Inputs  []struct {
				EventType string `json:"event_type"`
			}
		}
		require.NoError(t, json.Unmarshal(tn.Execution.Invocation.Output, &output))
		require.Equal(t, "monitor", output.AgentID)
		require.Equal(t, count, output.Count)
		require.Len(t, output.Inputs, len(tn.Inputs))

		kinds := make([]string, 0, len(tn.Execution.Invocation.Transcript.Nodes))
		for _, n := range tn.Execution.Invocation.Transcript.Nodes {
			kinds = append(kinds, n.Kind)
		}
		want := append(slices.Repeat([]string{"input"}, len(tn.Inputs)), "reply")
		require.Equal(t, want, kinds)
		require.Empty(t, tn.Execution.Children.Nodes)
	}
	require.Equal(t, []string{"entry.inserted", "entry.inserted", "entry.inserted"}, types)
	require.Equal(t, []string{acct + "-0", acct + "-1", acct + "-2"}, keys)

	t.Run("LedgerQueries", func(t *testing.T) { testLedgerQueries(t, e, acct) })
	t.Run("SessionsAndClose", func(t *testing.T) { testSessionsAndClose(t, e, actionID, acct, len(s.Turns.Nodes)) })
}

// testLedgerQueries pages events and values (L1, L2, L4) and appends events
// with idempotency (L3).
func testLedgerQueries(t *testing.T, e *env, acct string) {
	type page struct {
		Ledger struct {
			Events struct {
				Nodes []struct {
					ID, EventType, Position string
					Data                    json.RawMessage
				}
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
	}
	const eventsOp = `query($first: Int, $after: String, $type: String) {
	  ledger { events(first: $first, after: $after, type: $type) {
	    nodes { id eventType position data } pageInfo { hasNextPage endCursor } } } }`
	readAll := func(typ any) ([]string, []string) {
		var types, positions []string
		var after any
		for range 10 {
			var p page
			e.ok(t, eventsOp, map[string]any{"first": 2, "after": after, "type": typ}, &p)
			ev := p.Ledger.Events
			require.LessOrEqual(t, len(ev.Nodes), 2)
			for _, n := range ev.Nodes {
				types = append(types, n.EventType)
				positions = append(positions, n.Position)
			}
			if !ev.PageInfo.HasNextPage {
				return types, positions
			}
			require.NotNil(t, ev.PageInfo.EndCursor)
			after = *ev.PageInfo.EndCursor
		}
		require.FailNow(t, "events paging did not end")
		return nil, nil
	}
	types, positions := readAll(nil)
	require.Equal(t, []string{"account.inserted", "entry.inserted", "entry.inserted", "entry.inserted"}, types)
	require.Equal(t, []string{"1", "2", "3", "4"}, positions, "L1: positions follow commit order without gaps")
	types, positions = readAll("entry.inserted")
	require.Equal(t, []string{"entry.inserted", "entry.inserted", "entry.inserted"}, types)
	require.Equal(t, []string{"2", "3", "4"}, positions)

	var v struct {
		Ledger struct {
			Value *struct {
				Value   json.RawMessage
				Version json.Number
				Event   struct{ EventType string }
			}
			Missing *struct{ Key string }
			Values  struct {
				Nodes    []struct{ Key string }
				PageInfo struct {
					HasNextPage bool
					EndCursor   string
				}
			}
		}
	}
	e.ok(t, `query($k: String!) { ledger {
	    value(namespace: "account", key: $k) { value version event { eventType } }
	    missing: value(namespace: "account", key: "nope") { key }
	    values(namespace: "entry", first: 2) { nodes { key } pageInfo { hasNextPage endCursor } } } }`,
		map[string]any{"k": acct}, &v)
	require.NotNil(t, v.Ledger.Value)
	jsonEq(t, fmt.Sprintf(`{"account_id": %q}`, acct), v.Ledger.Value.Value)
	require.Equal(t, json.Number("1"), v.Ledger.Value.Version, "the idempotent retry did not write again")
	require.Equal(t, "account.inserted", v.Ledger.Value.Event.EventType)
	require.Nil(t, v.Ledger.Missing)
	require.Len(t, v.Ledger.Values.Nodes, 2)
	require.True(t, v.Ledger.Values.PageInfo.HasNextPage)
	var rest struct {
		Ledger struct {
			Values struct {
				Nodes    []struct{ Key string }
				PageInfo struct{ HasNextPage bool }
			}
		}
	}
	e.ok(t, `query($after: String) { ledger { values(namespace: "entry", first: 2, after: $after) {
	    nodes { key } pageInfo { hasNextPage } } } }`, map[string]any{"after": v.Ledger.Values.PageInfo.EndCursor}, &rest)
	require.Equal(t, []struct{ Key string }{{acct + "-2"}}, rest.Ledger.Values.Nodes)
	require.False(t, rest.Ledger.Values.PageInfo.HasNextPage)

	const appendOp = `mutation($type: String!, $data: JSON!, $ik: String) {
	  ledger { appendEvent(type: $type, data: $data, idempotencyKey: $ik) { id eventType data position record { __typename } } } }`
	type appended struct {
		Ledger struct {
			AppendEvent struct {
				ID, EventType, Position string
				Data                    json.RawMessage
				Record                  any
			}
		}
	}
	var a1, a2 appended
	e.ok(t, appendOp, map[string]any{"type": "audit.noted", "data": map[string]any{"n": 1}, "ik": "note-1"}, &a1)
	e.ok(t, appendOp, map[string]any{"type": "audit.noted", "data": map[string]any{"n": 1}, "ik": "note-1"}, &a2)
	require.Equal(t, a1, a2, "L3: the retry returns the first event")
	require.Nil(t, a1.Ledger.AppendEvent.Record)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'audit.noted'`))
	r := e.do(t, appendOp, map[string]any{"type": "audit.noted", "data": map[string]any{"n": 2}, "ik": "note-1"})
	requireError(t, r, "IDEMPOTENCY_CONFLICT", "idempotencyKey")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'audit.noted'`))
}

// testSessionsAndClose lists sessions, closes the monitored one (I3) and
// checks later entries make no turn but an intake record (S5, T8).
func testSessionsAndClose(t *testing.T, e *env, actionID, acct string, turns int) {
	other := uuid.NewString()
	e.put(t, "account", other, map[string]any{"account_id": other}, "")
	type listing struct {
		Actions struct {
			Action struct {
				Sessions struct {
					Nodes    []struct{ ID, Status string }
					PageInfo struct {
						HasNextPage bool
						EndCursor   string
					}
				}
			}
		}
	}
	const listOp = `query($a: UUID!, $first: Int, $after: String, $status: SessionStatus) { actions { action(id: $a) {
	    sessions(first: $first, after: $after, status: $status) { nodes { id status } pageInfo { hasNextPage endCursor } } } } }`
	var l listing
	poll(t, "the second session", func() bool {
		e.ok(t, listOp, map[string]any{"a": actionID}, &l)
		return len(l.Actions.Action.Sessions.Nodes) == 2
	})
	require.Equal(t, other, l.Actions.Action.Sessions.Nodes[0].ID, "newest first")
	require.Equal(t, acct, l.Actions.Action.Sessions.Nodes[1].ID)
	var p1, p2 listing
	e.ok(t, listOp, map[string]any{"a": actionID, "first": 1}, &p1)
	require.True(t, p1.Actions.Action.Sessions.PageInfo.HasNextPage)
	e.ok(t, listOp, map[string]any{"a": actionID, "first": 1, "after": p1.Actions.Action.Sessions.PageInfo.EndCursor}, &p2)
	require.Equal(t, acct, p2.Actions.Action.Sessions.Nodes[0].ID)
	require.False(t, p2.Actions.Action.Sessions.PageInfo.HasNextPage)

	const closeOp = `mutation($a: UUID!, $id: String!, $reason: String!) { actions {
	    closeSession(actionId: $a, id: $id, reason: $reason) { id status reason } } }`
	var closed struct {
		Actions struct {
			CloseSession struct{ ID, Status, Reason string }
		}
	}
	e.ok(t, closeOp, map[string]any{"a": actionID, "id": acct, "reason": "fraud review done"}, &closed)
	require.EqualValues(t, "CANCELLED", closed.Actions.CloseSession.Status)
	require.Equal(t, "fraud review done", closed.Actions.CloseSession.Reason)
	requireError(t, e.do(t, closeOp, map[string]any{"a": actionID, "id": acct, "reason": "again"}), "SESSION_CLOSED", "id")

	var cancelled listing
	e.ok(t, listOp, map[string]any{"a": actionID, "status": "CANCELLED"}, &cancelled)
	require.Len(t, cancelled.Actions.Action.Sessions.Nodes, 1)
	require.Equal(t, acct, cancelled.Actions.Action.Sessions.Nodes[0].ID)

	e.put(t, "entry", acct+"-late", map[string]any{"account_id": acct, "amount": 99}, "")
	var intake struct {
		Actions struct {
			Action struct {
				IntakeRecords struct {
					Nodes []struct {
						Reason, Trigger string
						SessionID       *string
						Event           struct{ EventType string }
					}
				}
			}
		}
	}
	poll(t, "an intake record for the closed session", func() bool {
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) { intakeRecords { nodes {
		    reason trigger sessionId event { eventType } } } } } }`, map[string]any{"a": actionID}, &intake)
		return len(intake.Actions.Action.IntakeRecords.Nodes) > 0
	})
	ir := intake.Actions.Action.IntakeRecords.Nodes[0]
	require.Equal(t, "session_closed", ir.Reason)
	require.Equal(t, "entry", ir.Trigger)
	require.Equal(t, acct, *ir.SessionID)
	require.Equal(t, "entry.inserted", ir.Event.EventType)

	s := e.querySession(t, actionID, acct)
	require.EqualValues(t, "CANCELLED", s.Status)
	require.Len(t, s.Turns.Nodes, turns, "T8: no turn after the close")
	require.Equal(t, 3, s.takenInputs())
	require.Equal(t, 3, e.countRows(t, `SELECT count(*) FROM session_inputs i JOIN sessions s USING (sid) WHERE s.id = $1`, acct))
}

// TestTriggerDiagnostics checks a predicate that fails to evaluate on an
// event is a non-match that action.triggerDiagnostics reports.
func TestTriggerDiagnostics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	actionID := uuid.NewString()
	def := monitorDef()
	trigger(def, 0)["event"] = `event.type == "account.inserted" && event.data.tier > 1`
	e.ok(t, createActionOp, map[string]any{"id": actionID, "input": def}, nil)

	ev := e.put(t, "account", "a1", map[string]any{"account_id": uuid.NewString()}, "")
	var out struct {
		Actions struct {
			Action struct {
				TriggerDiagnostics []struct {
					Version     json.Number
					Trigger     string
					Count       json.Number
					LastEvent   struct{ ID string }
					LastMessage string
				}
				Sessions struct{ Nodes []any }
			}
		}
	}
	poll(t, "a trigger diagnostic", func() bool {
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) {
		    triggerDiagnostics { version trigger count lastEvent { id } lastMessage lastAt }
		    sessions { nodes { id } } } } }`, map[string]any{"a": actionID}, &out)
		return len(out.Actions.Action.TriggerDiagnostics) > 0
	})
	d := out.Actions.Action.TriggerDiagnostics[0]
	require.Equal(t, "opened", d.Trigger)
	require.Equal(t, json.Number("1"), d.Version)
	require.Equal(t, json.Number("1"), d.Count)
	require.Equal(t, ev.Event.ID, d.LastEvent.ID)
	require.NotEmpty(t, d.LastMessage)
	require.Empty(t, out.Actions.Action.Sessions.Nodes, "a failed predicate is a non-match")
}

package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// balanceSource keeps a running balance per account from entry.inserted
// events, mirrors it into the ledger, and calls the notify tool when the
// balance goes negative (T5, T6, X4 from a turn).
const balanceSource = `
def turn(event):
    state = event["state"] or {}
    balance = state.get("balance", 0)
    applied = []
    for i in event["inputs"]:
        ev = i.get("event")
        if ev and ev["type"] == "entry.inserted":
            balance += ev["data"]["amount"]
            applied.append(ev["data"]["amount"])
    account = event["session"]["input"]["account_id"]
    if balance < 0:
        call_tool(NOTIFY, {"account_id": account, "note": "negative balance " + str(balance)})
    ledger.put("balance", account, {"balance": balance})
    return {"state": {"balance": balance}, "status": "OPEN", "output": {"applied": applied, "balance": balance}}
`

// notifySource is the notify tool: it reports what it was told and how many
// calls its session had before.
const notifySource = `
def call(event):
    return {"notified": event["input"]["account_id"], "note": event["input"].get("note", ""),
            "prior_calls": len(event["session"]["inputs"])}
`

const createOp = `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { actionId version } } }`

// TestStarlarkBalanceAndToolEndToEnd drives a Starlark turn handler and a
// Starlark tool with a session through GraphQL (issue 3's end-to-end proof;
// T5, T6, X1-X6, I1).
func TestStarlarkBalanceAndToolEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// The tool, with the seed's tool block verbatim.
	toolID := uuid.NewString()
	toolOp := fmt.Sprintf(`mutation($id: UUID!) { actions { createAction(id: $id, input: {
	  name: "notify-ops", kind: "starlark", source: %s
	  %s
	  session: { inputSchema: { type: "object", properties: { account_id: { type: "string" } }, required: ["account_id"] },
	             id: "string(session.input.account_id)" }
	}) { actionId definition { tool { name session { start { input } } } } } } }`,
		gqlString(notifySource), example(t, "tool_with_session.graphql-fragment"))
	var created struct {
		Actions struct {
			CreateAction struct {
				Definition struct {
					Tool struct{ Name string }
				}
			}
		}
	}
	e.ok(t, toolOp, map[string]any{"id": toolID}, &created)
	require.Equal(t, "notify_human_ops", created.Actions.CreateAction.Definition.Tool.Name)

	balanceID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": balanceID, "input": map[string]any{
		"name": "balances", "kind": "starlark",
		"source": strings.ReplaceAll(balanceSource, "NOTIFY", `"`+toolID+`"`),
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session": map[string]any{"id": "string(session.input.account_id)", "turns": map[string]any{"on": []any{"entry"}}},
	}}, nil)

	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	const want = "9007199254740843" // 100 - 250 + 2^53+1, exactly
	sessionQ := `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) {
	  status reason state inputs { nodes { kind status } }
	  turns(first: 10) { nodes { number status execution { invocation { output } children { nodes { action { definition { name } } status input } } } } }
	} } } }`
	type sessionOut struct {
		Actions struct {
			Action struct {
				Session *struct {
					Status string
					Reason *string
					State  json.RawMessage
					Inputs struct {
						Nodes []struct{ Kind, Status string }
					}
					Turns struct {
						Nodes []struct {
							Number    int
							Status    string
							Execution struct {
								Invocation struct{ Output json.RawMessage }
								Children   struct {
									Nodes []struct {
										Action struct{ Definition struct{ Name string } }
										Status string
										Input  json.RawMessage
									}
								}
							}
						}
					}
				}
			}
		}
	}
	var s sessionOut
	// One entry per turn: write the next entry once the last is consumed. The
	// account event is the session's origin, not an input (S2): the entries
	// are the only inputs.
	amounts := []any{json.Number("100"), json.Number("-250"), json.Number("9007199254740993")}
	for i, a := range amounts {
		e.put(t, "entry", fmt.Sprintf("%s-%d", acct, i), map[string]any{"account_id": acct, "amount": a}, "")
		poll(t, "the entry to be taken", func() bool {
			s = sessionOut{}
			e.ok(t, sessionQ, map[string]any{"a": balanceID, "id": acct}, &s)
			ss := s.Actions.Action.Session
			if ss == nil || ss.Status != "OPEN" {
				return ss != nil // stop polling on FAILED
			}
			consumed := 0
			for _, in := range ss.Inputs.Nodes {
				if in.Status == "CONSUMED" {
					consumed++
				}
			}
			// The session row is read before its inputs: wait until the
			// row shows the turn that took the last input.
			return consumed == i+1 && len(ss.Turns.Nodes) == i+1 && ss.Turns.Nodes[0].Status == "COMPLETED" &&
				strings.Contains(string(ss.State), "balance")
		})
	}
	poll(t, "the session row to show the last turn's state", func() bool {
		s = sessionOut{}
		e.ok(t, sessionQ, map[string]any{"a": balanceID, "id": acct}, &s)
		ss := s.Actions.Action.Session
		return ss.Status != "OPEN" || canon(t, ss.State) == canon(t, []byte(`{"balance":`+want+`}`))
	})
	ss := s.Actions.Action.Session
	if ss.Status != "OPEN" {
		var errs []string
		rows, _ := e.app.Pool.Query(t.Context(), `SELECT coalesce(error, '') FROM executions`)
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			errs = append(errs, s)
		}
		rows.Close()
		require.FailNow(t, "session "+ss.Status, "execution errors: %q", errs)
	}
	jsonEq(t, `{"balance":`+want+`}`, ss.State)

	// Every turn that ended negative called the tool from inside the turn.
	negativeTurns := 0
	for _, tu := range ss.Turns.Nodes {
		var out struct{ Balance json.Number }
		dec := json.NewDecoder(strings.NewReader(string(tu.Execution.Invocation.Output)))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&out))
		if strings.HasPrefix(out.Balance.String(), "-") {
			negativeTurns++
			require.Len(t, tu.Execution.Children.Nodes, 1)
			child := tu.Execution.Children.Nodes[0]
			require.Equal(t, "notify-ops", child.Action.Definition.Name)
			require.EqualValues(t, "SUCCEEDED", child.Status)
		} else {
			require.Empty(t, tu.Execution.Children.Nodes)
		}
	}
	require.Equal(t, 1, negativeTurns, "turn 2 took -250 alone and went negative")
	require.Len(t, ss.Turns.Nodes, 3)

	// The turn's ledger writes committed with it.
	var v struct {
		Ledger struct {
			Value struct{ Value json.RawMessage }
		}
	}
	e.ok(t, `query($k: String!) { ledger { value(namespace: "balance", key: $k) { value } } }`, map[string]any{"k": acct}, &v)
	jsonEq(t, `{"balance":`+want+`}`, v.Ledger.Value.Value)

	// A direct call sees the earlier call through its session's inputs (X6).
	var call struct {
		Actions struct {
			CallTool struct {
				Output  json.RawMessage
				Session struct {
					ID     string
					Inputs struct {
						Nodes []struct {
							Identity  string
							Kind      string
							Caller    *struct{ ID string }
							Execution struct {
								ID     string
								Input  json.RawMessage
								Output json.RawMessage `json:"-"`
							}
						}
					}
				}
			}
		}
	}
	e.ok(t, `mutation($a: UUID!, $in: JSON!) { actions { callTool(actionId: $a, input: $in) {
	  output session { id inputs { nodes { identity kind caller { id } execution { id input } } } } } } }`,
		map[string]any{"a": toolID, "in": map[string]any{"account_id": acct, "note": "by hand"}}, &call)
	jsonEq(t, `{"notified":"`+acct+`","note":"by hand","prior_calls":1}`, call.Actions.CallTool.Output)
	calls := call.Actions.CallTool.Session.Inputs.Nodes
	require.Len(t, calls, 2)
	require.Equal(t, "CALL", calls[0].Kind)
	require.NotNil(t, calls[0].Caller, "the first call was made by a turn's execution")
	require.Nil(t, calls[1].Caller, "the direct call has no caller")
	require.Equal(t, calls[1].Execution.ID, calls[1].Identity, "X4: a CALL input's identity is its execution id")
	jsonEq(t, `{"account_id":"`+acct+`","note":"by hand"}`, calls[1].Execution.Input)
}

// TestStarlarkFailures: script errors and malformed outcomes fail the turn
// with a clear reason, and createAction refuses bad source (T5, T7).
func TestStarlarkFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	monitor := func(source string) map[string]any {
		return map[string]any{
			// A step budget that runs out long before the deadline, even on
			// a loaded machine under the race detector.
			"name": "bad", "kind": "starlark", "source": source, "config": map[string]any{"max_steps": 1000000, "timeout_ms": 60000},
			"triggers": []any{map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}}},
			"session": map[string]any{"id": "string(session.input.account_id)"},
		}
	}
	for _, tc := range []struct {
		name, source, reason string
	}{
		{"outcome without status", `def turn(event):
    return {"state": 1}`, "action_output_invalid"},
		{"unknown outcome key", `def turn(event):
    return {"status": "OPEN", "mood": "happy"}`, "action_output_invalid"},
		{"loops past the step budget", `def turn(event):
    n = 0
    for i in range(1000000000):
        n += 1
    return {"status": "OPEN"}`, "step"},
		{"fails", `def turn(event):
    fail("no thanks")`, "no thanks"},
		// Issue 10 item 4: a long reason is cut on a character boundary, so
		// the failure commits with the handler's own words (not an encoding
		// error after every attempt).
		{"fails with a long non-ASCII reason", `def turn(event):
    fail("\u00e9" * 3000)`, "ééééé"},
		{"fails with a NUL in its reason", `def turn(event):
    fail("a\x00b")`, "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aid := uuid.NewString()
			e.ok(t, createOp, map[string]any{"id": aid, "input": monitor(tc.source)}, nil)
			acct := uuid.NewString()
			// The first account event creates the session (its origin, not an
			// input: S2); a second with the same input is delivered and, without
			// turns.on, starts the turn.
			e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
			e.put(t, "account", acct+"-again", map[string]any{"account_id": acct}, "")
			var out struct {
				Actions struct {
					Action struct {
						Session *struct {
							Status string
							Reason *string
						}
					}
				}
			}
			poll(t, "the turn to fail", func() bool {
				e.ok(t, `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) { status reason } } } }`,
					map[string]any{"a": aid, "id": acct}, &out)
				return out.Actions.Action.Session != nil && out.Actions.Action.Session.Status == "FAILED"
			})
			require.Contains(t, *out.Actions.Action.Session.Reason, tc.reason)
			e.requireAlive(t)
		})
	}
	for _, tc := range []struct{ name, source, field string }{
		{"syntax error", "def turn(event)\n  return 1", "input.source"},
		{"no turn function", "def other(event):\n    return 1", "input.source"},
		{"load", `load("x.star", "y")
def turn(event):
    return {}`, "input.source"},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			r := e.do(t, createOp, map[string]any{"id": uuid.NewString(), "input": monitor(tc.source)})
			requireError(t, r, "INVALID_ACTION", tc.field)
		})
	}
}

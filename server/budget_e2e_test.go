package server_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/turns"
)

// budgetAgent is a scripted agent that reports OPEN on every turn, with a
// spend cap of maxUSD.
func budgetAgent(maxUSD any) map[string]any {
	return map[string]any{
		"name": "budgeted", "kind": "agent",
		"config": map[string]any{"provider": "scripted", "model": "fake-1", "system": "You keep notes.",
			"script": []any{map[string]any{"toolCalls": []any{map[string]any{"name": "report_outcome",
				"input": map[string]any{"status": "OPEN", "state": map[string]any{"ok": true}}}}}}},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "ticket.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"id": "string(event.data.id)"}}}},
			map[string]any{"name": "note", "event": `event.type == "note.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.id)"}}}},
		"session": map[string]any{"id": "string(session.input.id)", "maxPerSessionUsd": maxUSD},
	}
}

const budgetQuery = `query($a: UUID!) { actions { action(id: $a) { session(id: "t1") {
	status reason
	budget { maxUsd spentUsd remainingUsd exhausted }
	usage { modelCalls inputTokens outputTokens costUsd unpricedCalls }
	holds { interruptId cause status }
	turns(first: 20) { nodes { number status usage { modelCalls costUsd } execution { usage { modelCalls inputTokens outputTokens costUsd unpricedCalls } } } }
} } } }`

type budgetUsage struct {
	ModelCalls, InputTokens, OutputTokens, UnpricedCalls int
	CostUsd                                              float64
}

type budgetSession struct {
	Status string
	Reason *string
	Budget struct {
		MaxUsd, RemainingUsd *float64
		SpentUsd             float64
		Exhausted            bool
	}
	Usage budgetUsage
	Holds []struct{ InterruptID, Cause, Status string }
	Turns struct {
		Nodes []struct {
			Number    int
			Status    string
			Usage     budgetUsage
			Execution struct{ Usage budgetUsage }
		}
	}
}

func (e *env) budgetSession(t testing.TB, actionID string) budgetSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *budgetSession }
		}
	}
	e.ok(t, budgetQuery, map[string]any{"a": actionID}, &out)
	require.NotNil(t, out.Actions.Action.Session)
	return *out.Actions.Action.Session
}

// G8: a session's spend cap is frozen at creation; every model call is
// counted per execution, turn and session; at the cap the next turn is
// held with cause BUDGET before any model call, and stays held on RETRY
// until setSessionBudget raises the cap.
func TestSpendCapHoldsTurnsEndToEnd_G8(t *testing.T) {
	t.Parallel()
	// $10,000 per million tokens: a scripted call of ~30 tokens costs ~$0.3.
	e := newSteppedEnv(t, server.Config{Prices: turns.Prices{"scripted/*": {InputPerMTok: 10_000, OutputPerMTok: 10_000}}})
	id := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": id, "input": budgetAgent(100)}, nil)

	e.put(t, "ticket", "t1", map[string]any{"id": "t1"}, "")
	e.step(t)
	e.put(t, "note", "n0", map[string]any{"id": "t1"}, "")
	e.step(t)
	s := e.budgetSession(t, id)
	require.Equal(t, "OPEN", s.Status)
	require.Equal(t, 1, s.Usage.ModelCalls)
	require.Positive(t, s.Usage.InputTokens)
	require.Positive(t, s.Usage.OutputTokens)
	require.Zero(t, s.Usage.UnpricedCalls)
	spent := s.Budget.SpentUsd
	require.InDelta(t, float64(s.Usage.InputTokens+s.Usage.OutputTokens)*0.01, spent, 1e-9, "priced at $10,000 per million tokens")
	require.Equal(t, 100.0, *s.Budget.MaxUsd)
	require.InDelta(t, 100-spent, *s.Budget.RemainingUsd, 1e-9)
	require.False(t, s.Budget.Exhausted)
	require.Len(t, s.Turns.Nodes, 1)
	require.Equal(t, s.Usage, s.Turns.Nodes[0].Execution.Usage, "one turn: the session's use is its execution's")
	require.Equal(t, s.Usage.ModelCalls, s.Turns.Nodes[0].Usage.ModelCalls)

	// Frozen: a new version's cap does not reach the live session.
	e.ok(t, `mutation($id: UUID!, $input: ActionInput!) { actions { updateAction(id: $id, input: $input) { version } } }`,
		map[string]any{"id": id, "input": budgetAgent(5000)}, nil)
	require.Equal(t, 100.0, *e.budgetSession(t, id).Budget.MaxUsd)

	// The cap at what it spent: the next turn is held before calling the model.
	const setBudget = `mutation($a: UUID!, $max: Float) { actions { setSessionBudget(actionId: $a, id: "t1", maxUsd: $max) {
		budget { maxUsd exhausted } } } }`
	var set struct {
		Actions struct {
			SetSessionBudget struct {
				Budget struct {
					MaxUsd    *float64
					Exhausted bool
				}
			}
		}
	}
	e.ok(t, setBudget, map[string]any{"a": id, "max": spent}, &set)
	require.True(t, set.Actions.SetSessionBudget.Budget.Exhausted)
	e.put(t, "note", "n1", map[string]any{"id": "t1"}, "")
	e.step(t)
	s = e.budgetSession(t, id)
	require.Equal(t, "WAITING", s.Status)
	require.Len(t, s.Holds, 1)
	require.Equal(t, "BUDGET", s.Holds[0].Cause)
	require.Equal(t, "PENDING", s.Holds[0].Status)
	require.Equal(t, 1, s.Usage.ModelCalls, "the held turn called no model")
	require.Equal(t, "HELD", s.Turns.Nodes[0].Status)
	require.Contains(t, *s.Reason, "held")

	// RETRY under the same cap holds again; after raising it, the retry runs.
	const retry = `mutation($a: UUID!, $i: String!) { actions { respondToSession(actionId: $a, id: "t1", interruptId: $i,
		response: { hold: { decision: RETRY } }) { identity } } }`
	e.ok(t, retry, map[string]any{"a": id, "i": s.Holds[0].InterruptID}, nil)
	e.step(t)
	s = e.budgetSession(t, id)
	require.Equal(t, "WAITING", s.Status)
	require.Len(t, s.Holds, 2)
	require.Equal(t, 1, s.Usage.ModelCalls)
	var pending string
	for _, h := range s.Holds {
		if h.Status == "PENDING" {
			require.Equal(t, "BUDGET", h.Cause)
			pending = h.InterruptID
		}
	}
	require.NotEmpty(t, pending)
	e.ok(t, setBudget, map[string]any{"a": id, "max": 1000}, nil)
	e.ok(t, retry, map[string]any{"a": id, "i": pending}, nil)
	e.step(t)
	s = e.budgetSession(t, id)
	require.Equal(t, "OPEN", s.Status)
	require.Equal(t, 2, s.Usage.ModelCalls)
	require.Greater(t, s.Budget.SpentUsd, spent)
	var total float64
	for _, tu := range s.Turns.Nodes {
		total += tu.Execution.Usage.CostUsd
	}
	require.InDelta(t, s.Budget.SpentUsd, total, 1e-9, "the session's spend is its executions' sum")

	// No cap: null removes it.
	e.ok(t, setBudget, map[string]any{"a": id, "max": nil}, &set)
	require.Nil(t, set.Actions.SetSessionBudget.Budget.MaxUsd)
	require.False(t, set.Actions.SetSessionBudget.Budget.Exhausted)
}

// G8: what a spend cap is refused for, each with a code and its field.
func TestSpendCapRefusals_G8(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{Prices: turns.Prices{"scripted/priced": {InputPerMTok: 1, OutputPerMTok: 2}}})
	create := func(input map[string]any) response {
		return e.do(t, createOp, map[string]any{"id": uuid.NewString(), "input": input})
	}
	requireError(t, create(budgetAgent(-1)), "BAD_USER_INPUT", "input.session.maxPerSessionUsd")
	requireError(t, create(budgetAgent(2_000_000)), "BAD_USER_INPUT", "input.session.maxPerSessionUsd")
	// The model fake-1 has no price on this server.
	err := requireError(t, create(budgetAgent(5)), "INVALID_ACTION", "input.session.maxPerSessionUsd")
	require.Contains(t, err.Message, "scripted/fake-1")
	// A Starlark handler calls no model.
	star := budgetAgent(5)
	star["kind"], star["source"] = "starlark", "def turn(event):\n    return {\"status\": \"OPEN\"}\n"
	delete(star, "config")
	err = requireError(t, create(star), "INVALID_ACTION", "input.session.maxPerSessionUsd")
	require.Contains(t, err.Message, "starlark")
	// Priced: accepted.
	ok := budgetAgent(5)
	ok["config"].(map[string]any)["model"] = "priced"
	id := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": id, "input": ok}, nil)

	const setBudget = `mutation($a: UUID!, $id: String!, $max: Float) { actions { setSessionBudget(actionId: $a, id: $id, maxUsd: $max) { id } } }`
	requireError(t, e.do(t, setBudget, map[string]any{"a": id, "id": "nope", "max": 3}), "NOT_FOUND", "id")
	requireError(t, e.do(t, setBudget, map[string]any{"a": id, "id": "t1", "max": 0}), "BAD_USER_INPUT", "maxUsd")
	// A Starlark action without a cap: its sessions cannot be given one
	// later either (nothing would count against it); removing is a no-op.
	plain := budgetAgent(nil)
	plain["kind"], plain["source"] = "starlark", "def turn(event):\n    return {\"status\": \"OPEN\"}\n"
	delete(plain, "config")
	plainID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": plainID, "input": plain}, nil)
	e.put(t, "ticket", "t1", map[string]any{"id": "t1"}, "")
	e.step(t)
	err = requireError(t, e.do(t, setBudget, map[string]any{"a": plainID, "id": "t1", "max": 3}), "BAD_USER_INPUT", "maxUsd")
	require.Contains(t, err.Message, "starlark")
	e.ok(t, setBudget, map[string]any{"a": plainID, "id": "t1", "max": nil}, nil)
	e.ok(t, `mutation($a: UUID!) { actions { closeSession(actionId: $a, id: "t1", reason: "done") { status } } }`, map[string]any{"a": id}, nil)
	requireError(t, e.do(t, setBudget, map[string]any{"a": id, "id": "t1", "max": 3}), "SESSION_CLOSED", "id")
}

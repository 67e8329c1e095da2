package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Issue 11 (who may answer, docs/security.md): denying a gated call needs
// RESPOND on the agent; approving a call whose requirement is the tool
// owner's also needs RESPOND on the tool action; approving with a
// replacement input also needs CALL on the tool action. A requirement that
// comes only from the agent's reference needs RESPOND on the agent (and
// CALL on the tool for a replacement). Over HTTP with AUTH on.

const respondAsOp = `mutation($a: UUID!, $s: String!, $i: String!, $r: SessionResponseInput!) { actions {
  respondToSession(actionId: $a, id: $s, interruptId: $i, response: $r) { identity } } }`

const approvalRightsOp = `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
  status approvals { interruptId status mayApprove mayReplaceInput } } } } }`

type approvalRights struct {
	InterruptID, Status         string
	MayApprove, MayReplaceInput bool
}

// pendingApproval reads, as token, the one approval request of a session.
func (e *authEnv) pendingApproval(t *testing.T, token, agent, sess string) approvalRights {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status    string
					Approvals []approvalRights
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(e.allowed(t, token, approvalRightsOp, map[string]any{"a": agent, "s": sess}).Data, &out))
	require.Len(t, out.Actions.Action.Session.Approvals, 1)
	return out.Actions.Action.Session.Approvals[0]
}

// recordSource is a tool that records its input in namespace noted.
const recordSource = `
def call(event):
    i = event["input"]
    ledger.put("noted", i["account_id"], i)
    return {"noted": i["account_id"]}
`

func TestAuthorityWhoMayAnswerAnApproval(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	// owned: the tool's owner requires approval; plain: only the agent's
	// reference does (agentMonitor's references say REQUIRED).
	owned, plain := uuid.NewString(), uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": owned, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource, "permissions": map[string]any{"write": []string{"frozen"}},
		"tool": map[string]any{"name": "freeze_account", "approval": "REQUIRED"}}}, nil)
	e.ok(t, createOp, map[string]any{"id": plain, "input": map[string]any{
		"name": "note-account", "kind": "starlark", "source": recordSource, "permissions": map[string]any{"write": []string{"noted"}},
		"tool": map[string]any{"name": "freeze_account"}}}, nil)
	agentOwned, agentPlain := uuid.NewString(), uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": agentOwned, "input": agentMonitor(owned)}, nil)
	e.ok(t, createOp, map[string]any{"id": agentPlain, "input": agentMonitor(plain)}, nil)
	// Two sessions per agent, each waiting on one approval.
	for _, acct := range []string{"3f0c9f8e", "b2"} {
		e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
		e.put(t, "entry", acct+"-1", map[string]any{"account_id": acct, "amount": 12000}, "")
	}
	e.step(t)
	res := func(id string) string { return "financial.Action.document:" + id }
	agentOnly := []map[string]any{pol("READ", res(agentOwned)), pol("RESPOND", res(agentOwned)),
		pol("READ", res(agentPlain)), pol("RESPOND", res(agentPlain))}
	_, carol := e.token(t, "carol", agentOnly...)
	_, dave := e.token(t, "dave", append(agentOnly, pol("RESPOND", res(owned)))...)
	_, erin := e.token(t, "erin", append(agentOnly, pol("RESPOND", res(owned)), pol("CALL", res(owned)))...)
	_, frank := e.token(t, "frank", append(agentOnly, pol("CALL", res(plain)))...)
	replacement := map[string]any{"account_id": "carol", "amount": 1000000}
	approve := func(input map[string]any) map[string]any {
		a := map[string]any{"decision": "APPROVE"}
		if input != nil {
			a["input"] = input
		}
		return map[string]any{"approval": a}
	}
	respond := func(token, agent, sess, interrupt string, r map[string]any) response {
		return e.as(t, token, respondAsOp, map[string]any{"a": agent, "s": sess, "i": interrupt, "r": r})
	}
	nothingWritten := func(agent, sess, interrupt string) {
		t.Helper()
		require.Equal(t, "PENDING", e.pendingApproval(t, adminToken, agent, sess).Status)
		require.Zero(t, e.countRows(t, `SELECT count(*) FROM events WHERE type = 'action_session.responded' AND data->>'interrupt_id' = $1`, interrupt))
		require.Zero(t, e.countRows(t, `SELECT count(*) FROM session_inputs WHERE identity = $1`, "command/"+interrupt))
	}

	// The audit's scenario: carol may not call the tool, nor approve its
	// call (as it is or with her own input); what she is told names no tool.
	r := e.as(t, carol, `mutation($a: UUID!) { actions { callTool(actionId: $a, input: {account_id: "carol"}) { output } } }`, map[string]any{"a": owned})
	requireError(t, r, "FORBIDDEN", "")
	a := e.pendingApproval(t, carol, agentOwned, "3f0c9f8e-account")
	require.Equal(t, approvalRights{InterruptID: a.InterruptID, Status: "PENDING"}, a, "carol may deny only")
	for _, input := range []map[string]any{replacement, nil} {
		r = respond(carol, agentOwned, "3f0c9f8e-account", a.InterruptID, approve(input))
		ge := requireError(t, r, "FORBIDDEN", "response.approval.decision")
		require.Len(t, r.Errors, 1)
		for _, secret := range []string{owned, "freeze", "wire"} {
			require.NotContains(t, ge.Message, secret)
		}
	}
	nothingWritten(agentOwned, "3f0c9f8e-account", a.InterruptID)

	// dave holds RESPOND on the tool: he may approve it as it is, not
	// with a replacement input.
	require.Equal(t, approvalRights{InterruptID: a.InterruptID, Status: "PENDING", MayApprove: true},
		e.pendingApproval(t, dave, agentOwned, "3f0c9f8e-account"))
	requireError(t, respond(dave, agentOwned, "3f0c9f8e-account", a.InterruptID, approve(replacement)), "FORBIDDEN", "response.approval.input")
	nothingWritten(agentOwned, "3f0c9f8e-account", a.InterruptID)
	e.step(t)
	require.Zero(t, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`), "the gated tool never ran")

	// erin holds CALL on it too: her replacement runs (the reference's
	// fixed input still applies over it).
	require.Equal(t, approvalRights{InterruptID: a.InterruptID, Status: "PENDING", MayApprove: true, MayReplaceInput: true},
		e.pendingApproval(t, erin, agentOwned, "3f0c9f8e-account"))
	e.allowed(t, erin, respondAsOp, map[string]any{"a": agentOwned, "s": "3f0c9f8e-account", "i": a.InterruptID,
		"r": approve(map[string]any{"account_id": "erin-pick", "reason": "checked"})})
	e.step(t)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen' AND key = 'erin-pick'
		AND value->>'requested_by' = 'agent-monitor'`))
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`))

	// Denying needs RESPOND on the agent only.
	b := e.pendingApproval(t, carol, agentOwned, "b2-account")
	e.allowed(t, carol, respondAsOp, map[string]any{"a": agentOwned, "s": "b2-account", "i": b.InterruptID,
		"r": map[string]any{"approval": map[string]any{"decision": "DENY", "reason": "not mine to approve"}}})
	e.step(t)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`), "the denied call did not run")

	// A requirement that is only the agent's reference: RESPOND on the
	// agent approves; a replacement needs CALL on the tool.
	p := e.pendingApproval(t, carol, agentPlain, "3f0c9f8e-account")
	require.Equal(t, approvalRights{InterruptID: p.InterruptID, Status: "PENDING", MayApprove: true}, p)
	e.allowed(t, carol, respondAsOp, map[string]any{"a": agentPlain, "s": "3f0c9f8e-account", "i": p.InterruptID, "r": approve(nil)})
	q := e.pendingApproval(t, carol, agentPlain, "b2-account")
	requireError(t, respond(carol, agentPlain, "b2-account", q.InterruptID, approve(replacement)), "FORBIDDEN", "response.approval.input")
	nothingWritten(agentPlain, "b2-account", q.InterruptID)
	require.True(t, e.pendingApproval(t, frank, agentPlain, "b2-account").MayReplaceInput)
	e.allowed(t, frank, respondAsOp, map[string]any{"a": agentPlain, "s": "b2-account", "i": q.InterruptID,
		"r": approve(map[string]any{"account_id": "frank-pick"})})
	e.step(t)
	var noted []string
	rows, err := e.app.Pool.Query(t.Context(), `SELECT key FROM kv_values WHERE namespace = 'noted' ORDER BY key`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		noted = append(noted, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"3f0c9f8e", "frank-pick"}, noted)

	// The inbox shows carol what she may do with each item: a new entry
	// makes both agents ask again.
	var inbox struct {
		Actions struct {
			Inbox struct {
				Nodes []struct {
					Action   struct{ ID string }
					Approval *approvalRights
				}
			}
		}
	}
	e.put(t, "entry", "3f0c9f8e-2", map[string]any{"account_id": "3f0c9f8e", "amount": 1}, "")
	e.step(t)
	require.NoError(t, json.Unmarshal(e.allowed(t, carol, `{ actions { inbox { nodes { action { id } approval { status mayApprove mayReplaceInput } } } } }`, nil).Data, &inbox))
	got := map[string]approvalRights{}
	for _, n := range inbox.Actions.Inbox.Nodes {
		require.NotNil(t, n.Approval)
		got[n.Action.ID] = *n.Approval
	}
	require.Equal(t, map[string]approvalRights{
		agentOwned: {Status: "PENDING"},
		agentPlain: {Status: "PENDING", MayApprove: true},
	}, got)
}

package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// Issue 11: actions run with the authority their author holds, never more.
// Each scenario of the issue is a test here, over HTTP with AUTH on. The
// attacker holds READ, WRITE and RESPOND on one action and READ, WRITE on
// ledger namespace entry only.

// entryAction is an action over namespace entry: an insert starts a
// session keyed by data.k, an update resumes it (and starts a turn).
func entryAction(kind, source string) map[string]any {
	d := map[string]any{
		"name": "m", "kind": kind,
		"triggers": []any{
			map[string]any{"name": "open", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"k": "string(event.data.k)"}}}},
			map[string]any{"name": "more", "event": `event.type == "entry.updated"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.k)"}}},
		},
		"session": map[string]any{"inputSchema": map[string]any{"type": "object"}, "id": "string(session.input.k)"},
	}
	if source != "" {
		d["source"] = source
	}
	return d
}

// attackScene is the set-up: action m (created by the admin), the
// attacker's token, a payroll record, another action's session and a tool
// that requires approval, none of which the attacker may reach.
type attackScene struct {
	e                *authEnv
	m, victim, gated string
	victimSession    string
	attacker         string
}

func newAttackScene(t *testing.T) *attackScene {
	t.Helper()
	e := newAuthEnv(t)
	s := &attackScene{e: e, m: uuid.NewString(), victim: uuid.NewString(), gated: uuid.NewString(), victimSession: uuid.NewString()}
	e.ok(t, createActionOp, map[string]any{"id": s.m, "input": entryAction("agent.echo", "")}, nil)
	victim := monitorDef()
	e.ok(t, createActionOp, map[string]any{"id": s.victim, "input": victim}, nil)
	e.ok(t, createActionOp, map[string]any{"id": s.gated, "input": map[string]any{
		"name": "wire", "kind": "starlark", "source": "def call(event):\n    return {\"sent\": True}\n",
		"tool": map[string]any{"name": "wire_money", "approval": "REQUIRED"}}}, nil)
	e.put(t, "payroll", "ceo", map[string]any{"salary": 999999}, "")
	e.put(t, "account", s.victimSession, map[string]any{"account_id": s.victimSession}, "")
	e.step(t)
	_, s.attacker = e.token(t, "mallory",
		pol("READ", "financial.Action.document:"+s.m), pol("WRITE", "financial.Action.document:"+s.m),
		pol("RESPOND", "financial.Action.document:"+s.m), pol("READ", "ledger:entry"), pol("WRITE", "ledger:entry"))
	return s
}

// run has the attacker write an entry key twice (a session and its first
// turn) and returns the session as the attacker reads it.
func (s *attackScene) run(t *testing.T, key string) (status, reason string, state json.RawMessage) {
	t.Helper()
	for i, v := range []map[string]any{{"k": key}, {"k": key, "n": 1}} {
		r := s.e.as(t, s.attacker, putValueOp, map[string]any{"ns": "entry", "key": key, "value": v})
		require.Empty(t, r.Errors, "entry write %d: %+v", i, r.Errors)
	}
	s.e.step(t)
	r := s.e.allowed(t, s.attacker, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status reason state } } } }`,
		map[string]any{"a": s.m, "s": key})
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason *string
					State  json.RawMessage
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(r.Data, &out))
	ss := out.Actions.Action.Session
	if ss.Reason != nil {
		reason = *ss.Reason
	}
	return ss.Status, reason, ss.State
}

// Scenario 1: handler code reads and writes only what its version's
// grants allow, and no principal can store grants it does not hold.
func TestAuthorityHandlerCodeStaysWithinItsGrants(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	for i, tc := range []struct{ name, code string }{
		{"reads another namespace", `ledger.get("payroll", "ceo")`},
		{"writes another namespace", `ledger.put("payroll", "ceo", {"salary": 1})`},
		{"reads another action's session", `session("` + s.victim + `", "` + s.victimSession + `")`},
		{"calls a tool", `call_tool("` + s.gated + `", {})`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf("def turn(event):\n    return {\"state\": {\"leak\": %s}, \"status\": \"OPEN\"}\n", tc.code)
			r := e.as(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": entryAction("starlark", src)})
			require.Empty(t, r.Errors, "storing the code needs no grant: running it does")
			status, reason, state := s.run(t, fmt.Sprintf("k%d", i))
			require.Equal(t, "FAILED", status)
			require.Contains(t, reason, "not allowed")
			require.NotContains(t, string(state), "999999")
		})
	}
	// Declaring the grants is refused: the attacker holds none of them.
	for _, tc := range []struct {
		perms map[string]any
		field string
	}{
		{map[string]any{"read": []string{"payroll"}}, "input.permissions.read[0]"},
		{map[string]any{"read": []string{"*"}}, "input.permissions.read[0]"},
		{map[string]any{"write": []string{"entry", "payroll"}}, "input.permissions.write[1]"},
		{map[string]any{"tools": []string{s.gated}}, "input.permissions.tools[0]"},
		{map[string]any{"sessions": []string{s.victim}}, "input.permissions.sessions[0]"},
	} {
		def := entryAction("starlark", "def turn(event):\n    return {\"status\": \"OPEN\"}\n")
		def["permissions"] = tc.perms
		r := e.as(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": def})
		requireError(t, r, "FORBIDDEN", tc.field)
	}
	// A trigger pinning an event type of another namespace is refused too.
	def := entryAction("agent.echo", "")
	def["triggers"] = append(def["triggers"].([]any), map[string]any{"name": "pay", "event": `event.type == "payroll.updated"`,
		"session": map[string]any{"start": map[string]any{"input": map[string]any{"k": "string(event.data.k)"}}}})
	requireError(t, e.as(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": def}), "FORBIDDEN", "input.triggers[2].event")

	// Nothing leaked or changed.
	var pay struct {
		Ledger struct {
			Value struct{ Value json.RawMessage }
		}
	}
	e.ok(t, `{ ledger { value(namespace: "payroll", key: "ceo") { value } } }`, nil, &pay)
	jsonEq(t, `{"salary": 999999}`, pay.Ledger.Value.Value)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, s.gated), "the tool never ran")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM sessions WHERE action_id = $1`, s.victim), "no session started elsewhere")

	// With the grants held and declared, the same code works.
	_, granted := e.token(t, "payroll-clerk", pol("WRITE", "financial.Action.document:"+s.m), pol("READ", "financial.Action.document:"+s.m),
		pol("READ", "ledger:entry"), pol("WRITE", "ledger:entry"), pol("READ", "ledger:payroll"))
	ok := entryAction("starlark", "def turn(event):\n    return {\"state\": {\"pay\": ledger.get(\"payroll\", \"ceo\")}, \"status\": \"OPEN\"}\n")
	ok["permissions"] = map[string]any{"read": []string{"payroll"}}
	e.allowed(t, granted, updateActionOp, map[string]any{"id": s.m, "input": ok})
	status, _, state := s.run(t, "granted")
	require.Equal(t, "OPEN", status)
	jsonEq(t, `{"pay": {"salary": 999999}}`, state)
}

// Scenario 2: an agent cannot skip a tool owner's approval gate, nor refer
// to a tool its author may not call.
func TestAuthorityAgentCannotLowerAToolsApproval(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	toolID := uuid.NewString()
	e.ok(t, createOp, map[string]any{"id": toolID, "input": map[string]any{
		"name": "freeze-account", "kind": "starlark", "source": freezeSource,
		"tool": map[string]any{"name": "freeze_account", "approval": "REQUIRED",
			"inputSchema": map[string]any{"type": "object", "required": []any{"account_id"}}}}}, nil)
	agent := agentMonitor(toolID)
	agent["config"].(map[string]any)["tools"] = []any{map[string]any{"action": toolID, "approval": "NONE"}}
	agentID := uuid.NewString()
	// The attacker may not call the tool, so may not store an agent that does.
	r := e.as(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": agent})
	requireError(t, r, "FORBIDDEN", "input.config.tools[0].action")

	// The admin may, but the tool's own requirement still gates the call.
	e.ok(t, createOp, map[string]any{"id": agentID, "input": agent}, nil)
	var tool struct {
		Actions struct {
			Action struct {
				Definition struct{ Tool struct{ Approval string } }
			}
		}
	}
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { definition { tool { approval } } } } }`, map[string]any{"a": toolID}, &tool)
	require.Equal(t, "REQUIRED", tool.Actions.Action.Definition.Tool.Approval)
	e.put(t, "account", "3f0c9f8e", map[string]any{"account_id": "3f0c9f8e"}, "")
	e.put(t, "entry", "e1", map[string]any{"account_id": "3f0c9f8e", "amount": 12000}, "")
	e.step(t)
	sess := e.agentSession(t, agentID)
	require.Equal(t, "WAITING", sess.Status, "the call waits for a person")
	require.Len(t, sess.turnN(t, 1).Execution.Invocation.Approvals, 1)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen'`), "nothing ran")
}

// Scenario 3: a trigger sees only the events of namespaces its version may
// read: a catch-all predicate does not capture other namespaces.
func TestAuthorityTriggersSeeOnlyReadableEvents(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	def := entryAction("agent.echo", "")
	def["triggers"] = append(def["triggers"].([]any), map[string]any{"name": "cap",
		"event":   `event.type != "" && !(event.type == "entry.inserted") && !(event.type == "entry.updated")`,
		"session": map[string]any{"start": map[string]any{"input": map[string]any{"k": "string(event.id)", "d": "event.data"}}}})
	e.allowed(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": def})
	e.ok(t, `mutation { ledger { appendEvent(type: "audit.secret", data: { msg: "board minutes" }) { id } } }`, nil, nil)
	e.put(t, "payroll", "ceo", map[string]any{"salary": 1000000}, "")
	e.put(t, "entry", "visible", map[string]any{"k": "visible"}, "")
	e.step(t)
	r := e.allowed(t, s.attacker, `query($a: UUID!) { actions { action(id: $a) { sessions(first: 100) { nodes { id input } }
	  intakeRecords(first: 100) { nodes { reason } } triggerDiagnostics { trigger } } } }`, map[string]any{"a": s.m})
	out := string(r.Data)
	require.NotContains(t, out, "board minutes")
	require.NotContains(t, out, "1000000")
	require.Contains(t, out, `"visible"`, "its own namespace still reaches it")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM sessions WHERE action_id = $1`, s.m))
}

// Scenario 4: errors reveal neither the name nor the existence of what the
// caller may not read.
func TestAuthorityErrorsRevealNothing(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	secretName := "agent-monitor-for-the-board"
	notATool := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": notATool, "input": func() map[string]any {
		d := monitorDef()
		d["name"] = secretName
		return d
	}()}, nil)
	messages := map[string]string{}
	for name, target := range map[string]string{"unknown": uuid.NewString(), "not a tool": notATool, "a tool": s.gated} {
		agent := entryAction("agent", "")
		agent["config"] = agentMonitor(target)["config"]
		r := e.as(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": agent})
		ge := requireError(t, r, "FORBIDDEN", "input.config.tools[0].action")
		require.Len(t, r.Errors, 1, "nothing else is said")
		require.NotContains(t, ge.Message, secretName)
		messages[name] = strings.ReplaceAll(ge.Message, target, "<id>")
	}
	require.Equal(t, messages["unknown"], messages["not a tool"])
	require.Equal(t, messages["unknown"], messages["a tool"])

	// At run time, code refusals read the same whether the target exists.
	var reasons []string
	for i, target := range []string{uuid.NewString(), s.victim} {
		src := fmt.Sprintf("def turn(event):\n    return {\"state\": {\"s\": session(%q, %q)}, \"status\": \"OPEN\"}\n", target, s.victimSession)
		e.allowed(t, s.attacker, updateActionOp, map[string]any{"id": s.m, "input": entryAction("starlark", src)})
		_, reason, _ := s.run(t, fmt.Sprintf("probe%d", i))
		_, after, _ := strings.Cut(reason, " failed: ") // after the execution's id
		reasons = append(reasons, strings.ReplaceAll(after, target, "<id>"))
	}
	require.Equal(t, reasons[0], reasons[1])
}

// The authority follows the author's current policies: shrinking them
// takes effect at the next turn and dispatch; revoking one of the
// author's tokens changes nothing (the version runs as the principal).
func TestAuthorityFollowsTheAuthorsPolicies(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	m := uuid.NewString()
	policies := []map[string]any{pol("WRITE", "financial.Action.document:"+m), pol("READ", "financial.Action.document:"+m),
		pol("READ", "ledger:entry"), pol("WRITE", "ledger:entry"), pol("READ", "ledger:payroll")}
	tokenID, author := e.token(t, "author", policies...)
	e.put(t, "payroll", "ceo", map[string]any{"salary": 5}, "")
	def := entryAction("starlark", "def turn(event):\n    return {\"state\": {\"pay\": ledger.get(\"payroll\", \"ceo\")}, \"status\": \"OPEN\"}\n")
	def["permissions"] = map[string]any{"read": []string{"payroll"}}
	e.allowed(t, author, createActionOp, map[string]any{"id": m, "input": def})
	var v struct {
		Actions struct {
			Action struct {
				Versions []struct {
					Author string
					Grants struct{ Read []string }
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { versions { author grants { read } } } } }`, map[string]any{"a": m}, &v)
	require.Equal(t, "author", v.Actions.Action.Versions[0].Author)
	require.Equal(t, []string{"entry", "payroll"}, v.Actions.Action.Versions[0].Grants.Read)

	s := &attackScene{e: e, m: m, attacker: author}
	status, _, state := s.run(t, "a")
	require.Equal(t, "OPEN", status)
	jsonEq(t, `{"pay": {"salary": 5}}`, state)

	// Revoking the token the version was stored with changes nothing.
	e.allowed(t, adminToken, `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": tokenID})
	_, author2 := e.token(t, "author", policies...) // same policies, a new token
	s.attacker = author2
	status, _, _ = s.run(t, "b")
	require.Equal(t, "OPEN", status, "the version runs as its author, not as a token")

	// Without READ on payroll the next turn may no longer read it.
	_, author3 := e.token(t, "author", policies[:4]...)
	s.attacker = author3
	status, reason, _ := s.run(t, "c")
	require.Equal(t, "FAILED", status)
	require.Contains(t, reason, "not allowed")

	// Without READ on entry its triggers see no entry event any more.
	_, author4 := e.token(t, "author", policies[0], policies[1], policies[3])
	r := e.as(t, author4, putValueOp, map[string]any{"ns": "entry", "key": "d", "value": map[string]any{"k": "d"}})
	require.Empty(t, r.Errors)
	e.step(t)
	require.Equal(t, 3, e.countRows(t, `SELECT count(*) FROM sessions WHERE action_id = $1`, m), "no session for d")
}

// The seed's operations run unchanged with AUTH on, for a principal holding
// what they need.
func TestAuthoritySeedExamplesWithGrants(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	m := uuid.NewString()
	_, tok := e.token(t, "monitor-owner", pol("WRITE", "financial.Action.document:"+m), pol("READ", "financial.Action.document:"+m),
		pol("READ", "ledger:account"), pol("READ", "ledger:entry"), pol("WRITE", "ledger:account"), pol("WRITE", "ledger:entry"))
	e.allowed(t, tok, example(t, "create_monitor.graphql"), map[string]any{"id": m})
	acct := uuid.NewString()
	e.allowed(t, tok, putValueOp, map[string]any{"ns": "account", "key": acct, "value": map[string]any{"account_id": acct}})
	e.allowed(t, tok, putValueOp, map[string]any{"ns": "entry", "key": acct + "-1", "value": map[string]any{"account_id": acct, "amount": 3}})
	e.step(t)
	r := e.allowed(t, tok, example(t, "session_query.graphql"), map[string]any{"actionId": m, "id": acct})
	require.Contains(t, string(r.Data), `"entry.inserted"`)
	require.Contains(t, string(r.Data), `"COMPLETED"`)
}

// Issue 10 item 5 (T10), in dev mode: a turn handler reads its own session
// only; another action's session is refused whether or not it exists,
// and the tool sessions of a tool it may call stay readable (X6).
func TestTurnHandlerReadsItsOwnSessionOnly(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	victim, spy, tool := uuid.NewString(), uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": victim, "input": entryAction("agent.echo", "")}, nil)
	e.put(t, "entry", "secret", map[string]any{"k": "secret"}, "")
	e.step(t)
	e.ok(t, createActionOp, map[string]any{"id": tool, "input": map[string]any{
		"name": "note", "kind": "starlark", "source": "def call(event):\n    return {\"ok\": True}\n",
		"tool":    map[string]any{"name": "note", "session": map[string]any{"start": map[string]any{"input": map[string]any{"k": "tool.input.k"}}}},
		"session": map[string]any{"id": "string(session.input.k)"}}}, nil)
	src := fmt.Sprintf(`def turn(event):
    me = session(event["action_id"], event["session"]["id"])
    call_tool(%q, {"k": "x"})
    t = session(%q, "x")
    return {"state": {"own": me.id, "tool_calls": t.input_count, "victim": session(%q, "secret")}, "status": "OPEN"}
`, tool, tool, victim)
	def := entryAction("starlark", src)
	def["triggers"].([]any)[0].(map[string]any)["event"] = `event.type == "spy.inserted"`
	def["triggers"].([]any)[1].(map[string]any)["event"] = `event.type == "spy.updated"`
	e.ok(t, createActionOp, map[string]any{"id": spy, "input": def}, nil)
	e.put(t, "spy", "p", map[string]any{"k": "p"}, "")
	e.put(t, "spy", "p", map[string]any{"k": "p", "n": 1}, "")
	e.step(t)
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason string
					State  json.RawMessage
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "p") { status reason state } } } }`, map[string]any{"a": spy}, &out)
	ss := out.Actions.Action.Session
	require.Equal(t, "FAILED", ss.Status, "reading the victim's session fails the turn")
	require.Contains(t, ss.Reason, "not allowed")
	require.NotContains(t, string(ss.State), "secret")

	// Without the victim, its own session and the tool's session read fine.
	src = strings.Replace(src, fmt.Sprintf(`, "victim": session(%q, "secret")`, victim), "", 1)
	def["source"] = src
	e.ok(t, updateActionOp, map[string]any{"id": spy, "input": def}, nil)
	e.put(t, "spy", "q", map[string]any{"k": "q"}, "")
	e.put(t, "spy", "q", map[string]any{"k": "q", "n": 1}, "")
	e.step(t)
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "q") { status reason state } } } }`, map[string]any{"a": spy}, &out)
	require.Equal(t, "OPEN", out.Actions.Action.Session.Status, out.Actions.Action.Session.Reason)
	jsonEq(t, `{"own": "q", "tool_calls": 1}`, out.Actions.Action.Session.State)
}

// Issue 10 item 5 (T10), in dev mode, through a tool called from the
// turn: an action that is a tool and has turns too cannot let one
// session's turn read another of its sessions by calling itself (a tool
// call reads its action's tool sessions only); its own session it reads.
func TestTurnCannotReadItsOtherSessionsThroughItsOwnTool(t *testing.T) {
	t.Parallel()
	e := newSteppedEnv(t, server.Config{})
	a := uuid.NewString()
	src := fmt.Sprintf(`def turn(event):
    k = event["session"]["id"]
    if k == "secret":
        return {"state": {"mine": "the secret"}, "status": "OPEN"}
    return {"state": {"got": call_tool(%q, {"k": "secret"}), "own": call_tool(%q, {"k": k})}, "status": "OPEN"}

def call(event):
    s = session(%q, event["input"]["k"])
    if s == None:
        return None
    return {"input": s.input, "status": s.status}
`, a, a, a)
	def := entryAction("starlark", src)
	def["tool"] = map[string]any{"name": "peek"}
	e.ok(t, createActionOp, map[string]any{"id": a, "input": def}, nil)
	e.put(t, "entry", "secret", map[string]any{"k": "secret"}, "")
	e.put(t, "entry", "secret", map[string]any{"k": "secret", "n": 1}, "")
	e.step(t)
	e.put(t, "entry", "spy", map[string]any{"k": "spy"}, "")
	e.put(t, "entry", "spy", map[string]any{"k": "spy", "n": 1}, "")
	e.step(t)
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status, Reason string
					State          json.RawMessage
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "spy") { status reason state } } } }`, map[string]any{"a": a}, &out)
	ss := out.Actions.Action.Session
	require.Equal(t, "OPEN", ss.Status, ss.Reason)
	jsonEq(t, `{"got": null, "own": null}`, ss.State)
	e.ok(t, `query($a: UUID!) { actions { action(id: $a) { session(id: "secret") { status reason state } } } }`, map[string]any{"a": a}, &out)
	jsonEq(t, `{"mine": "the secret"}`, out.Actions.Action.Session.State)
}

// Issue 11 (refusals reveal nothing), for a principal holding CALL but not
// READ on the target: an unknown action, an action that is not a tool and
// a disabled tool answer alike, from createAction (an agent's tool
// reference) and from callTool; a principal who may read the target is
// told which it is.
func TestAuthorityCallOnlyHoldersLearnNothingOfTheTarget(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	notATool, disabled, readable := uuid.NewString(), uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": notATool, "input": monitorDef()}, nil)
	for _, id := range []string{disabled, readable} {
		e.ok(t, createActionOp, map[string]any{"id": id, "input": map[string]any{
			"name": "t", "kind": "starlark", "source": "def call(event):\n    return 1\n", "tool": map[string]any{"name": "t"}}}, nil)
		e.ok(t, setStatusOp, map[string]any{"id": id, "status": "DISABLED"}, nil)
	}
	targets := map[string]string{"unknown": uuid.NewString(), "not a tool": notATool, "disabled": disabled}
	agent := uuid.NewString()
	policies := []map[string]any{pol("WRITE", "financial.Action.document:"+agent), pol("READ", "ledger:entry"),
		pol("CALL", "financial.Action.document:"+readable), pol("READ", "financial.Action.document:"+readable)}
	for _, id := range targets {
		policies = append(policies, pol("CALL", "financial.Action.document:"+id))
	}
	_, caller := e.token(t, "caller", policies...)
	const callOp = `mutation($a: UUID!) { actions { callTool(actionId: $a, input: {}) { output } } }`
	stored, called := map[string]string{}, map[string]string{}
	for name, target := range targets {
		def := entryAction("agent", "")
		def["config"] = agentMonitor(target)["config"]
		r := e.as(t, caller, createActionOp, map[string]any{"id": agent, "input": def})
		ge := requireError(t, r, "INVALID_CONFIG", "input.config.tools[0].action")
		require.Len(t, r.Errors, 1, name)
		stored[name] = strings.ReplaceAll(ge.Message, target, "<id>")
		ge = requireError(t, e.as(t, caller, callOp, map[string]any{"a": target}), "NOT_FOUND", "actionId")
		called[name] = strings.ReplaceAll(ge.Message, target, "<id>")
	}
	for _, name := range []string{"not a tool", "disabled"} {
		require.Equal(t, stored["unknown"], stored[name], name)
		require.Equal(t, called["unknown"], called[name], name)
	}
	require.NotContains(t, stored["unknown"], "DISABLED")

	// Reading the target, the caller is told what is wrong with it.
	def := entryAction("agent", "")
	def["config"] = agentMonitor(readable)["config"]
	ge := requireError(t, e.as(t, caller, createActionOp, map[string]any{"id": agent, "input": def}), "INVALID_CONFIG", "input.config.tools[0].action")
	require.Contains(t, ge.Message, "DISABLED")
	requireError(t, e.as(t, caller, callOp, map[string]any{"a": readable}), "ACTION_INACTIVE", "actionId")
}

// Issue 11: re-enabling an action runs its current version again with its
// grants, so the enabler must hold them, as storing it would need;
// disabling needs WRITE only. The refusal names the grant only to a
// principal who may read the action.
func TestAuthorityReEnablingNeedsTheVersionsGrants(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	m := uuid.NewString()
	def := entryAction("starlark", "def turn(event):\n    return {\"state\": {\"pay\": ledger.get(\"payroll\", \"ceo\")}, \"status\": \"OPEN\"}\n")
	def["permissions"] = map[string]any{"read": []string{"payroll"}}
	e.ok(t, createActionOp, map[string]any{"id": m, "input": def}, nil)
	res := "financial.Action.document:" + m
	_, writer := e.token(t, "writer", pol("WRITE", res))
	_, reader := e.token(t, "writer-reader", pol("WRITE", res), pol("READ", res), pol("READ", "ledger:entry"))
	_, holder := e.token(t, "holder", pol("WRITE", res), pol("READ", "ledger:entry"), pol("READ", "ledger:payroll"))
	status := func() string {
		var out struct {
			Actions struct{ Action struct{ Status string } }
		}
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) { status } } }`, map[string]any{"a": m}, &out)
		return out.Actions.Action.Status
	}
	e.allowed(t, writer, setStatusOp, map[string]any{"id": m, "status": "DISABLED"})
	require.Equal(t, "DISABLED", status())
	ge := requireError(t, e.as(t, writer, setStatusOp, map[string]any{"id": m, "status": "ACTIVE"}), "FORBIDDEN", "status")
	require.NotContains(t, ge.Message, "payroll", "it may not read the action, so is not told its grants")
	ge = requireError(t, e.as(t, reader, setStatusOp, map[string]any{"id": m, "status": "ACTIVE"}), "FORBIDDEN", "status")
	require.Contains(t, ge.Message, "read ledger namespace payroll")
	require.Equal(t, "DISABLED", status(), "nothing changed")
	e.allowed(t, writer, setStatusOp, map[string]any{"id": m, "status": "ARCHIVED"})
	e.allowed(t, holder, setStatusOp, map[string]any{"id": m, "status": "ACTIVE"})
	require.Equal(t, "ACTIVE", status())
	e.allowed(t, writer, setStatusOp, map[string]any{"id": m, "status": "ACTIVE"}) // already active: nothing to check
}

// Scenario 1's allowed side (issue 11): with the grants declared and held,
// handler code writes another namespace (ledger.put), reads another
// action's session (session() through permissions.sessions) and calls a
// tool (call_tool through permissions.tools); the tool runs with its own
// version's authority.
func TestAuthorityHandlerCodeUsesItsGrants(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	plain := uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": plain, "input": map[string]any{
		"name": "echo", "kind": "starlark", "source": "def call(event):\n    return {\"echo\": event[\"input\"][\"n\"]}\n",
		"tool": map[string]any{"name": "echo"}}}, nil)
	_, clerk := e.token(t, "clerk", pol("WRITE", "financial.Action.document:"+s.m), pol("READ", "financial.Action.document:"+s.m),
		pol("READ", "ledger:entry"), pol("WRITE", "ledger:entry"), pol("WRITE", "ledger:payroll"),
		pol("READ", "financial.Action.document:"+s.victim), pol("CALL", "financial.Action.document:"+plain))
	src := fmt.Sprintf(`def turn(event):
    v = ledger.put("payroll", "ceo", {"salary": 1})
    other = session(%q, %q)
    out = call_tool(%q, {"n": 7})
    return {"state": {"put": v, "other": other.id, "other_status": other.status, "tool": out}, "status": "OPEN"}
`, s.victim, s.victimSession, plain)
	def := entryAction("starlark", src)
	def["permissions"] = map[string]any{"write": []string{"payroll"}, "sessions": []string{s.victim}, "tools": []string{plain}}
	e.allowed(t, clerk, updateActionOp, map[string]any{"id": s.m, "input": def})
	s.attacker = clerk
	status, reason, state := s.run(t, "granted")
	require.Equal(t, "OPEN", status, reason)
	jsonEq(t, fmt.Sprintf(`{"put": 2, "other": %q, "other_status": "OPEN", "tool": {"echo": 7}}`, s.victimSession), state)
	var pay struct {
		Ledger struct {
			Value struct{ Value json.RawMessage }
		}
	}
	e.ok(t, `{ ledger { value(namespace: "payroll", key: "ceo") { value } } }`, nil, &pay)
	jsonEq(t, `{"salary": 1}`, pay.Ledger.Value.Value)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, plain))
}

// Issue 11 item 5: handler code cannot call a tool whose owner requires
// approval, even with the grant: call_tool fails with APPROVAL_REQUIRED
// (the turn fails, not retried) and an agent's run_code snippet is told
// the tool requires approval; the tool never runs.
func TestAuthorityCodeCannotCallAGatedTool(t *testing.T) {
	t.Parallel()
	s := newAttackScene(t)
	e := s.e
	s.attacker = adminToken // the admin holds CALL on the tool: only the gate stops the calls
	def := entryAction("starlark", fmt.Sprintf("def turn(event):\n    return {\"state\": {\"out\": call_tool(%q, {})}, \"status\": \"OPEN\"}\n", s.gated))
	def["permissions"] = map[string]any{"tools": []string{s.gated}}
	e.allowed(t, adminToken, updateActionOp, map[string]any{"id": s.m, "input": def})
	status, reason, _ := s.run(t, "call")
	require.Equal(t, "FAILED", status)
	require.Contains(t, reason, "requires a person's approval")

	agent := entryAction("agent", "")
	agent["config"] = map[string]any{
		"provider": "scripted", "programmatic": true,
		"tools": []any{map[string]any{"action": s.gated, "approval": "NONE"}},
		"script": []any{
			map[string]any{"step": 0, "toolCalls": []any{map[string]any{"id": "c1", "name": "run_code",
				"input": map[string]any{"code": `r = catch(call_tool, "wire_money", {})` + "\nresult = r.error"}}}},
			map[string]any{"step": 1, "toolCalls": []any{map[string]any{"name": "report_outcome", "input": map[string]any{"status": "OPEN"}}}},
		},
	}
	e.allowed(t, adminToken, updateActionOp, map[string]any{"id": s.m, "input": agent})
	status, reason, _ = s.run(t, "code")
	require.Equal(t, "OPEN", status, reason)
	r := e.allowed(t, adminToken, `query($a: UUID!) { actions { action(id: $a) { session(id: "code") {
	  turns(first: 5) { nodes { execution { invocation { transcript(first: 50) { nodes { kind data } } } } } } } } } }`, map[string]any{"a": s.m})
	require.Contains(t, string(r.Data), "tool wire_money requires approval: call it directly, not from code")
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, s.gated), "the tool never ran")
}

// nsAction is entryAction over namespace ns instead of entry.
func nsAction(ns, kind, source string) map[string]any {
	d := entryAction(kind, source)
	trig := d["triggers"].([]any)
	trig[0].(map[string]any)["event"] = fmt.Sprintf(`event.type == "%s.inserted"`, ns)
	trig[1].(map[string]any)["event"] = fmt.Sprintf(`event.type == "%s.updated"`, ns)
	return d
}

// turnIn has token write key of namespace ns twice (a session of the
// action watching ns and its first turn) and returns the session's status
// and reason as the admin reads them.
func (e *authEnv) turnIn(t *testing.T, token, ns, actionID, key string) (status, reason string) {
	t.Helper()
	for _, v := range []map[string]any{{"k": key}, {"k": key, "n": 1}} {
		e.allowed(t, token, putValueOp, map[string]any{"ns": ns, "key": key, "value": v})
	}
	e.step(t)
	var out struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					Reason *string
				}
			}
		}
	}
	e.ok(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status reason } } } }`,
		map[string]any{"a": actionID, "s": key}, &out)
	if r := out.Actions.Action.Session.Reason; r != nil {
		reason = *r
	}
	return out.Actions.Action.Session.Status, reason
}

// Issue 11 item 5: a version's reach follows its author's policies from the
// next turn on: losing WRITE on a namespace stops ledger.put, losing READ
// on another action stops session() on its sessions, losing CALL on a tool
// stops call_tool and an agent's use of it (whose model is then not shown
// the tool at all). The other grants keep working.
func TestAuthorityAuthorLosingGrantsLimitsItsVersions(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	victim, tool := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": victim, "input": nsAction("v", "agent.echo", "")}, nil)
	e.put(t, "v", "vs", map[string]any{"k": "vs"}, "")
	e.step(t)
	e.ok(t, createActionOp, map[string]any{"id": tool, "input": map[string]any{
		"name": "echo", "kind": "starlark", "source": "def call(event):\n    return {\"echo\": 1}\n", "tool": map[string]any{"name": "secret_echo"}}}, nil)
	put, sess, call, agent := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	res := func(id string) string { return "financial.Action.document:" + id }
	base := []map[string]any{}
	for _, id := range []string{put, sess, call, agent} {
		base = append(base, pol("WRITE", res(id)))
	}
	for _, ns := range []string{"p", "s", "c", "a"} {
		base = append(base, pol("READ", "ledger:"+ns), pol("WRITE", "ledger:"+ns))
	}
	writeGrant, sessionGrant, callGrant := pol("WRITE", "ledger:payroll"), pol("READ", res(victim)), pol("CALL", res(tool))
	_, author := e.token(t, "grant-author", append(base, writeGrant, sessionGrant, callGrant)...)

	defs := map[string]map[string]any{
		put:  nsAction("p", "starlark", "def turn(event):\n    ledger.put(\"payroll\", \"k\", {\"n\": 1})\n    return {\"status\": \"OPEN\"}\n"),
		sess: nsAction("s", "starlark", fmt.Sprintf("def turn(event):\n    return {\"state\": {\"s\": session(%q, \"vs\").id}, \"status\": \"OPEN\"}\n", victim)),
		call: nsAction("c", "starlark", fmt.Sprintf("def turn(event):\n    return {\"state\": call_tool(%q, {}), \"status\": \"OPEN\"}\n", tool)),
		agent: func() map[string]any {
			d := nsAction("a", "agent", "")
			d["config"] = map[string]any{"provider": "scripted", "tools": []any{map[string]any{"action": tool}},
				"script": []any{map[string]any{"toolCalls": []any{map[string]any{"name": "report_outcome", "input": map[string]any{"status": "OPEN"}}}}}}
			return d
		}(),
	}
	defs[put]["permissions"] = map[string]any{"write": []string{"payroll"}}
	defs[sess]["permissions"] = map[string]any{"sessions": []string{victim}}
	defs[call]["permissions"] = map[string]any{"tools": []string{tool}}
	for id, def := range defs {
		e.allowed(t, author, createActionOp, map[string]any{"id": id, "input": def})
	}
	ns := map[string]string{put: "p", sess: "s", call: "c", agent: "a"}
	expect := func(round string, failing ...string) {
		t.Helper()
		for id, n := range ns {
			status, reason := e.turnIn(t, author, n, id, round)
			if slices.Contains(failing, id) {
				require.Equal(t, "FAILED", status, "%s %s", round, n)
				require.Contains(t, reason, "not allowed", "%s %s", round, n)
				require.NotContains(t, reason, "secret_echo")
			} else {
				require.Equal(t, "OPEN", status, "%s %s: %s", round, n, reason)
			}
		}
	}
	expect("all")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, tool))

	_, author = e.token(t, "grant-author", append(base, writeGrant, sessionGrant)...)
	expect("no-call", call, agent)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, tool), "the tool did not run again")

	_, author = e.token(t, "grant-author", append(base, sessionGrant)...)
	expect("no-write", call, agent, put)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'payroll'`))
	require.Equal(t, 2, e.countRows(t, `SELECT version FROM kv_values WHERE namespace = 'payroll'`), "written by the first two rounds only")

	_, author = e.token(t, "grant-author", base...)
	expect("no-session", call, agent, put, sess)
}

// The seed's other operations run unchanged with AUTH on, each by a
// principal holding what it needs (not an admin): the monitor with an end
// and a clock, the tool block with a session (and a Starlark action calling
// it), and approve and retry answered by a responder holding RESPOND and
// READ on the agent only (the agent's reference requires the approval, not
// the tool's owner).
func TestAuthoritySeedExamplesWithGrantsMore(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	doc := func(id string) map[string]any { return pol("WRITE", "financial.Action.document:"+id) }
	read := func(id string) map[string]any { return pol("READ", "financial.Action.document:"+id) }
	clockID, toolID, balanceID, freezeID, agentID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	_, owner := e.token(t, "owner", doc(clockID), read(clockID), doc(toolID), read(toolID), doc(balanceID), read(balanceID),
		doc(freezeID), doc(agentID), read(agentID),
		pol("READ", "ledger:account"), pol("READ", "ledger:entry"), pol("WRITE", "ledger:account"), pol("WRITE", "ledger:entry"),
		pol("WRITE", "ledger:balance"), pol("WRITE", "ledger:frozen"))

	// create_monitor_with_end_and_clock.graphql
	e.allowed(t, owner, example(t, "create_monitor_with_end_and_clock.graphql"), map[string]any{"id": clockID})
	acct := uuid.NewString()
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "account", "key": acct, "value": map[string]any{"account_id": acct}})
	e.step(t)
	r := e.allowed(t, owner, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status endsAt clock { name } } } } }`,
		map[string]any{"a": clockID, "s": acct})
	require.Contains(t, string(r.Data), `"status":"OPEN"`)
	require.Contains(t, string(r.Data), `"morning"`)

	// tool_with_session.graphql-fragment, called from a Starlark turn that
	// declares it.
	toolOp := fmt.Sprintf(`mutation($id: UUID!) { actions { createAction(id: $id, input: {
	  name: "notify-ops", kind: "starlark", source: %s
	  %s
	  session: { inputSchema: { type: "object", properties: { account_id: { type: "string" } }, required: ["account_id"] },
	             id: "string(session.input.account_id)" }
	}) { actionId } } }`, gqlString(notifySource), example(t, "tool_with_session.graphql-fragment"))
	e.allowed(t, owner, toolOp, map[string]any{"id": toolID})
	e.allowed(t, owner, createOp, map[string]any{"id": balanceID, "input": map[string]any{
		"name": "balances", "kind": "starlark",
		"source": strings.ReplaceAll(balanceSource, "NOTIFY", `"`+toolID+`"`),
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "account.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session":     map[string]any{"id": "string(session.input.account_id)", "turns": map[string]any{"on": []any{"entry"}}},
		"permissions": map[string]any{"write": []string{"balance"}, "tools": []string{toolID}},
	}})
	b := uuid.NewString()
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "account", "key": b, "value": map[string]any{"account_id": b}})
	e.step(t)
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "entry", "key": b + "-1", "value": map[string]any{"account_id": b, "amount": -5}})
	e.step(t)
	r = e.allowed(t, owner, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status state } } } }`,
		map[string]any{"a": balanceID, "s": b})
	require.Contains(t, string(r.Data), `"status":"OPEN"`)
	require.Contains(t, string(r.Data), `"balance":-5`)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM executions WHERE action_id = $1`, toolID), "the tool ran in its session")

	// approve.graphql and retry_held_turn.graphql by a responder.
	tool := freezeTool()
	tool["permissions"] = map[string]any{"write": []string{"frozen"}}
	e.allowed(t, owner, createOp, map[string]any{"id": freezeID, "input": tool})
	e.allowed(t, owner, createOp, map[string]any{"id": agentID, "input": agentMonitor(freezeID)})
	_, responder := e.token(t, "responder", read(agentID), pol("RESPOND", "financial.Action.document:"+agentID))
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "account", "key": "3f0c9f8e", "value": map[string]any{"account_id": "3f0c9f8e"}})
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "entry", "key": "e1", "value": map[string]any{"account_id": "3f0c9f8e", "amount": 12000}})
	e.step(t)
	ap := e.pendingApproval(t, responder, agentID, "3f0c9f8e-account")
	require.True(t, ap.MayApprove)
	e.allowed(t, owner, putValueOp, map[string]any{"ns": "entry", "key": "e2", "value": map[string]any{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}})
	e.allowed(t, responder, example(t, "approve.graphql"), map[string]any{"actionId": agentID, "interruptId": ap.InterruptID})
	e.step(t)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen' AND value->>'requested_by' = 'agent-monitor'`))
	var held struct {
		Actions struct {
			Action struct {
				Session struct {
					Holds []struct{ InterruptID, Status string }
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(e.allowed(t, responder, `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") {
	  holds { interruptId status } } } } }`, map[string]any{"a": agentID}).Data, &held))
	require.Len(t, held.Actions.Action.Session.Holds, 1)
	e.allowed(t, responder, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": agentID, "interruptId": held.Actions.Action.Session.Holds[0].InterruptID})
	e.step(t)
	r = e.allowed(t, responder, `query($a: UUID!) { actions { action(id: $a) { session(id: "3f0c9f8e-account") { status state } } } }`, map[string]any{"a": agentID})
	require.Contains(t, string(r.Data), `"status":"OPEN"`)
	require.Contains(t, string(r.Data), `"reviewed":true`)
}

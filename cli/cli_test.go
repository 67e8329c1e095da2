package cli_test

// Issue 12, CLI: every client command end to end against a real server
// (the real HTTP handler, a fresh PostgreSQL database), in-process, with a
// human and a JSON output assertion each, and the exit codes scripts rely
// on: 1 usage, 2 refused (code printed), 3 unreachable, 4 not found.

import (
	"encoding/json"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
)

const (
	monitorID = "5d1f8f5e-6a43-4c1e-9d0e-2f3f7b2a9c11"
	toolID    = "2f9b7c3a-1d4e-4f5a-8b6c-7d8e9f0a1b2c"
	agentID   = "6a0c2d6e-8f1b-4c1a-9e2d-3b4c5d6e7f80"
)

type appliedJSON struct {
	ID      string
	Name    string
	Version json.Number
	Result  string
}

// Issue 12 CLI, apply (A1, A2): created, unchanged, updated; JSON and
// YAML (from a file and from stdin) describe the same action.
func TestApplyCreatesUpdatesOrLeavesUnchanged(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	out := r.ok(t, "apply", "-f", "testdata/monitor.json")
	require.Equal(t, "action "+monitorID+" (early-fraud-detector) created: version 1\n", out)

	var a appliedJSON
	r.okJSON(t, &a, "apply", "-f", "testdata/monitor.json")
	require.Equal(t, appliedJSON{ID: monitorID, Name: "early-fraud-detector", Version: "1", Result: "unchanged"}, a)

	// The YAML twin is the same definition: unchanged.
	require.Contains(t, r.ok(t, "apply", "-f", "testdata/monitor.yaml"), "unchanged: version 1")

	// A changed definition from stdin: a new version.
	yaml, err := os.ReadFile("testdata/monitor.yaml")
	require.NoError(t, err)
	changed := strings.Replace(string(yaml), "sleep_ms: 0", "sleep_ms: 5", 1)
	res := r.runIn(t, changed, "apply", "-f", "-", "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.JSONEq(t, `{"id":"`+monitorID+`","name":"early-fraud-detector","version":2,"result":"updated"}`, res.out)
	require.Contains(t, r.runIn(t, changed, "apply", "-f", "-").out, "unchanged: version 2")
}

// Issue 12 CLI, apply: JSON values of the definition pass through
// untouched: integers beyond 64 bits and decimals beyond a float's
// precision come back with the same digits, from JSON and from YAML.
func TestApplyKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	for _, file := range []string{"testdata/monitor.yaml", "testdata/monitor.json"} {
		r.ok(t, "apply", "-f", file)
		out := r.ok(t, "actions", "get", monitorID, "-o", "json")
		require.Contains(t, out, `"maximum": 123456789012345678901234567890`, file)
		require.Contains(t, out, `"multipleOf": 0.00000000000000000001`, file)
	}
}

// Issue 12 CLI: documents that cannot be applied are usage errors (exit
// 1) naming the problem; a definition the server refuses exits 2 with its
// code and field.
func TestApplyRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	for _, c := range []struct {
		file, want string
	}{
		{dir + "/missing.yaml", "no such file"},
		{write("noid.json", `{"name": "x", "kind": "agent.echo"}`), "no id"},
		{write("numid.yaml", "id: 12\nname: x\n"), "id must be a string"},
		{write("bad.yaml", "id: [unclosed\n"), "not valid YAML"},
		{write("two.yaml", "id: a\n---\nid: b\n"), "more than one YAML document"},
		{write("inf.yaml", "id: "+monitorID+"\nconfig: {x: .inf}\n"), "not a number JSON can hold"},
		{write("dup.yaml", "id: "+monitorID+"\nname: a\nname: b\n"), `"name" appears twice`},
		{write("merge.yaml", "id: "+monitorID+"\nbase: &b {x: 1}\nconfig: {<<: *b}\n"), "merge keys"},
		{write("list.yaml", "- id: x\n"), "must be a mapping"},
		{write("trailing.json", `{"id": "x"} {}`), "more after the object"},
	} {
		r.fails(t, cli.ExitUsage, []string{"apply", "-f", c.file}, c.want)
	}
	r.fails(t, cli.ExitUsage, []string{"apply"}, "--file")

	bad := write("badcel.json", `{"id": "`+monitorID+`", "name": "m", "kind": "agent.echo",
	  "triggers": [{"name": "t", "event": "event.type ==", "session": {"start": {"input": {"a": "1"}}}}],
	  "session": {"id": "'x'"}}`)
	res := r.fails(t, cli.ExitRefused, []string{"apply", "-f", bad}, "INVALID_EXPRESSION", "input.triggers[0].event")
	require.Empty(t, res.out)
	res = r.fails(t, cli.ExitRefused, []string{"apply", "-f", bad, "-o", "json"})
	var e struct {
		Error struct {
			Exit   int
			Code   string
			Errors []struct{ Code, Field, Message string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.errOut), &e), res.errOut)
	require.Equal(t, 2, e.Error.Exit)
	require.Equal(t, "INVALID_EXPRESSION", e.Error.Code)
	require.Equal(t, "input.triggers[0].event", e.Error.Errors[0].Field)
}

// Issue 12 CLI: actions list and get, human and JSON; get's JSON
// definition applies again unchanged; an unknown action exits 4.
func TestActionsListAndGet(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	r.ok(t, "apply", "-f", "testdata/monitor.json")
	r.ok(t, "apply", "-f", "testdata/freeze-tool.yaml")

	out := r.ok(t, "actions", "list")
	require.Regexp(t, `(?m)^ID\s+NAME\s+KIND\s+VERSION\s+STATUS\s+UPDATED$`, out)
	require.Regexp(t, `(?m)^`+monitorID+`\s+early-fraud-detector\s+agent\.echo\s+1\s+ACTIVE\s`, out)
	require.Regexp(t, `(?m)^`+toolID+`\s+freeze-account\s+starlark\s+1\s+ACTIVE\s`, out)
	var list []struct {
		ID, Status string
		Version    json.Number
		Definition struct{ Name, Kind string }
	}
	r.okJSON(t, &list, "actions", "list")
	require.Len(t, list, 2)
	names := []string{list[0].Definition.Name, list[1].Definition.Name}
	require.ElementsMatch(t, []string{"early-fraud-detector", "freeze-account"}, names)
	r.okJSON(t, &list, "actions", "list", "--limit", "1")
	require.Len(t, list, 1)

	out = r.ok(t, "actions", "get", monitorID)
	for _, want := range []string{"id:       " + monitorID, "name:     early-fraud-detector", "status:   ACTIVE",
		"version:  1", "opened", "resume string(event.data.account_id)", "\"agent_id\": \"monitor\""} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `(?m)^\s+1\s+\S+\s+dev\s+\d+$`, out, "the versions table")

	var got map[string]json.RawMessage
	r.okJSON(t, &got, "actions", "get", monitorID)
	require.JSONEq(t, `"`+monitorID+`"`, string(got["id"]))
	require.JSONEq(t, `"ACTIVE"`, string(got["status"]))
	var versions []map[string]any
	require.NoError(t, json.Unmarshal(got["versions"], &versions))
	require.Len(t, versions, 1)
	// The definition is ActionInput's shape: apply it again, unchanged.
	var def map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got["definition"], &def))
	def["id"] = got["id"]
	doc, err := json.Marshal(def)
	require.NoError(t, err)
	res := r.runIn(t, string(doc), "apply", "-f", "-")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, "unchanged: version 1")

	r.fails(t, cli.ExitNotFound, []string{"actions", "get", "00000000-0000-4000-8000-000000000000"}, "NOT_FOUND: no action")
	res = r.fails(t, cli.ExitNotFound, []string{"actions", "get", "00000000-0000-4000-8000-000000000000", "-o", "json"})
	require.JSONEq(t, `{"error":{"exit":4,"code":"NOT_FOUND","message":"no action 00000000-0000-4000-8000-000000000000"}}`, res.errOut)
	r.fails(t, cli.ExitRefused, []string{"actions", "get", "not-a-uuid"}, "BAD_USER_INPUT")
	r.fails(t, cli.ExitUsage, []string{"actions", "get"}, "expected")
}

// openAccount writes an account and an entry through the CLI and lets
// the monitor take them: session acc1 with one turn.
func openAccount(t *testing.T, r *rig) {
	t.Helper()
	r.ok(t, "apply", "-f", "testdata/monitor.json")
	r.ok(t, "put", "account", "acc1", `{"account_id": "acc1"}`)
	r.ok(t, "put", "entry", "e1", `{"account_id": "acc1", "amount": 12.50}`)
	r.step(t)
}

// Issue 12 CLI: sessions list, get and close, human and JSON; closing
// twice and unknown sessions or actions.
func TestSessionsListGetClose(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	openAccount(t, r)

	out := r.ok(t, "sessions", "list", monitorID)
	require.Regexp(t, `(?m)^ID\s+STATUS\s+VERSION\s+RUNNING\s+STARTED\s+UPDATED\s+TITLE\s+REASON / STATUS LINE$`, out)
	require.Regexp(t, `(?m)^acc1\s+OPEN\s+1\s+-\s`, out)
	// G6: archived sessions are listed only with --archived.
	require.Equal(t, "session acc1: archived\n", r.ok(t, "sessions", "archive", monitorID, "acc1"))
	var hidden []struct{ ID string }
	r.okJSON(t, &hidden, "sessions", "list", monitorID)
	require.Empty(t, hidden)
	r.okJSON(t, &hidden, "sessions", "list", monitorID, "--archived")
	require.Equal(t, []struct{ ID string }{{"acc1"}}, hidden)
	require.Equal(t, "session acc1: shown in lists\n", r.ok(t, "sessions", "unarchive", monitorID, "acc1"))
	var list []struct{ ID, Status string }
	r.okJSON(t, &list, "sessions", "list", monitorID, "--status", "open")
	require.Equal(t, []struct{ ID, Status string }{{"acc1", "OPEN"}}, list)
	r.okJSON(t, &list, "sessions", "list", monitorID, "--status", "COMPLETED")
	require.Empty(t, list)
	r.fails(t, cli.ExitUsage, []string{"sessions", "list", monitorID, "--status", "done"}, "one of OPEN")
	r.fails(t, cli.ExitNotFound, []string{"sessions", "list", toolID}, "NOT_FOUND")

	out = r.ok(t, "sessions", "get", monitorID, "acc1")
	for _, want := range []string{"session:  acc1", "status:   OPEN", `input:    {"account_id":"acc1"}`,
		"turn 1: COMPLETED", "entry.inserted entry/e1 = ", `"amount":12.50`, "checkpoint: OPEN", "transcript 1 input"} {
		require.Contains(t, out, want)
	}
	var s struct {
		ID, Status string
		Input      json.RawMessage
		Turns      struct {
			Nodes []struct {
				Number    json.Number
				Status    string
				Inputs    []struct{ Kind, Identity string }
				Execution struct {
					Invocation struct {
						Output     json.RawMessage
						Transcript struct{ Nodes []struct{ Kind string } }
					}
				}
			}
		}
	}
	r.okJSON(t, &s, "sessions", "get", monitorID, "acc1")
	require.Equal(t, "acc1", s.ID)
	require.Len(t, s.Turns.Nodes, 1)
	tu := s.Turns.Nodes[0]
	require.EqualValues(t, "COMPLETED", tu.Status)
	require.Equal(t, "EVENT", tu.Inputs[0].Kind)
	require.NotEmpty(t, tu.Execution.Invocation.Transcript.Nodes)
	require.Contains(t, string(tu.Execution.Invocation.Output), `12.50`, "numbers as written")
	r.fails(t, cli.ExitNotFound, []string{"sessions", "get", monitorID, "nope"}, `NOT_FOUND: no session "nope"`)
	r.fails(t, cli.ExitUsage, []string{"sessions", "get", monitorID, "acc1", "--turns", "0"}, "--turns")

	// G7: a session started by hand; the same start again finds it live.
	require.Equal(t, "session acc9: OPEN (started)\n", r.ok(t, "sessions", "start", monitorID, `{"account_id": "acc9"}`))
	require.Equal(t, "session acc9: OPEN (was live already)\n", r.ok(t, "sessions", "start", monitorID, `{"account_id": "acc9"}`))
	r.fails(t, cli.ExitUsage, []string{"sessions", "start", monitorID, "{nope"}, "JSON")
	// G8: an echo handler calls no model, so its sessions take no spend
	// cap (TestSessionsBudget sets one on an agent's).
	r.fails(t, cli.ExitRefused, []string{"sessions", "budget", monitorID, "acc1", "--max", "2.5"}, "BAD_USER_INPUT", "cannot have a spend cap")
	require.Equal(t, "session acc1: OPEN; spent $0.0000 (no cap)\n", r.ok(t, "sessions", "budget", monitorID, "acc1", "--no-cap"))

	out = r.ok(t, "sessions", "close", monitorID, "acc1", "--reason", "account closed")
	require.Equal(t, "session acc1: CANCELLED (account closed)\n", out)
	r.fails(t, cli.ExitRefused, []string{"sessions", "close", monitorID, "acc1", "--reason", "again"}, "SESSION_CLOSED")
	r.ok(t, "put", "account", "acc2", `{"account_id": "acc2"}`)
	r.step(t)
	var closed struct{ ID, Status, Reason string }
	r.okJSON(t, &closed, "sessions", "close", monitorID, "acc2", "--reason", "r2")
	require.Equal(t, struct{ ID, Status, Reason string }{"acc2", "CANCELLED", "r2"}, closed)
	r.fails(t, cli.ExitNotFound, []string{"sessions", "close", monitorID, "nope", "--reason", "x"}, "NOT_FOUND")
	r.fails(t, cli.ExitUsage, []string{"sessions", "close", monitorID, "acc1"}, "--reason")
}

// Issue 12 CLI: put and append, human and JSON; an idempotency key
// returns the first result; bad JSON is a usage error; stdin with -.
func TestPutAndAppend(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	out := r.ok(t, "put", "account", "a1", `{"account_id": "a1", "limit": 12345678901234567890.5}`)
	require.Equal(t, "account/a1 version 1: event account.inserted at position 1\n", out)
	var kv struct {
		Namespace, Key string
		Value          json.RawMessage
		Version        json.Number
		Event          struct{ ID, EventType, Position string }
	}
	r.okJSON(t, &kv, "put", "account", "a1", `{"account_id": "a1", "limit": 7}`, "--idempotency-key", "k1")
	require.Equal(t, "2", kv.Version.String())
	require.Equal(t, "account.updated", kv.Event.EventType)
	first := kv.Event.ID
	r.okJSON(t, &kv, "put", "account", "a1", `{"account_id": "a1", "limit": 7}`, "--idempotency-key", "k1")
	require.Equal(t, first, kv.Event.ID, "L3: the first result again")
	res := r.runIn(t, `"from stdin"`, "put", "note", "n1", "-", "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, `"value": "from stdin"`)
	r.fails(t, cli.ExitUsage, []string{"put", "account", "a1", "{not json"}, "JSON is not JSON")
	r.fails(t, cli.ExitUsage, []string{"put", "account", "a1"}, "expected")
	res = r.runIn(t, "\"\xff\"", "put", "note", "n2", "-")
	require.Equal(t, cli.ExitUsage, res.code, "%s", res)
	require.Contains(t, res.errOut, "JSON is not valid UTF-8 text")

	out = r.ok(t, "append", "payment.requested", `{"amount": 0.1000000000000000000001}`)
	require.Regexp(t, `^event [0-9a-f-]{36} payment\.requested at position \d+\n$`, out)
	var ev struct {
		ID, EventType, Position string
		Data                    json.RawMessage
	}
	r.okJSON(t, &ev, "append", "payment.requested", `{"amount": 0.1000000000000000000001}`, "--idempotency-key", "p1")
	require.JSONEq(t, `{"amount": 0.1000000000000000000001}`, string(ev.Data))
	require.Contains(t, string(ev.Data), "0.1000000000000000000001", "the digits as written")
	r.fails(t, cli.ExitRefused, []string{"append", "action_session.responded", `{}`}, "RESERVED_EVENT_TYPE")
	r.fails(t, cli.ExitUsage, []string{"append", "x.y", "nope"}, "not JSON")
}

// Issue 12 CLI, tokens (issue 6): create, list and revoke through the API
// with AUTH on; the token works; a principal without ADMIN is refused
// (FORBIDDEN, exit 2), a request without a token too (UNAUTHENTICATED).
func TestTokensAndRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	admin := []string{"--token", adminToken}

	res := r.run(t, append(admin, "tokens", "create", "reader", "--policy", "read=financial.Action.document", "--policy", "READ=ledger")...)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	reader := strings.TrimSpace(res.out)
	require.NotContains(t, reader, " ", "stdout is the token alone")
	require.Regexp(t, `^token [0-9a-f-]{36} for principal "reader" \(READ=financial.Action.document READ=ledger\)`, res.errOut)

	var tok struct {
		ID, Token string
		Principal struct {
			ID       string
			Policies []struct{ Action, Resource string }
		}
	}
	r.okJSON(t, &tok, append(admin, "tokens", "create", "carol", "--admin")...)
	require.Equal(t, "carol", tok.Principal.ID)
	require.Equal(t, []struct{ Action, Resource string }{{"ADMIN", "*"}}, tok.Principal.Policies)
	require.NotEmpty(t, tok.Token)

	// tokens list: a row per token, with its id (never the secret).
	out := r.ok(t, append(admin, "tokens", "list")...)
	readerID := regexp.MustCompile(`token ([0-9a-f-]{36})`).FindStringSubmatch(res.errOut)[1]
	require.Regexp(t, `(?m)^reader\s+`+readerID+`\s+2026-03-02T09:00:00Z\s+-\s+READ=financial.Action.document READ=ledger$`, out)
	require.Regexp(t, `(?m)^carol\s+`+tok.ID+`\s+2026-03-02T09:00:00Z\s+-\s+ADMIN=\*$`, out)
	require.NotContains(t, out, reader, "no secret")
	require.NotContains(t, out, tok.Token, "no secret")
	type tokenJSON struct {
		ID        string
		CreatedAt string
		RevokedAt *string
	}
	var ps []struct {
		ID     string
		Tokens []tokenJSON
	}
	r.okJSON(t, &ps, "--token", tok.Token, "tokens", "list")
	require.Contains(t, ps, struct {
		ID     string
		Tokens []tokenJSON
	}{"carol", []tokenJSON{{ID: tok.ID, CreatedAt: "2026-03-02T09:00:00Z"}}})

	// The reader may read, not store actions nor manage tokens.
	r.ok(t, "--token", reader, "actions", "list")
	r.fails(t, cli.ExitRefused, []string{"--token", reader, "apply", "-f", "testdata/monitor.json"}, "FORBIDDEN")
	r.fails(t, cli.ExitRefused, []string{"--token", reader, "tokens", "list"}, "FORBIDDEN")
	res = r.fails(t, cli.ExitRefused, []string{"actions", "list", "-o", "json"})
	require.Contains(t, res.errOut, `"code":"UNAUTHENTICATED"`)
	r.fails(t, cli.ExitRefused, []string{"--token", "wrong", "actions", "list"}, "UNAUTHENTICATED")

	out = r.ok(t, append(admin, "tokens", "revoke", tok.ID)...)
	require.Equal(t, "revoked token "+tok.ID+"\n", out)
	r.fails(t, cli.ExitRefused, []string{"--token", tok.Token, "tokens", "list"}, "UNAUTHENTICATED")
	r.fails(t, cli.ExitNotFound, append(admin, "tokens", "revoke", tok.ID), "NOT_FOUND", "revoked already")
	// A revoked token is listed only with --revoked, with when.
	out = r.ok(t, append(admin, "tokens", "list")...)
	require.Regexp(t, `(?m)^carol\s+-\s+-\s+-\s+ADMIN=\*$`, out)
	out = r.ok(t, append(admin, "tokens", "list", "--revoked")...)
	require.Regexp(t, `(?m)^carol\s+`+tok.ID+`\s+2026-03-02T09:00:00Z\s+2026-03-02T09:00:00Z\s+ADMIN=\*$`, out)
	var rev map[string]any
	res = r.run(t, append(admin, "tokens", "create", "dave", "--policy", "READ=ledger", "-o", "json")...)
	require.Equal(t, cli.ExitOK, res.code)
	require.NoError(t, json.Unmarshal([]byte(res.out), &tok))
	r.okJSON(t, &rev, append(admin, "tokens", "revoke", tok.ID)...)
	require.Equal(t, map[string]any{"id": tok.ID, "revoked": true}, rev)

	r.fails(t, cli.ExitUsage, append(admin, "tokens", "create", "x"), "--admin or at least one --policy")
	r.fails(t, cli.ExitUsage, append(admin, "tokens", "create", "x", "--policy", "READ"), "ACTION=RESOURCE")
	r.fails(t, cli.ExitUsage, append(admin, "tokens", "create", "x", "--policy", "PEEK=ledger"), "the action is one of")
}

// Issue 12 CLI, exit 3: nothing listens, or what answers is not GraphQL.
func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	for _, args := range [][]string{
		{"--server", down, "actions", "list"},
		{"--server", down, "apply", "-f", "testdata/monitor.json"},
		{"--server", down + "/graphql", "events", "tail"},
		{"--server", notGraphQL(t), "actions", "list"},
	} {
		res := execute(t.Context(), "", nil, nil, args...)
		require.Equal(t, cli.ExitUnreachable, res.code, "%v\n%s", args, res)
		require.Contains(t, res.errOut, "/graphql")
	}
	res := execute(t.Context(), "", nil, nil, "--server", down, "-o", "json", "actions", "list")
	require.Contains(t, res.errOut, `"exit":3`)
	res = execute(t.Context(), "", nil, nil, "--server", "localhost:8080", "actions", "list")
	require.Equal(t, cli.ExitUsage, res.code, "%s", res)
	require.Contains(t, res.errOut, "write http://HOST:PORT")
}

// Issue 12 CLI: ACTIONSLEDGER_SERVER and ACTIONSLEDGER_TOKEN stand in for
// the flags (not parallel: it sets the process environment).
func TestServerAndTokenFromEnvironment(t *testing.T) {
	r := newRig(t, true)
	t.Setenv("ACTIONSLEDGER_SERVER", r.srv.URL+"/graphql/")
	t.Setenv("ACTIONSLEDGER_TOKEN", adminToken)
	res := execute(t.Context(), "", nil, nil, "actions", "list", "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Equal(t, "[]\n", res.out)
}

// Issue 12 CLI, exit 1: bad command lines say what is wrong.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	a, s, i := monitorID, "s1", "i1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "unexpected argument frobnicate"},
		{[]string{"respond", a, s, i}, "give a decision"},
		{[]string{"respond", a, s, i, "--approve", "--retry"}, "exactly one of"},
		{[]string{"respond", a, s, i, "--approve", "--note", "n"}, "--note goes with --retry or --skip"},
		{[]string{"respond", a, s, i, "--skip", "--reason", "r"}, "--reason goes with --approve or --deny"},
		{[]string{"respond", a, s, i, "--deny", "--input", "{}"}, "--input goes with --approve"},
		{[]string{"respond", a, s, i, "--approve", "--input", "[1]"}, "--input must be a JSON object"},
		{[]string{"respond", a, s, "--approve"}, "expected \"<interrupt>\""},
		{[]string{"inbox", "--kind", "later"}, "approval or hold"},
		{[]string{"actions", "list", "-o", "yaml"}, "--output"},
		{[]string{"events", "tail", "--limit", "-1"}, "--limit"},
		// HARD-PARTS 7: text that is not UTF-8 is refused, not changed.
		{[]string{"put", "entry", "k", "\"\xff\""}, "is not valid UTF-8 text"},
		{[]string{"put", "entry", "k\xfe", "1"}, "is not valid UTF-8 text"},
	} {
		res := r.fails(t, cli.ExitUsage, c.args, c.want)
		require.Empty(t, res.out, "%v", c.args)
	}
	res := r.run(t, "--help")
	require.Equal(t, cli.ExitOK, res.code)
	for _, cmd := range []string{"apply", "actions", "sessions", "inbox", "respond", "events", "put", "append", "tokens"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\s+`+cmd+`\b`), res.out)
	}
}

// actions get says why events were ignored (S4, S5): a trigger whose
// expression failed on an event, and an event that matched but reached no
// session (an intake record); an action with neither prints no such table.
func TestActionsGetShowsIgnoredEvents(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	r.ok(t, "apply", "-f", "testdata/monitor.json")
	require.NotContains(t, r.ok(t, "actions", "get", monitorID), "intake records")

	const probe = `{"id": "6e2a9f10-1b2c-4d3e-8f40-5a6b7c8d9e01", "name": "probe", "kind": "agent.echo",
	  "triggers": [{"name": "halves", "event": "event.type == \"probe.y\" && int(event.data.n) / 2 > 0"}]}`
	res := r.runIn(t, probe, "apply", "-f", "-")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	r.ok(t, "append", "probe.y", `{"n": "abc"}`)
	// The entry names an account with no session: an intake record.
	r.ok(t, "put", "entry", "e1", `{"account_id": "nobody", "amount": 1}`)
	r.step(t)

	out := r.ok(t, "actions", "get", "6e2a9f10-1b2c-4d3e-8f40-5a6b7c8d9e01")
	require.Contains(t, out, "predicate failures")
	require.Regexp(t, `(?m)^\s+halves\s+1\s+1\s+\S+\s+\d+\s+.*\S`, out)
	out = r.ok(t, "actions", "get", monitorID)
	require.Contains(t, out, "intake records")
	require.Regexp(t, `(?m)^\s+entry\s+1\s+\d+\s+nobody\s+session_not_found\s+\S`, out)
}

package cli_test

// Issue 12 CLI: answering a scripted agent's approval (P5) and held turn
// (H3) from the command line, the inbox, and following a session and the
// ledger live. The inbox and the subscriptions are built on branch
// h12-live; until the server has them, their parts skip on the server's
// NOT_IMPLEMENTED and turn on by themselves once it answers.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/turns"
)

const agentSession = "3f0c9f8e-account"

// agentSessionJSON is the part of `sessions get -o json` these tests read.
type agentSessionJSON struct {
	Status    string
	State     json.RawMessage
	Approvals []struct{ InterruptID, Tool string }
	Holds     []struct {
		InterruptID, Cause string
		Turn               json.Number
	}
	Turns struct {
		Nodes []struct {
			Number json.Number
			Status string
		}
	}
}

func (r *rig) agentSession(t *testing.T) agentSessionJSON {
	t.Helper()
	var s agentSessionJSON
	r.okJSON(t, &s, "sessions", "get", agentID, agentSession)
	return s
}

// setUpAgent stores the gated tool and the scripted agent with apply
// (YAML), then opens account 3f0c9f8e.
func setUpAgent(t *testing.T, r *rig) {
	t.Helper()
	require.Contains(t, r.ok(t, "apply", "-f", "testdata/freeze-tool.yaml"), "created: version 1")
	require.Contains(t, r.ok(t, "apply", "-f", "testdata/agent-monitor.yaml"), "created: version 1")
	r.ok(t, "put", "account", "3f0c9f8e", `{"account_id": "3f0c9f8e"}`)
}

// Issue 12 CLI, respond (P5, H3, H5) and inbox: the agent pauses before a
// gated call; sessions get shows what it waits on and how to answer;
// respond --approve runs it; a refused turn is held and respond --retry
// runs it again. Each interrupt is answered once (exit 2,
// ALREADY_ANSWERED).
func TestRespondApproveAndRetry(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	setUpAgent(t, r)
	r.ok(t, "put", "entry", "e1", `{"account_id": "3f0c9f8e", "amount": 12000}`)
	r.step(t)

	s := r.agentSession(t)
	require.Equal(t, "WAITING", s.Status)
	require.Len(t, s.Approvals, 1)
	ap := s.Approvals[0].InterruptID
	out := r.ok(t, "sessions", "get", agentID, agentSession)
	require.Contains(t, out, "waits on approval "+ap+": freeze_account v1 ")
	require.Contains(t, out, "answer: actionsledger respond "+agentID+" "+agentSession+" "+ap+" --approve|--deny")

	t.Run("inbox lists the approval", func(t *testing.T) {
		res := r.run(t, "inbox")
		skipUnlessImplemented(t, res, "inbox")
		require.Equal(t, cli.ExitOK, res.code, "%s", res)
		require.Regexp(t, `(?m)^INTERRUPT\s+KIND\s+ACTION\s+SESSION\s+RAISED\s+WHAT$`, res.out)
		require.Regexp(t, `(?m)^`+ap+`\s+APPROVAL\s+agent-monitor `+agentID+`\s+`+agentSession+`\s+\S+\s+freeze_account v1 `, res.out)
		require.Contains(t, res.errOut, "1 waiting")
		var items []struct {
			InterruptID, Kind, ActionName string
			Action                        struct{ ID string }
			Session                       struct{ ID string }
			Approval                      struct {
				Tool  string
				Input json.RawMessage
			}
		}
		r.okJSON(t, &items, "inbox", "--kind", "approval", "--action", agentID)
		require.Len(t, items, 1)
		require.Equal(t, ap, items[0].InterruptID)
		require.Equal(t, "APPROVAL", items[0].Kind)
		require.Equal(t, agentSession, items[0].Session.ID)
		require.JSONEq(t, `{"account_id":"3f0c9f8e","reason":"large entry","requested_by":"agent-monitor"}`, string(items[0].Approval.Input))
		r.okJSON(t, &items, "inbox", "--kind", "hold")
		require.Empty(t, items)
	})

	// P3: a suspicious entry while waiting stays pending.
	r.ok(t, "put", "entry", "e2", `{"account_id": "3f0c9f8e", "amount": 5, "note": "suspicious-transfer"}`)
	r.step(t)

	out = r.ok(t, "respond", agentID, agentSession, ap, "--approve", "--reason", "Confirmed with the customer.")
	require.Equal(t, "answered "+ap+": input command/"+ap+" (COMMAND, PENDING, sequence 3); a turn of its own takes it\n", out)
	r.fails(t, cli.ExitRefused, []string{"respond", agentID, agentSession, ap, "--deny"}, "ALREADY_ANSWERED", "interruptId")
	r.step(t)
	// The same answer again (a retry) returns the first answer's input,
	// now taken, and says that nothing new was sent.
	out = r.ok(t, "respond", agentID, agentSession, ap, "--approve", "--reason", "Confirmed with the customer.")
	require.Equal(t, ap+" was answered so already: input command/"+ap+" (COMMAND, CONSUMED, sequence 3); nothing new is sent\n", out)

	// The approved call ran (turn 2); the suspicious entry's turn 3 is held.
	s = r.agentSession(t)
	require.Equal(t, "WAITING", s.Status)
	require.Empty(t, s.Approvals)
	require.Len(t, s.Holds, 1)
	require.Equal(t, "REFUSED", s.Holds[0].Cause)
	require.Equal(t, "3", s.Holds[0].Turn.String())
	hold := s.Holds[0].InterruptID
	require.Contains(t, r.ok(t, "sessions", "get", agentID, agentSession),
		"waits on held turn 3, "+hold+": REFUSED (fraud): I cannot judge this transfer")
	r.fails(t, cli.ExitRefused, []string{"respond", agentID, agentSession, hold, "--approve"}, "BAD_USER_INPUT")

	var cmd struct{ Identity, Kind, Status string }
	r.okJSON(t, &cmd, "respond", agentID, agentSession, hold, "--retry", "--note", "The transfer was reviewed; continue monitoring.")
	require.Equal(t, struct{ Identity, Kind, Status string }{"command/" + hold, "COMMAND", "PENDING"}, cmd)
	r.step(t)
	s = r.agentSession(t)
	require.Equal(t, "OPEN", s.Status)
	require.JSONEq(t, `{"reviewed":true}`, string(s.State))
	r.fails(t, cli.ExitRefused, []string{"respond", agentID, agentSession, hold, "--skip"}, "ALREADY_ANSWERED")
	r.fails(t, cli.ExitNotFound, []string{"respond", agentID, "nobody-account", hold, "--skip"}, "NOT_FOUND")
}

// Issue 12 CLI, sessions watch: it prints the session, then each change,
// and stops by itself when the session waits on an approval (exit 0);
// with --until-final it follows through the answer until the session is
// closed.
// G8 CLI: sessions budget sets and removes an agent session's spend cap
// (the server prices the scripted provider's model), sessions get shows
// the spend, and a cap that is no number of dollars is refused before
// anything is sent.
func TestSessionsBudget(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, server.Config{Prices: turns.Prices{"scripted/*": {InputPerMTok: 1, OutputPerMTok: 2}}})
	setUpAgent(t, r)
	r.step(t)
	require.Equal(t, "session "+agentSession+": OPEN; spent $0.0000 (cap $2.50, $2.5000 left)\n",
		r.ok(t, "sessions", "budget", agentID, agentSession, "--max", "2.5"))
	require.Contains(t, r.ok(t, "sessions", "get", agentID, agentSession), "spend:    $0.0000 (cap $2.50); 0 model calls")
	require.Equal(t, "session "+agentSession+": OPEN; spent $0.0000 (no cap)\n", r.ok(t, "sessions", "budget", agentID, agentSession, "--no-cap"))
	r.fails(t, cli.ExitUsage, []string{"sessions", "budget", agentID, agentSession}, "--max")
	for _, bad := range []string{"NaN", "Inf", "0"} {
		r.fails(t, cli.ExitUsage, []string{"sessions", "budget", agentID, agentSession, "--max", bad}, "above 0")
	}
	r.fails(t, cli.ExitUsage, []string{"sessions", "budget", agentID, agentSession, "--max=-1"}, "above 0")
}

func TestSessionsWatch(t *testing.T) {
	t.Parallel()
	r := newLiveRig(t)
	setUpAgent(t, r)
	eventually(t, "the agent's session", func() bool {
		return r.run(t, "sessions", "get", agentID, agentSession).code == cli.ExitOK
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// JSON lines: one update per line, until the session waits.
	w := r.start(t, ctx, "sessions", "watch", agentID, agentSession, "-o", "json")
	first, ok := <-w.ch
	if !ok {
		res := w.wait(t)
		skipUnlessImplemented(t, res, "sessionUpdates")
		require.FailNow(t, "watch ended without output", "%s", res)
	}
	var u struct {
		Kind    string
		Session struct {
			ID, Status string
			Approvals  []struct{ InterruptID string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(first), &u), first)
	require.Equal(t, "SESSION", u.Kind)
	require.Equal(t, agentSession, u.Session.ID)
	require.Equal(t, "OPEN", u.Session.Status)

	r.ok(t, "put", "entry", "e1", `{"account_id": "3f0c9f8e", "amount": 12000}`)
	res := w.wait(t)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	all := strings.Split(strings.TrimSpace(res.out), "\n")
	require.NoError(t, json.Unmarshal([]byte(all[len(all)-1]), &u))
	require.Equal(t, "WAITING", u.Session.Status)
	require.Len(t, u.Session.Approvals, 1, "it stopped at the approval")
	ap := u.Session.Approvals[0].InterruptID

	// Human lines, through the answer, until the session is closed.
	w = r.start(t, ctx, "sessions", "watch", agentID, agentSession, "--until-final")
	require.Contains(t, w.next(t), "session "+agentSession+" WAITING")
	r.ok(t, "respond", agentID, agentSession, ap, "--approve")
	eventually(t, "the approved turn", func() bool { return r.agentSession(t).Status == "OPEN" })
	r.ok(t, "sessions", "close", agentID, agentSession, "--reason", "watched")
	res = w.wait(t)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, "waits on approval "+ap)
	require.Regexp(t, `(?m)session `+agentSession+` CANCELLED.*: watched$`, res.out)
}

// Issue 12 CLI, events tail: it replays the events after a position, in
// order, as JSON lines with numbers as written; then follows new ones.
func TestEventsTail(t *testing.T) {
	t.Parallel()
	r := newLiveRig(t)
	r.ok(t, "append", "tail.one", `{"n": 1}`)
	res := r.run(t, "events", "tail", "--after", "0", "--limit", "1")
	skipUnlessImplemented(t, res, "ledgerEvents")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, "tail.one")

	r.ok(t, "put", "tail", "k", `{"n": 12345678901234567890123}`)
	res = r.run(t, "events", "tail", "--after", "0", "--limit", "2", "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	evs := strings.Split(strings.TrimSpace(res.out), "\n")
	require.Len(t, evs, 2, "JSON lines")
	var e1, e2 struct {
		EventType, Position string
		Data                json.RawMessage
	}
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &e1))
	require.NoError(t, json.Unmarshal([]byte(evs[1]), &e2))
	require.Equal(t, "tail.one", e1.EventType)
	require.Equal(t, "tail.inserted", e2.EventType)
	require.Contains(t, string(e2.Data), "12345678901234567890123")

	out := r.ok(t, "events", "tail", "--after", "0", "--type", "tail.inserted", "--limit", "1")
	require.Regexp(t, `^`+e2.Position+`\s+\S+\s+tail\.inserted tail/k v1\s+\{"n":12345678901234567890123\}\n$`, out)

	// A --type no event can have is refused at once (it would wait for ever).
	r.fails(t, cli.ExitRefused, []string{"events", "tail", "--type", "!!bad", "--after", "0", "--limit", "1"}, "BAD_USER_INPUT", "type")

	// Live: whether the subscription is open before the append or not,
	// --after makes it see the event.
	w := r.start(t, t.Context(), "events", "tail", "--after", e2.Position, "--type", "tail.live", "--limit", "1")
	r.ok(t, "append", "tail.live", `{"n": 3}`)
	res = w.wait(t)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, "tail.live")
}

// Issue 12 follow-up item 2, sessions watch --wait: right after the put
// that starts a session the dispatcher may not have created it yet; watch
// says on standard error that it waits for it and follows it once it
// exists. The service is stepped: the session is created only when the
// test steps it, after watch has said it waits. Without --wait, after the
// wait, and for an action that does not exist (at once, whatever the
// wait), it exits 4.
func TestSessionsWatchWaitsForTheSession(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	r.ok(t, "apply", "-f", "testdata/monitor.json")
	acct := "0b6f2a4c-3d5e-4f60-8a7b-9c0d1e2f3a4b"
	r.ok(t, "put", "account", acct, `{"account_id": "`+acct+`"}`)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := r.start(t, ctx, "sessions", "watch", monitorID, acct, "--wait", "1m")
	require.Equal(t, "actionsledger: action "+monitorID+" has no session "+acct+" yet; waiting up to 1m0s for it (--wait)", w.nextErr(t))
	r.step(t) // the dispatcher creates the session
	require.Regexp(t, `session `+acct+` OPEN, 0 pending$`, w.next(t))
	cancel() // Ctrl-C
	res := w.wait(t)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)

	missing := "7e8f9a0b-1c2d-4e3f-8a4b-5c6d7e8f9a0b"
	res = r.fails(t, cli.ExitNotFound, []string{"sessions", "watch", monitorID, missing, "--wait", "0"}, "NOT_FOUND")
	require.NotContains(t, res.errOut, "waiting")
	res = r.fails(t, cli.ExitNotFound, []string{"sessions", "watch", monitorID, missing, "--wait", "300ms"},
		"waiting up to 300ms", "NOT_FOUND: no session "+missing+" of action "+monitorID+" after waiting 300ms")
	// An action that does not exist is not waited for.
	w = r.start(t, t.Context(), "sessions", "watch", missing, acct, "--wait", "1h")
	res = w.wait(t)
	require.Equal(t, cli.ExitNotFound, res.code, "%s", res)
	require.Contains(t, res.errOut, "NOT_FOUND: no action "+missing)
	require.NotContains(t, res.errOut, "waiting")
	r.fails(t, cli.ExitUsage, []string{"sessions", "watch", monitorID, acct, "--wait=-1s"}, "--wait must be 0 or more")
}

// Issue 12 follow-up item 5: events tail --after a position past the
// ledger's newest event says so on standard error (nothing to replay, and
// what it will show), rather than waiting silently; a position it has is
// replayed without a word.
func TestEventsTailAfterPastTheHead(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	r.ok(t, "append", "tail.one", `{"n": 1}`)
	r.ok(t, "append", "tail.two", `{"n": 2}`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := r.start(t, ctx, "events", "tail", "--after", "40")
	require.Equal(t, "actionsledger: --after 40 is past the newest event (position 2): nothing to replay, and events are shown from position 41 on; waiting", w.nextErr(t))
	cancel()
	res := w.wait(t)
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Empty(t, res.out)

	res = r.run(t, "events", "tail", "--after", "1", "--limit", "1")
	require.Equal(t, cli.ExitOK, res.code, "%s", res)
	require.Contains(t, res.out, "tail.two")
	require.Empty(t, res.errOut)
}

package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// pauser is a probe handler scripted per turn number; it records every
// request it was given.
type pauser struct {
	mu    sync.Mutex
	reqs  []turns.Request
	turns map[int]func(req *turns.Request) (*turns.Outcome, error)
}

func (p *pauser) run(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, *req)
	f := p.turns[req.Turn]
	p.mu.Unlock()
	if f == nil {
		return &turns.Outcome{Status: "OPEN", State: req.State}, nil
	}
	return f(req)
}

func (p *pauser) last() turns.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reqs[len(p.reqs)-1]
}

// gate builds an approval for call of the request's execution.
func gate(req *turns.Request, call string, tool uuid.UUID) turns.Approval {
	return turns.Approval{InterruptID: turns.InterruptIDFor(req.ExecutionID, call), ExecutionID: req.ExecutionID,
		ToolActionID: tool, ToolVersion: 1, ToolName: "notify", Input: jsonvalue.Value(`{"to":"` + call + `"}`), CallID: call}
}

type waitBundle struct {
	*bundle
	p   *pauser
	ex  *turns.Executor
	act uuid.UUID
}

func setupWaiting(t *testing.T, edit func(*action.Definition)) *waitBundle {
	p := &pauser{turns: map[int]func(*turns.Request) (*turns.Outcome, error){}}
	b := setup(t, p.run)
	wb := &waitBundle{bundle: b, p: p}
	wb.ex = b.executor("p", turns.Config{MaxAttempts: 2, Backoff: time.Millisecond})
	wb.ex.EnvFunc = b.app.Tools.Env
	turns.SetRetrySleep(wb.ex, func(ctx context.Context, _ time.Duration) error { return ctx.Err() })
	wb.act = b.probeMonitor(edit)
	return wb
}

func (b *waitBundle) respond(id, interrupt string, resp session.Response) (*session.Input, error) {
	return b.app.Sessions.Respond(b.ctx, b.act, id, interrupt, resp, "alice", nil)
}

func approve(reason string) session.Response {
	return session.Response{Approval: &session.ApprovalResponse{Decision: "APPROVE", Reason: reason}}
}

func codeOf(err error) string {
	if f := fault.As(err); f != nil {
		return f.Code
	}
	return ""
}

// P1, P3, P5: a turn that pauses before a gated call commits what it did
// with the session WAITING and the call listed; an input arriving meanwhile
// waits; the answer is a COMMAND input in a turn of its own, which resumes
// from the continuation; the waiting input follows in the next turn; a
// second answer is refused and changes nothing.
func TestP1P3P5ApprovalPausesAndResumes(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		_, err := req.Env.LedgerPut(context.Background(), "note", "before-pause", jsonvalue.Value(`{"done":true}`))
		require.NoError(t, err)
		return &turns.Outcome{Status: "WAITING", State: jsonvalue.Value(`{"step":1}`),
			Approvals: []turns.Approval{gate(req, "c1", tool)}, Resume: jsonvalue.Value(`{"at":"c1"}`)}, nil
	}
	acct := b.openAccount()
	e1 := b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))

	s := b.session(b.act, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.Equal(t, "waiting for approval of 1 tool call", *s.Reason)
	require.JSONEq(t, `{"step":1}`, string(s.State))
	kv, err := b.app.Ledger.Value(b.ctx, "note", "before-pause")
	require.NoError(t, err)
	require.NotNil(t, kv, "P1: what the turn did before the call commits")
	t1 := b.turn(s.SID, 1)
	require.EqualValues(t, "COMPLETED", t1.Status)
	x1 := b.execution(t1.ExecutionID)
	pending, err := b.app.Sessions.Interrupts(b.ctx, s.SID, session.InterruptApproval, ptr(session.InterruptPending))
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, []uuid.UUID{pending[0].ID}, x1.Approvals)
	require.Equal(t, t1.ExecutionID, pending[0].ExecutionID)
	require.Equal(t, tool, *pending[0].ToolActionID)
	require.JSONEq(t, `{"to":"c1"}`, string(pending[0].Input))

	// P3: an entry while waiting stays pending; nothing runs.
	e2 := b.entry(acct, 2)
	b.dispatch()
	require.False(t, b.runOnce(b.ex))

	// P5: the answer.
	cmd, err := b.respond(acct, pending[0].ID.String(), approve("ok by phone"))
	require.NoError(t, err)
	require.Equal(t, session.KindCommand, cmd.Kind)
	require.Equal(t, session.InputPending, cmd.Status)
	require.Equal(t, "command/"+pending[0].ID.String(), cmd.Identity)
	require.Equal(t, session.Open, b.session(b.act, acct).Status)

	_, err = b.respond(acct, pending[0].ID.String(), approve("again"))
	require.Equal(t, fault.AlreadyAnswered, codeOf(err), "each request is answered once")

	require.True(t, b.runOnce(b.ex))
	req2 := b.p.last()
	require.Equal(t, 2, req2.Turn)
	require.Equal(t, []string{cmd.Identity}, viewIdentities(req2.Inputs), "the answer runs in a turn of its own")
	require.JSONEq(t, `{"at":"c1"}`, string(req2.Resume))
	require.NotNil(t, req2.Inputs[0].Command)
	require.Equal(t, session.Approve, req2.Inputs[0].Command.Decision)
	require.Equal(t, "ok by phone", req2.Inputs[0].Command.Reason)
	require.Equal(t, "alice", req2.Inputs[0].Command.Responder)
	require.Equal(t, ledger.RespondedType, req2.Inputs[0].Event.Type)

	require.True(t, b.runOnce(b.ex))
	req3 := b.p.last()
	require.Equal(t, []string{e2}, viewIdentities(req3.Inputs), "P3: the waiting input comes after")
	require.Nil(t, req3.Resume)
	require.Equal(t, []string{e1}, b.turnInputs(s.SID, 1))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM events WHERE type = 'action_session.responded'
		AND data->>'responder' = 'alice' AND data->>'decision' = 'APPROVE' AND data->>'reason' = 'ok by phone'`))
}

// P2: two gated calls get distinct interrupts; answering one resumes, and
// the turn that waits again lists the other under the same interruptId and
// executionId. A request a later turn goes on without is stale.
func TestP2StillWaitingRequestsAreListedAgain(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	var first []turns.Approval
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		first = []turns.Approval{gate(req, "a", tool), gate(req, "b", tool)}
		return &turns.Outcome{Status: "WAITING", Approvals: first, Resume: jsonvalue.Value(`{}`)}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: first[1:], Resume: jsonvalue.Value(`{}`)}, nil
	}
	b.p.turns[3] = func(req *turns.Request) (*turns.Outcome, error) {
		c := gate(req, "c", tool)
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{c}, Resume: jsonvalue.Value(`{}`)}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.NotEqual(t, first[0].InterruptID, first[1].InterruptID)

	_, err := b.respond(acct, first[0].InterruptID.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	require.Equal(t, session.Waiting, s.Status)
	x2 := b.execution(b.turn(s.SID, 2).ExecutionID)
	require.Equal(t, []uuid.UUID{first[1].InterruptID}, x2.Approvals)
	listed, err := b.app.Sessions.InterruptsByID(b.ctx, x2.Approvals)
	require.NoError(t, err)
	require.Equal(t, b.turn(s.SID, 1).ExecutionID, listed[0].ExecutionID, "P2: same executionId as first listed")
	require.Equal(t, session.InterruptPending, listed[0].Status)

	// An entry while waiting does not join the answer's turn (P3).
	b.entry(acct, 2)
	b.dispatch()
	cmd, err := b.respond(acct, first[1].InterruptID.String(), session.Response{Approval: &session.ApprovalResponse{
		Decision: "APPROVE", Input: jsonvalue.Value(`{"to":"someone else"}`)}})
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	require.Equal(t, []string{cmd.Identity}, viewIdentities(b.p.last().Inputs))
	require.JSONEq(t, `{"to":"someone else"}`, string(b.p.last().Inputs[0].Command.Input))

	// Turn 3 waits on c only; a denial of b now would be too late.
	_, err = b.respond(acct, first[1].InterruptID.String(), approve(""))
	require.Equal(t, fault.AlreadyAnswered, codeOf(err))
	closed, err := b.app.Sessions.Interrupts(b.ctx, s.SID, session.InterruptApproval, ptr(session.InterruptPending))
	require.NoError(t, err)
	require.Len(t, closed, 1)
	require.Equal(t, "c", *closed[0].CallID)
}

// A turn that goes on without a request still waiting leaves it stale.
func TestApprovalNotListedAgainIsStale(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	var first []turns.Approval
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		first = []turns.Approval{gate(req, "a", tool), gate(req, "b", tool)}
		return &turns.Outcome{Status: "WAITING", Approvals: first}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	_, err := b.respond(acct, first[0].InterruptID.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex)) // turn 2 reports OPEN
	_, err = b.respond(acct, first[1].InterruptID.String(), approve(""))
	require.Equal(t, fault.InterruptStale, codeOf(err))
	_, err = b.respond(acct, uuid.NewString(), approve(""))
	require.Equal(t, fault.NotFound, codeOf(err))
	_, err = b.respond(acct, "not-a-uuid", approve(""))
	require.Equal(t, fault.NotFound, codeOf(err))
	_, err = b.respond("no-such-session", first[1].InterruptID.String(), approve(""))
	require.Equal(t, fault.NotFound, codeOf(err))
}

// H1, H2, H3: a refused turn commits nothing it did but keeps its
// transcript; it is HELD with its inputs RECEIVED and the session WAITING;
// RETRY runs its inputs again in a new turn whose own inputs are only the
// answer, with the note.
func TestH1H2H3RefusedTurnIsHeldAndRetried(t *testing.T) {
	t.Parallel()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "OPEN", State: jsonvalue.Value(`{"seen":1}`)}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		req.Transcript.Add("model_message", map[string]string{"text": "I will not"})
		_, err := req.Env.LedgerPut(context.Background(), "note", "refused", jsonvalue.Value(`1`))
		require.NoError(t, err)
		return nil, turns.Refused("cyber", "looks like an attack", "declined")
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	e2 := b.entry(acct, 2)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.Len(t, b.p.reqs, 2, "H1: a refusal is not retried")

	s := b.session(b.act, acct)
	require.Equal(t, session.Waiting, s.Status, "%v", *s.Reason)
	require.Contains(t, *s.Reason, "turn 2 is held")
	require.JSONEq(t, `{"seen":1}`, string(s.State), "H2: the state stays as the turn before left it")
	kv, err := b.app.Ledger.Value(b.ctx, "note", "refused")
	require.NoError(t, err)
	require.Nil(t, kv, "H1: nothing the turn did commits")
	t2 := b.turn(s.SID, 2)
	require.EqualValues(t, "HELD", t2.Status)
	x2 := b.execution(t2.ExecutionID)
	require.EqualValues(t, "HELD", x2.Status)
	require.NotNil(t, x2.HoldID)
	require.Len(t, b.transcript(t2.ExecutionID), 1, "H1: the execution keeps its transcript")
	holds, err := b.app.Sessions.InterruptsByID(b.ctx, []uuid.UUID{*x2.HoldID})
	require.NoError(t, err)
	require.Equal(t, turns.CauseRefused, *holds[0].Cause)
	require.Equal(t, "cyber", *holds[0].Category)
	require.Equal(t, "looks like an attack", *holds[0].Explanation)
	for _, in := range b.inputs(s.SID) {
		if in.Identity == e2 {
			require.Equal(t, session.InputReceived, in.Status)
		}
	}

	// An approval-shaped answer to a hold is refused.
	_, err = b.respond(acct, holds[0].ID.String(), approve(""))
	require.Equal(t, fault.BadInput, codeOf(err))
	long := make([]byte, session.MaxNoteLen+1)
	for i := range long {
		long[i] = 'x'
	}
	_, err = b.respond(acct, holds[0].ID.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY", Note: string(long)}})
	require.Equal(t, fault.BadInput, codeOf(err), "H3: the note is at most 1 KiB")

	cmd, err := b.respond(acct, holds[0].ID.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY", Note: "reviewed"}})
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.Equal(t, 3, r.Turn)
	require.Equal(t, []string{cmd.Identity}, viewIdentities(r.Inputs), "H3: the retry turn lists only the answer")
	require.Equal(t, []string{e2}, viewIdentities(r.Replayed), "H3: the held inputs run again")
	require.Equal(t, "reviewed", r.Inputs[0].Command.Note)
	require.Equal(t, []string{cmd.Identity}, b.turnInputs(s.SID, 3))
	require.Equal(t, []string{e2}, b.turnInputs(s.SID, 2), "the inputs it runs again stay with the held turn")
	require.Equal(t, session.Open, b.session(b.act, acct).Status)
}

// H1, H5: a turn with no outcome is retried, then held as UNFINISHED; a
// retry that is held again is answered the same way and runs the inputs of
// the turn it retried too.
func TestH1UnfinishedIsHeldAfterRetriesAndRetryChains(t *testing.T) {
	t.Parallel()
	b := setupWaiting(t, nil)
	unfinished := func(req *turns.Request) (*turns.Outcome, error) { return nil, turns.Unfinished("no outcome") }
	b.p.turns[1] = unfinished
	b.p.turns[2] = unfinished
	acct := b.openAccount()
	e1 := b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.Len(t, b.p.reqs, 2, "retried per policy (MaxAttempts 2)")
	s := b.session(b.act, acct)
	hold := b.execution(b.turn(s.SID, 1).ExecutionID).HoldID
	require.NotNil(t, hold)
	c1, err := b.respond(acct, hold.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY", Note: "one"}})
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex)) // turn 2 is held again
	hold2 := b.execution(b.turn(s.SID, 2).ExecutionID).HoldID
	require.NotNil(t, hold2)
	ins, err := b.app.Sessions.InterruptsByID(b.ctx, []uuid.UUID{*hold2})
	require.NoError(t, err)
	require.Equal(t, turns.CauseUnfinished, *ins[0].Cause)
	c2, err := b.respond(acct, hold2.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY", Note: "two"}})
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.Equal(t, 3, r.Turn)
	require.Equal(t, []string{e1, c1.Identity}, viewIdentities(r.Replayed))
	require.Equal(t, []string{c2.Identity}, viewIdentities(r.Inputs))
}

// H4: SKIP goes on without the held inputs, with no turn, and the session
// is OPEN; a held turn that resumed from approval responses cannot be
// skipped.
func TestH4Skip(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	refuse := func(req *turns.Request) (*turns.Outcome, error) { return nil, turns.Refused("", "", "no") }
	b.p.turns[1] = refuse
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	hold := b.execution(b.turn(s.SID, 1).ExecutionID).HoldID
	cmd, err := b.respond(acct, hold.String(), session.Response{Hold: &session.HoldResponse{Decision: "SKIP"}})
	require.NoError(t, err)
	require.Equal(t, session.InputConsumed, cmd.Status)
	require.Equal(t, session.Open, b.session(b.act, acct).Status)
	require.False(t, b.runOnce(b.ex), "H4: no model call")
	require.Len(t, b.p.reqs, 1)

	// An approval-resumed turn that is held cannot be skipped.
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{gate(req, "x", tool)}, Resume: jsonvalue.Value(`{"p":1}`)}, nil
	}
	b.p.turns[3] = refuse
	b.entry(acct, 2)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	x2 := b.execution(b.turn(s.SID, 2).ExecutionID)
	_, err = b.respond(acct, x2.Approvals[0].String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex)) // turn 3 resumed and is held
	hold3 := b.execution(b.turn(s.SID, 3).ExecutionID).HoldID
	_, err = b.respond(acct, hold3.String(), session.Response{Hold: &session.HoldResponse{Decision: "SKIP"}})
	require.Equal(t, fault.SkipNotAllowed, codeOf(err))

	// H3: its retry starts from the same continuation and runs the
	// approval answer again.
	b.p.turns[4] = nil
	_, err = b.respond(acct, hold3.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY"}})
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.JSONEq(t, `{"p":1}`, string(r.Resume))
	require.Len(t, r.Replayed, 1)
	require.Equal(t, session.Approve, r.Replayed[0].Command.Decision)
}

// H5: closing a session ends its hold instead of an answer; an answer
// after the close is refused.
func TestH5CloseEndsTheHold(t *testing.T) {
	t.Parallel()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) { return nil, turns.Refused("", "", "no") }
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	hold := b.execution(b.turn(s.SID, 1).ExecutionID).HoldID
	_, err := b.app.Sessions.Close(b.ctx, b.act, acct, "done with it")
	require.NoError(t, err)
	_, err = b.respond(acct, hold.String(), session.Response{Hold: &session.HoldResponse{Decision: "RETRY"}})
	require.Equal(t, fault.SessionClosed, codeOf(err))
	ins, err := b.app.Sessions.InterruptsByID(b.ctx, []uuid.UUID{*hold})
	require.NoError(t, err)
	require.Equal(t, session.InterruptClosed, ins[0].Status)
}

// P5, H5 races: two answers at once: exactly one wins; the same answer
// again by the same responder gets the winner's input (G1), another fails.
func TestTwoAnswersAtOnce(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{gate(req, "a", tool)}}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	id := b.execution(b.turn(s.SID, 1).ExecutionID).Approvals[0].String()
	const n = 6
	type result struct {
		seq int64
		err error
	}
	res := make(chan result, n)
	for i := range n {
		go func() {
			d := "APPROVE"
			if i%2 == 1 {
				d = "DENY"
			}
			in, err := b.respond(acct, id, session.Response{Approval: &session.ApprovalResponse{Decision: d}})
			r := result{err: err}
			if in != nil {
				r.seq = in.Seq
			}
			res <- r
		}()
	}
	ok, seqs := 0, map[int64]bool{}
	for range n {
		r := <-res
		if r.err == nil {
			ok++
			seqs[r.seq] = true
		} else {
			require.Equal(t, fault.AlreadyAnswered, codeOf(r.err))
		}
	}
	require.Equal(t, n/2, ok, "the winning decision, and the same again")
	require.Len(t, seqs, 1, "one input for them all")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND kind = 'COMMAND'`, s.SID))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM events WHERE type = 'action_session.responded'`))
}

// A crash between the pause and the answer loses nothing: another process
// runs the answer's turn from the committed continuation. An answer racing
// a running turn (the session is not waiting yet) finds no interrupt.
func TestCrashBetweenPauseAndAnswer(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		a := gate(req, "a", tool)
		// Racing the worker: the request is not committed while the turn runs.
		_, err := b.respond("x", a.InterruptID.String(), approve(""))
		require.Equal(t, fault.NotFound, codeOf(err))
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{a}, Resume: jsonvalue.Value(`{"k":"v"}`)}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	id := b.execution(b.turn(s.SID, 1).ExecutionID).Approvals[0]
	_, err := b.respond(acct, id.String(), approve(""))
	require.NoError(t, err)
	other := b.executor("q", turns.Config{})
	require.True(t, b.runOnce(other))
	require.JSONEq(t, `{"k":"v"}`, string(b.p.last().Resume))
}

// E6: a session WAITING for an approval at its end stays WAITING; the turn
// that takes the response, with everything pending, is final.
func TestE6WaitingAtTheEnd(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, func(d *action.Definition) { d.Session.Ends = ptr("session.started_at + duration('1h')") })
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{gate(req, "a", tool)}}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "COMPLETED", Reason: "done"}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	e2 := b.entry(acct, 2)
	b.dispatch()
	b.clock.Set(s.EndsAt.Add(time.Minute))
	_, err := b.app.Timers.FireOnce(b.ctx)
	require.NoError(t, err)
	require.False(t, b.runOnce(b.ex))
	require.Equal(t, session.Waiting, b.session(b.act, acct).Status, "E6: stays WAITING at the end")

	id := b.execution(b.turn(s.SID, 1).ExecutionID).Approvals[0]
	cmd, err := b.respond(acct, id.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.True(t, r.Final, "E6: the turn taking the response is final")
	require.Equal(t, []string{e2, cmd.Identity}, viewIdentities(r.Inputs))
	require.Equal(t, session.Completed, b.session(b.act, acct).Status)
}

var _ = json.Marshal

// P2, P5 race: an answer to a request still waiting arrives while the
// turn that lists it again runs; the turn commits, the answer stands, and
// the next turn takes it.
func TestAnswerArrivingWhileTheTurnRuns(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	var first []turns.Approval
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		first = []turns.Approval{gate(req, "a", tool), gate(req, "b", tool)}
		return &turns.Outcome{Status: "WAITING", Approvals: first}, nil
	}
	var acct string
	var racing *session.Input
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		var err error
		racing, err = b.respond(acct, first[1].InterruptID.String(), approve("while it ran"))
		require.NoError(t, err)
		return &turns.Outcome{Status: "WAITING", Approvals: first[1:]}, nil
	}
	acct = b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	_, err := b.respond(acct, first[0].InterruptID.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	require.Equal(t, session.Open, s.Status, "the answer is already there")
	require.EqualValues(t, "COMPLETED", b.turn(s.SID, 2).Status)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.Equal(t, 3, r.Turn)
	require.Equal(t, []string{racing.Identity}, viewIdentities(r.Inputs))
}

// T7: an outcome that cannot commit (here an approval naming an execution
// that does not exist) is run again at once, and when every attempt fails
// the same way the session fails with the reason, not with "the workers
// stopped".
func TestUncommittableOutcomeFailsWithItsReason(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		a := gate(req, "a", tool)
		a.ExecutionID = uuid.New() // no such execution
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{a}}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	for range 2 { // MaxAttempts 2: each run fails to commit and gives the lease up
		_, err := b.ex.RunOnce(b.ctx)
		require.Error(t, err)
	}
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	require.Equal(t, session.Failed, s.Status)
	require.Contains(t, *s.Reason, "could not commit its outcome")
	require.Contains(t, *s.Reason, "session_interrupts")
}

// E6, P5: after the end, the turn that takes an answer takes it whatever
// maxInputs says, with the inputs before it, and resumes from the pause.
func TestE6AnswerIsNeverCutOffAfterTheEnd(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, func(d *action.Definition) {
		d.Session.Ends = ptr("session.started_at + duration('1h')")
		d.Session.Turns.MaxInputs = ptr(1)
	})
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{gate(req, "a", tool)}, Resume: jsonvalue.Value(`{"r":1}`)}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "COMPLETED", Reason: "done"}, nil
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	e2 := b.entry(acct, 2)
	e3 := b.entry(acct, 3)
	b.dispatch()
	require.Nil(t, b.session(b.act, acct).LeaseExpires)
	require.Equal(t, 0, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND next_turn_at IS NOT NULL`, s.SID),
		"a WAITING session is not runnable")
	b.clock.Set(s.EndsAt.Add(time.Minute))
	_, err := b.app.Timers.FireOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 0, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND next_turn_at IS NOT NULL`, s.SID))
	cmd, err := b.respond(acct, b.execution(b.turn(s.SID, 1).ExecutionID).Approvals[0].String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	r := b.p.last()
	require.Equal(t, 2, r.Turn)
	require.Equal(t, []string{e2, e3, cmd.Identity}, viewIdentities(r.Inputs))
	require.True(t, r.Final)
	require.JSONEq(t, `{"r":1}`, string(r.Resume))
	require.Equal(t, session.Completed, b.session(b.act, acct).Status)
}

// P2, T5: a turn that reports WAITING must wait on something still
// waiting; otherwise the session would wait for good. Such an outcome is
// invalid like any other that breaks the contract: nothing of it commits,
// and the turn and the session fail at once with the reason (running the
// handler again could not make a request wait again).
func TestWaitingOnNothingFails(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	var first turns.Approval
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		first = gate(req, "a", tool)
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{first}}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Status: "WAITING", Approvals: []turns.Approval{first}}, nil // already answered
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	_, err := b.respond(acct, first.InterruptID.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	s := b.session(b.act, acct)
	require.Equal(t, session.Failed, s.Status)
	require.Contains(t, *s.Reason, "no request it lists is still waiting")
	tu := b.turn(s.SID, 2)
	require.Equal(t, turns.TurnFailed, tu.Status)
	require.Equal(t, 1, b.execution(tu.ExecutionID).Attempts)
	ins, err := b.app.Sessions.InterruptsByID(b.ctx, []uuid.UUID{first.InterruptID})
	require.NoError(t, err)
	require.Equal(t, session.InterruptAnswered, ins[0].Status, "the answer stands")
}

// A failed session waits on nothing: its pending requests are closed.
func TestFailedSessionClosesItsRequests(t *testing.T) {
	t.Parallel()
	tool := uuid.New()
	b := setupWaiting(t, nil)
	var first []turns.Approval
	b.p.turns[1] = func(req *turns.Request) (*turns.Outcome, error) {
		first = []turns.Approval{gate(req, "a", tool), gate(req, "b", tool)}
		return &turns.Outcome{Status: "WAITING", Approvals: first}, nil
	}
	b.p.turns[2] = func(req *turns.Request) (*turns.Outcome, error) {
		return nil, turns.Permanent(errors.New("broken"))
	}
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	_, err := b.respond(acct, first[0].InterruptID.String(), approve(""))
	require.NoError(t, err)
	require.True(t, b.runOnce(b.ex))
	require.Equal(t, session.Failed, b.session(b.act, acct).Status)
	_, err = b.respond(acct, first[1].InterruptID.String(), approve(""))
	require.Equal(t, fault.SessionClosed, codeOf(err))
	ins, err := b.app.Sessions.InterruptsByID(b.ctx, []uuid.UUID{first[1].InterruptID})
	require.NoError(t, err)
	require.Equal(t, session.InterruptClosed, ins[0].Status)
}

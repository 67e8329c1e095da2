package turns_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Tests of commands, inbox edits, successors and retries (G1, G2, G3, G5).

var ops = session.Sender{Kind: session.SenderOperator, ID: "ops"}

// send sends acct's session a message with idempotency key key.
func (b *bundle) send(actionID uuid.UUID, acct, key, text string) (*session.Input, error) {
	return b.app.Sessions.Send(b.ctx, actionID, acct, session.SendRequest{Message: &text, IdempotencyKey: key}, ops)
}

// messages lists the texts of the messages a request's inputs carry.
func messages(req *turns.Request) []string {
	var out []string
	for _, in := range req.Inputs {
		if in.Message != nil {
			out = append(out, in.Message.Message)
		}
	}
	return out
}

// G1: a message is a COMMAND input recorded by an action_session.commanded
// event, sent by the server-stamped sender; the same request again returns
// the first input, another one under the same key is refused; the next
// turn's handler reads the text and the sender.
func TestG1MessagesAreIdempotentCommandInputs(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()

	in, err := b.send(actionID, acct, "m1", "please look again")
	require.NoError(t, err)
	require.Equal(t, session.KindCommand, in.Kind)
	require.Equal(t, session.CommandMessage, *in.Command)
	require.Equal(t, "sent/m1", in.Identity)
	require.Equal(t, session.SenderOperator, *in.SenderKind)
	require.Equal(t, "ops", *in.SenderID)
	again, err := b.send(actionID, acct, "m1", "please look again")
	require.NoError(t, err)
	require.Equal(t, in.Seq, again.Seq, "the same request returns the first input")
	_, err = b.send(actionID, acct, "m1", "something else")
	require.Equal(t, fault.IdempotencyConflict, fault.CodeOf(err))
	_, err = b.send(actionID, acct, "", "no key")
	require.Equal(t, fault.BadInput, fault.CodeOf(err))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM events WHERE type = 'action_session.commanded'`))
	st, err := b.app.Sessions.CommandStatusOf(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, session.CommandPending, st)

	require.True(t, b.runOnce(ex), "a message starts a turn")
	req := seen.all()[0]
	require.Len(t, req.Inputs, 1)
	m := req.Inputs[0].Message
	require.NotNil(t, m)
	require.Equal(t, "please look again", m.Message)
	require.Equal(t, session.Sender{Kind: session.SenderOperator, ID: "ops"}, m.Sender)
	got, err := b.app.Sessions.InputBySeq(b.ctx, in.SID, in.Seq)
	require.NoError(t, err)
	st, err = b.app.Sessions.CommandStatusOf(b.ctx, got)
	require.NoError(t, err)
	require.Equal(t, session.CommandAccepted, st)

	_, err = b.app.Sessions.Close(b.ctx, actionID, acct, "done")
	require.NoError(t, err)
	_, err = b.send(actionID, acct, "m2", "too late")
	require.Equal(t, fault.SessionClosed, fault.CodeOf(err))
	again, err = b.send(actionID, acct, "m1", "please look again")
	require.NoError(t, err, "a retry of a request that was made still answers")
	require.Equal(t, in.Seq, again.Seq)
}

// G3: pending messages run in a turn of their own, at most 32 a turn,
// before trigger deliveries, which wait for the turn after.
func TestG3MessagesBatchBeforeDeliveries(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	entry := b.entry(acct, 1)
	b.dispatch()
	for i := range 35 {
		_, err := b.send(actionID, acct, fmt.Sprint("k", i), fmt.Sprint("message ", i))
		require.NoError(t, err)
	}
	for b.runOnce(ex) {
	}
	reqs := seen.all()
	require.Len(t, reqs, 3)
	require.Len(t, messages(&reqs[0]), session.MaxMessagesPerTurn)
	require.Equal(t, "message 0", messages(&reqs[0])[0])
	require.Len(t, reqs[0].Inputs, session.MaxMessagesPerTurn, "no delivery rides with messages")
	require.Len(t, messages(&reqs[1]), 3)
	require.Equal(t, []string{entry}, viewIdentities(reqs[2].Inputs))
}

// G2: a pending message can be edited, deleted or promoted until a turn
// takes it; each change is recorded; the turn reads the edited text; a
// message a turn took, or an input that is no message, cannot be changed.
func TestG2EditDeletePromotePendingMessages(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	entry := b.entry(acct, 1)
	b.dispatch()
	m1, err := b.send(actionID, acct, "k1", "first")
	require.NoError(t, err)
	m2, err := b.send(actionID, acct, "k2", "second")
	require.NoError(t, err)
	m3, err := b.send(actionID, acct, "k3", "third")
	require.NoError(t, err)

	_, err = b.app.Sessions.EditInput(b.ctx, actionID, acct, m1.Seq, "first, edited", ops)
	require.NoError(t, err)
	del, err := b.app.Sessions.DeleteInput(b.ctx, actionID, acct, m2.Seq, ops)
	require.NoError(t, err)
	require.Equal(t, session.InputCancelled, del.Status)
	_, err = b.app.Sessions.PromoteInput(b.ctx, actionID, acct, m3.Seq, ops)
	require.NoError(t, err)
	// The same edit or promotion again (a retry after a lost answer) is
	// applied once: it changes nothing and records nothing.
	again, err := b.app.Sessions.EditInput(b.ctx, actionID, acct, m1.Seq, "first, edited", ops)
	require.NoError(t, err)
	require.Equal(t, "first, edited", *again.Message)
	_, err = b.app.Sessions.PromoteInput(b.ctx, actionID, acct, m3.Seq, ops)
	require.NoError(t, err)
	for _, seq := range []int64{m1.Seq, m3.Seq} {
		ch, err := b.app.Sessions.InputChanges(b.ctx, b.session(actionID, acct).SID, seq)
		require.NoError(t, err)
		require.Len(t, ch, 1, "input %d: one change recorded", seq)
	}
	_, err = b.app.Sessions.EditInput(b.ctx, actionID, acct, m2.Seq, "revived?", ops)
	require.Equal(t, fault.InputNotPending, fault.CodeOf(err), "a deleted message stays deleted")
	s := b.session(actionID, acct)
	var entrySeq int64
	for _, in := range b.inputs(s.SID) {
		if in.Identity == entry {
			entrySeq = in.Seq
		}
	}
	_, err = b.app.Sessions.EditInput(b.ctx, actionID, acct, entrySeq, "no", ops)
	require.Equal(t, fault.BadInput, fault.CodeOf(err), "only messages change")

	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{"third", "first, edited"}, messages(&seen.all()[0]), "promoted first; the edit is what the turn reads")
	_, err = b.app.Sessions.EditInput(b.ctx, actionID, acct, m1.Seq, "too late", ops)
	require.Equal(t, fault.InputNotPending, fault.CodeOf(err))

	changes, err := b.app.Sessions.InputChanges(b.ctx, s.SID, m1.Seq)
	require.NoError(t, err)
	require.Len(t, changes, 1)
	require.Equal(t, session.ChangeEdit, changes[0].Change)
	require.Equal(t, "first", *changes[0].Before)
	require.Equal(t, "first, edited", *changes[0].After)
	require.Equal(t, ops, changes[0].By)
	changes, err = b.app.Sessions.InputChanges(b.ctx, s.SID, m2.Seq)
	require.NoError(t, err)
	require.Equal(t, session.ChangeDelete, changes[0].Change)
	st, err := b.app.Sessions.CommandStatusOf(b.ctx, del)
	require.NoError(t, err)
	require.Equal(t, session.CommandCancelled, st)
}

// G2: an edit racing the claim that takes the message: exactly one wins.
// Either the edit is refused (INPUT_NOT_PENDING) and the turn read the
// first text, or it succeeded and the turn read the edited one.
func TestG2EditRacesTheClaim(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()
	for i := range 10 {
		m, err := b.send(actionID, acct, fmt.Sprint("r", i), "original")
		require.NoError(t, err)
		var wg sync.WaitGroup
		var editErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, editErr = b.app.Sessions.EditInput(b.ctx, actionID, acct, m.Seq, "edited", ops)
		}()
		// A claim skips a session whose row the edit holds: it claims again.
		for ran := 0; ran == 0; {
			if b.runOnce(ex) {
				ran++
			}
		}
		wg.Wait()
		got := messages(&seen.all()[i])
		if editErr == nil {
			require.Equal(t, []string{"edited"}, got, "round %d", i)
		} else {
			require.Equal(t, fault.InputNotPending, fault.CodeOf(editErr), "round %d", i)
			require.Equal(t, []string{"original"}, got, "round %d", i)
		}
	}
}

// G9: INTERRUPT through Send is a COMMAND input delivered consumed, and
// needs a running turn.
func TestG9InterruptCommand(t *testing.T) {
	t.Parallel()
	h := newBlocking(true)
	b := setup(t, h.run)
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()
	interrupt := session.CommandInterrupt
	_, err := b.app.Sessions.Send(b.ctx, actionID, acct, session.SendRequest{Command: &interrupt, IdempotencyKey: "i0"}, ops)
	require.Equal(t, fault.TurnNotRunning, fault.CodeOf(err))
	b.entry(acct, 1)
	b.dispatch()
	done := make(chan bool)
	go func() { ran, _ := ex.RunOnce(b.ctx); done <- ran }()
	within(t, h.started, "the turn to start")
	in, err := b.app.Sessions.Send(b.ctx, actionID, acct, session.SendRequest{Command: &interrupt, IdempotencyKey: "i1"}, ops)
	require.NoError(t, err)
	require.Equal(t, session.InputConsumed, in.Status)
	require.Equal(t, session.CommandInterrupt, *in.Command)
	ex.Interrupt(in.SID)
	within(t, done, "the turn to settle")
	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.EqualValues(t, "CANCELLED", b.turn(s.SID, 1).Status)
}

// G5: closing with a handoff note and a successor: the note stays on the
// closed session, the successor (id <id>~2) starts with the same input and
// the note as its first input, and the key routes to the newest successor,
// for resume and start triggers alike.
func TestG5CloseWithHandoffStartsASuccessor(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()
	note := "Checked entries up to 41; entry 42 looked odd."
	closed, err := b.app.Sessions.CloseWith(b.ctx, actionID, acct, session.CloseRequest{Reason: "rotating", Handoff: &note, Successor: true})
	require.NoError(t, err)
	require.Equal(t, session.Cancelled, closed.Status)
	require.Equal(t, note, *closed.Handoff)
	require.NotNil(t, closed.SuccessorSID)

	succ := b.session(actionID, acct+"~2")
	require.Equal(t, session.Open, succ.Status)
	require.Equal(t, closed.Input, succ.Input)
	require.Equal(t, closed.SID, *succ.PredecessorSID)
	ins := b.inputs(succ.SID)
	require.Len(t, ins, 1)
	require.Equal(t, session.CommandHandoff, *ins[0].Command)
	require.Equal(t, session.SenderSystem, *ins[0].SenderKind)
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{note}, messages(&seen.all()[0]), "the successor's first turn reads the note")

	entry := b.entry(acct, 1)
	b.dispatch()
	require.Contains(t, identities(b.inputs(succ.SID)), entry, "an entry for the key reaches the successor")

	_, err = b.app.Sessions.CloseWith(b.ctx, actionID, acct+"~2", session.CloseRequest{Reason: "again", Successor: true})
	require.NoError(t, err)
	third := b.session(actionID, acct+"~3")
	again := b.startAgain(acct)
	b.dispatch()
	require.Contains(t, identities(b.inputs(third.SID)), again, "a start for the key reaches the newest successor")
	entry2 := b.entry(acct, 2)
	b.dispatch()
	require.Contains(t, identities(b.inputs(third.SID)), entry2)
	require.Zero(t, b.count(`SELECT count(*) FROM intake_records WHERE session_id = $1`, acct), "no intake record: the key routes")
}

// G5: a FAILED session is retried as a new one, once: its successor gets
// the same input and the failed session's pending inputs, in order.
func TestG5RetryAFailedSession(t *testing.T) {
	t.Parallel()
	failing := true
	seen := &calls{}
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if failing {
			return nil, turns.Permanent(fmt.Errorf("cannot handle this yet"))
		}
		seen.add(req)
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	first, second := b.entry(acct, 1), b.entry(acct, 2)
	b.dispatch()
	_, err := b.app.Sessions.Retry(b.ctx, actionID, acct)
	require.Equal(t, fault.SessionNotRetryable, fault.CodeOf(err), "an open session is not retried")
	require.True(t, b.runOnce(b.ex))
	require.Equal(t, session.Failed, b.session(actionID, acct).Status)

	failing = false
	succ, err := b.app.Sessions.Retry(b.ctx, actionID, acct)
	require.NoError(t, err)
	require.Equal(t, acct+"~2", succ.ID)
	again, err := b.app.Sessions.Retry(b.ctx, actionID, acct)
	require.NoError(t, err)
	require.Equal(t, succ.SID, again.SID, "retried once")
	require.True(t, b.runOnce(b.ex))
	require.Equal(t, []string{first, second}, viewIdentities(seen.all()[0].Inputs))
	require.Equal(t, session.Open, b.session(actionID, acct+"~2").Status)
}

// G3: with turns.debounce, trigger deliveries wait until quiet has passed
// since the newest or max since the oldest; a message does not wait and
// runs alone, leaving the held deliveries for the turn after it.
func TestG3DebounceHoldsDeliveries(t *testing.T) {
	t.Parallel()
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(func(d *action.Definition) {
		d.Session.Turns.Debounce = &action.Debounce{Quiet: "2500ms", Max: "5s"}
	})
	acct := b.openAccount()
	b.dispatch()
	e1 := b.entry(acct, 1)
	b.dispatch()
	require.False(t, b.runOnce(ex), "held")
	b.clock.Advance(2 * time.Second)
	e2 := b.entry(acct, 2)
	b.dispatch()
	b.clock.Advance(2 * time.Second) // 4s after the first, 2s after the newest
	require.False(t, b.runOnce(ex), "still held: quiet not over, max not reached")
	_, err := b.send(actionID, acct, "now", "look now")
	require.NoError(t, err)
	require.True(t, b.runOnce(ex), "a message does not wait")
	require.Equal(t, []string{"look now"}, messages(&seen.all()[0]))
	require.Len(t, seen.all()[0].Inputs, 1, "held deliveries do not ride with it")
	require.False(t, b.runOnce(ex), "the deliveries are still held")
	b.clock.Advance(500 * time.Millisecond) // quiet over since the newest
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{e1, e2}, viewIdentities(seen.all()[1].Inputs))

	// max: deliveries every 2s never leave a quiet 2.5s; 5s after the oldest they run.
	e3 := b.entry(acct, 3)
	b.dispatch()
	b.clock.Advance(2 * time.Second)
	e4 := b.entry(acct, 4)
	b.dispatch()
	b.clock.Advance(2 * time.Second)
	e5 := b.entry(acct, 5)
	b.dispatch()
	require.False(t, b.runOnce(ex))
	b.clock.Advance(time.Second) // 5s after e3
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{e3, e4, e5}, viewIdentities(seen.all()[2].Inputs))
}

// G3: the debounce block is checked when the action is stored.
func TestG3DebounceDefinitionIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, c := range []struct {
		d     action.Debounce
		field string
	}{
		{action.Debounce{Quiet: "soon", Max: "5s"}, "session.turns.debounce.quiet"},
		{action.Debounce{Quiet: "6s", Max: "5s"}, "session.turns.debounce.max"},
		{action.Debounce{Quiet: "1s", Max: "48h"}, "session.turns.debounce.max"},
	} {
		def := monitor(t)
		def.Kind = probeKind
		d := c.d
		def.Session.Turns.Debounce = &d
		_, err := b.actions.Create(b.ctx, uuid.New(), def)
		require.Equal(t, fault.InvalidAction, fault.CodeOf(err), "%+v: %v", c.d, err)
		require.Equal(t, c.field, fault.As(err).Field, "%+v", c.d)
	}
}

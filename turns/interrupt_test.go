package turns_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Tests of the interrupt of a running turn (G9).

// blocking is a handler whose first turn signals started and then waits
// for release or its context: with honour, it returns the context's error
// when cancelled; without, it ignores the cancellation, writes a record and
// succeeds once released. Later turns count.
type blocking struct {
	started, release chan struct{}
	honour           bool
	n                int
}

func newBlocking(honour bool) *blocking {
	return &blocking{started: make(chan struct{}), release: make(chan struct{}), honour: honour}
}

func (h *blocking) run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	h.n++
	if h.n > 1 {
		return countOutcome(req, "")
	}
	close(h.started)
	if h.honour {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-h.release:
		}
	} else {
		<-h.release
		if _, err := req.Env.LedgerPut(context.WithoutCancel(ctx), "note", "interrupted-turn", jsonvalue.Value(`{"wrote":true}`)); err != nil {
			return nil, err
		}
	}
	return countOutcome(req, "")
}

// G9: an interrupt ends a running turn early: the handler's context is
// cancelled, the turn is CANCELLED, its inputs are pending again in their
// order, and the session waits for its next input, which wakes it; the next
// turn takes the interrupted turn's inputs first.
func TestG9InterruptEndsTheRunningTurn(t *testing.T) {
	t.Parallel()
	h := newBlocking(true)
	b := setup(t, h.run)
	ex := b.executor("p", turns.Config{MaxAttempts: 3})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()
	_, err := b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.Equal(t, fault.TurnNotRunning, fault.CodeOf(err), "nothing runs yet: %v", err)

	first, second := b.entry(acct, 1), b.entry(acct, 2)
	b.dispatch()
	done := make(chan bool)
	go func() { ran, _ := ex.RunOnce(b.ctx); done <- ran }()
	within(t, h.started, "the turn to start")
	turn, err := b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.NoError(t, err)
	require.Equal(t, 1, turn)
	again, err := b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.NoError(t, err, "asking again while it stands is the same request")
	require.Equal(t, 1, again)
	require.True(t, ex.Interrupt(b.session(actionID, acct).SID), "the executor runs it")
	require.True(t, within(t, done, "the interrupted turn to settle"))

	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.Contains(t, *s.Reason, "turn 1 was interrupted by ops")
	require.Nil(t, s.InterruptTurn, "the request is used up")
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "CANCELLED", tu.Status)
	require.EqualValues(t, "CANCELLED", b.execution(tu.ExecutionID).Status)
	require.Equal(t, []string{first, second}, b.pendingInputs(s.SID))
	require.Equal(t, 1, h.n, "one attempt: an interrupted run is not retried")
	require.False(t, b.runOnce(ex), "the session waits for its next input")

	third := b.entry(acct, 3)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{first, second, third}, b.turnInputs(s.SID, 2))
	require.Equal(t, session.Open, b.session(actionID, acct).Status)
}

// G9: an interrupt stored while the turn runs ends it even when the
// executor never hears of it (the notification lost) and the handler
// finishes with ledger writes: its transaction rolls back.
func TestG9InterruptHeardOnlyAtSettlementCommitsNothing(t *testing.T) {
	t.Parallel()
	h := newBlocking(false)
	b := setup(t, h.run)
	ex := b.executor("p", turns.Config{})
	ex.EnvFunc = b.app.Tools.Env
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	first := b.entry(acct, 1)
	b.dispatch()
	done := make(chan bool)
	go func() { ran, _ := ex.RunOnce(b.ctx); done <- ran }()
	within(t, h.started, "the turn to start")
	_, err := b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.NoError(t, err)
	close(h.release)
	within(t, done, "the turn to settle")

	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.EqualValues(t, "CANCELLED", b.turn(s.SID, 1).Status)
	require.Equal(t, []string{first}, b.pendingInputs(s.SID))
	require.Zero(t, b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'note'`), "the handler's write rolled back")
}

// G9: a close that comes while an interrupt stands wins: the session is
// CANCELLED, not WAITING.
func TestG9ConcurrentStopWins(t *testing.T) {
	t.Parallel()
	h := newBlocking(false)
	b := setup(t, h.run)
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	done := make(chan bool)
	go func() { ran, _ := ex.RunOnce(b.ctx); done <- ran }()
	within(t, h.started, "the turn to start")
	_, err := b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.NoError(t, err)
	_, err = b.app.Sessions.Close(b.ctx, actionID, acct, "stop everything")
	require.NoError(t, err)
	_, err = b.app.Sessions.Interrupt(b.ctx, actionID, acct, "ops")
	require.Equal(t, fault.SessionClosed, fault.CodeOf(err))
	close(h.release)
	within(t, done, "the turn to settle")
	s := b.session(actionID, acct)
	require.Equal(t, session.Cancelled, s.Status)
	require.Equal(t, "stop everything", *s.Reason)
	require.EqualValues(t, "CANCELLED", b.turn(s.SID, 1).Status)
}

package turns_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// T8: COMPLETED, FAILED and CANCELLED are final. Events for a final session
// are not delivered (they become session_closed intake records) and no turn
// runs for it again.
func TestT8FinalSessionsTakeNothingMore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		run    func(req *turns.Request) (*turns.Outcome, error)
		close  bool // closed by an operator after turn 1
		status session.Status
		reason string
	}{
		{name: "completed by a turn", status: session.Completed, reason: "monitoring done",
			run: func(req *turns.Request) (*turns.Outcome, error) {
				return &turns.Outcome{Status: "COMPLETED", Reason: "monitoring done", State: jsonvalue.Value(`{"count":2}`)}, nil
			}},
		{name: "failed by a turn", status: session.Failed, reason: "cannot go on",
			run: func(req *turns.Request) (*turns.Outcome, error) {
				return nil, turns.Permanent(errors.New("cannot go on"))
			}},
		{name: "cancelled by an operator", status: session.Cancelled, reason: "account frozen", close: true,
			run: func(req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) { return tc.run(req) })
			actionID := b.probeMonitor(nil)
			acct := b.openAccount()
			b.entry(acct, 1)
			b.dispatch()
			ex := b.executor("p", turns.Config{})
			require.True(t, b.runOnce(ex))
			if tc.close {
				_, err := b.app.Sessions.Close(b.ctx, actionID, acct, tc.reason)
				require.NoError(t, err)
			}
			s := b.session(actionID, acct)
			require.Equal(t, tc.status, s.Status)
			require.Contains(t, *s.Reason, tc.reason)
			require.NotNil(t, s.ClosedAt)
			before := b.inputs(s.SID)

			late := []string{b.entry(acct, 2), b.entry(acct, 3)}
			b.dispatch()
			require.False(t, b.runOnce(ex), "no turn runs for a final session")
			after := b.session(actionID, acct)
			require.Equal(t, 1, after.TurnCount)
			require.Equal(t, tc.status, after.Status)
			require.Equal(t, before, b.inputs(s.SID), "nothing more is delivered")

			recs, err := b.app.Sessions.IntakeRecords(b.ctx, actionID, 0, 100)
			require.NoError(t, err)
			require.Len(t, recs, 2)
			got := []string{}
			for _, r := range recs {
				require.Equal(t, session.ReasonSessionClosed, r.Reason)
				require.Equal(t, "entry", r.Trigger)
				require.Equal(t, acct, *r.SessionID)
				got = append(got, "event/"+r.EventID.String())
			}
			require.ElementsMatch(t, late, got)
		})
	}
}

// T8, I3: closeSession while a turn runs ends that turn CANCELLED when it
// returns, and nothing of the turn commits: no state, no consumption, no
// checkpoint, no output. The session stays CANCELLED with the operator's reason.
func TestT8CloseWhileATurnRunsCancelsIt(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	held := make(chan struct{})
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		entered <- struct{}{}
		<-held // the turn runs on as if nothing happened
		return &turns.Outcome{Status: "COMPLETED", Reason: "all done", State: jsonvalue.Value(`{"count":2}`),
			Output: jsonvalue.Value(`{"done":true}`)}, nil
	})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	ex := b.executor("p", turns.Config{})
	done := make(chan error, 1)
	go func() {
		_, err := ex.RunOnce(b.ctx)
		done <- err
	}()
	within(t, entered, "the turn to start")

	closed, err := b.app.Sessions.Close(b.ctx, actionID, acct, "operator stop")
	require.NoError(t, err)
	require.Equal(t, session.Cancelled, closed.Status)
	close(held)
	require.NoError(t, within(t, done, "the turn to end"))

	s := b.session(actionID, acct)
	require.Equal(t, session.Cancelled, s.Status)
	require.Equal(t, "operator stop", *s.Reason)
	require.Empty(t, s.State)
	require.Nil(t, s.LeaseExpires, "the cancelled turn gave up its lease")
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "CANCELLED", tu.Status)
	require.Nil(t, tu.CheckpointStatus)
	require.Empty(t, tu.CheckpointState)
	x := b.execution(tu.ExecutionID)
	require.EqualValues(t, "CANCELLED", x.Status)
	require.Empty(t, x.Output)
	for _, in := range b.inputs(s.SID) {
		require.Equal(t, session.InputPending, in.Status)
		require.Nil(t, in.Turn)
	}
	b.entry(acct, 2)
	b.dispatch()
	require.False(t, b.runOnce(ex))
	require.Len(t, b.inputs(s.SID), 1, "only the entry before the close (the account event is the origin, S2)")
}

// I3, T8: closeSession's errors.
func TestT8CloseSessionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") })
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()

	for _, reason := range []string{"", "   ", strings.Repeat("x", session.MaxReasonLen+1)} {
		_, err := b.app.Sessions.Close(b.ctx, actionID, acct, reason)
		require.Equal(t, fault.BadInput, fault.CodeOf(err), "reason %q", reason)
	}
	_, err := b.app.Sessions.Close(b.ctx, actionID, "no-such-session", "stop")
	require.Equal(t, fault.NotFound, fault.CodeOf(err))
	_, err = b.app.Sessions.Close(b.ctx, uuid.New(), acct, "stop")
	require.Equal(t, fault.NotFound, fault.CodeOf(err), "unknown action")
	require.Equal(t, session.Open, b.session(actionID, acct).Status, "a refused close changes nothing")

	_, err = b.app.Sessions.Close(b.ctx, actionID, acct, "stop")
	require.NoError(t, err)
	_, err = b.app.Sessions.Close(b.ctx, actionID, acct, "stop again")
	require.Equal(t, fault.SessionClosed, fault.CodeOf(err))
	require.Equal(t, "stop", *b.session(actionID, acct).Reason, "the first close's reason stays")
}

// T8, I3: closing a session whose turn was left RUNNING by a worker that
// died ends that turn too: once the dead worker's lease has expired, the
// turn and its execution are CANCELLED and nothing of them commits.
func TestT8CloseSettlesATurnLeftByADeadWorker(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan struct{}, 1)
	b := setup(t, stallFirst(&seen, entered, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	exA, exB := b.executor("worker-a", turns.Config{}), b.executor("worker-b", turns.Config{})
	ctxA, stopA := context.WithCancel(b.ctx)
	doneA := make(chan error, 1)
	go func() {
		_, err := exA.RunOnce(ctxA)
		doneA <- err
	}()
	within(t, entered, "worker A's turn")
	stopA() // A's process is gone
	require.ErrorIs(t, within(t, doneA, "worker A to stop"), context.Canceled)

	_, err := b.app.Sessions.Close(b.ctx, actionID, acct, "operator stop")
	require.NoError(t, err)
	b.clock.Advance(testLease)
	for b.runOnce(exB) {
	}
	s := b.session(actionID, acct)
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "CANCELLED", tu.Status)
	require.EqualValues(t, "CANCELLED", b.execution(tu.ExecutionID).Status)
	require.Len(t, seen.all(), 1, "the closed session's turn is not run again")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING'`, s.SID),
		"the entry stays unconsumed")
}

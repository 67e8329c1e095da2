package turns_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Tests of failure scope (G10) and park (G4).

// parkLoop returns a park loop on the bundle's clock.
func (b *bundle) parkLoop() *session.ParkLoop {
	return session.NewParkLoop(b.app.Pool, b.clock, b.log)
}

func (b *bundle) parks(sid int64) []session.Park {
	b.t.Helper()
	ps, err := b.app.Sessions.Parks(b.ctx, sid)
	require.NoError(b.t, err)
	return ps
}

func (b *bundle) pendingInputs(sid int64) []string {
	b.t.Helper()
	var out []string
	for _, in := range b.inputs(sid) {
		if in.Status == session.InputPending {
			out = append(out, in.Identity)
		}
	}
	return out
}

func parked(ttl, resumeAfter string, on ...string) func(*action.Definition) {
	return func(d *action.Definition) {
		p := &action.Park{TTL: ttl, ResumeOn: on}
		if resumeAfter != "" {
			p.ResumeAfter = &resumeAfter
		}
		d.Session.Park = p
	}
}

// G10: a turn that fails with scope TURN fails only itself: nothing it did
// commits, its inputs stay pending, the session waits WAITING with the
// reason and runs nothing until a new input arrives; the next turn takes
// the failed turn's inputs with the new one.
func TestG10TurnScopedFailureLeavesTheSessionWaiting(t *testing.T) {
	t.Parallel()
	fail := true
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		if fail {
			fail = false
			return &turns.Outcome{Status: "FAILED", Scope: turns.ScopeTurn, Reason: "the ledger of record is down", State: req.State}, nil
		}
		return countOutcome(req, "")
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	first := b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))

	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.Contains(t, *s.Reason, "turn 1 failed: the ledger of record is down")
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "FAILED", tu.Status)
	require.Equal(t, "WAITING", *tu.CheckpointStatus, "the turn's checkpoint: the session survives")
	require.EqualValues(t, "FAILED", b.execution(tu.ExecutionID).Status)
	require.Equal(t, []string{first}, b.pendingInputs(s.SID))
	require.False(t, b.runOnce(ex), "a session waiting after a failed turn runs nothing by itself")

	second := b.entry(acct, 2)
	b.dispatch()
	s = b.session(actionID, acct)
	require.Equal(t, session.Open, s.Status, "a new input wakes it")
	require.Nil(t, s.Reason)
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{first, second}, b.turnInputs(s.SID, 2))
	require.Equal(t, session.Open, b.session(actionID, acct).Status)
	require.Empty(t, b.parks(s.SID), "a turn-scoped failure is not a park")
}

// G10: turns.TurnScoped marks a handler error as failing the turn only; it
// is not retried. Without it an error fails the session (T7).
func TestG10TurnScopedErrorIsNotRetriedAndKeepsTheSession(t *testing.T) {
	t.Parallel()
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		return nil, turns.TurnScoped(errors.New("quota for this hour used up"))
	})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.Len(t, b.seen.all(), 1, "not retried")
	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.Contains(t, *s.Reason, "quota for this hour used up")
}

// G10: scope is only for a FAILED outcome and not in a final turn.
func TestG10ScopeOnlyWithFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		out, err := countOutcome(req, "")
		out.Scope = turns.ScopeTurn
		return out, err
	})
	ex := b.executor("p", turns.Config{MaxAttempts: 1})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(actionID, acct)
	require.Equal(t, session.Failed, s.Status)
	require.Contains(t, *s.Reason, "scope is given only with status FAILED")
}

// G4: retries that run out on a transient cause park the session instead of
// failing it: the turn fails, the session waits WAITING with its inputs
// pending, and the park resumes it at resumeAfter; the turn then runs again
// on the same inputs.
func TestG4TransientFailureParksAndResumesAfter(t *testing.T) {
	t.Parallel()
	down := true
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if down {
			return nil, fmt.Errorf("provider answered 503 (attempt %d)", n)
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(parked("1h", "10m"))
	acct := b.openAccount()
	first := b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.Len(t, b.seen.all(), 3, "retried to the end first")

	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)
	require.Contains(t, *s.Reason, "parked until")
	ps := b.parks(s.SID)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, session.ParkParked, p.Status)
	require.Equal(t, 1, p.Turn)
	require.Equal(t, turns.CodeTransient, p.Cause)
	require.Equal(t, b.clock.Now().Add(time.Hour), p.ExpiresAt)
	require.Equal(t, b.clock.Now().Add(10*time.Minute), *p.ResumeAt)
	require.Equal(t, []string{first}, b.pendingInputs(s.SID))

	// Another entry does not wake a parked session: only its resume condition does.
	second := b.entry(acct, 2)
	b.dispatch()
	require.Equal(t, session.Waiting, b.session(actionID, acct).Status)
	require.False(t, b.runOnce(b.ex))

	loop := b.parkLoop()
	n, err := loop.Once(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not due yet")
	b.clock.Advance(10 * time.Minute)
	next, err := loop.NextDue(b.ctx)
	require.NoError(t, err)
	require.Equal(t, *p.ResumeAt, next)
	n, err = loop.Once(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	p = b.parks(s.SID)[0]
	require.Equal(t, session.ParkResumed, p.Status)
	require.Equal(t, session.ResolvedByTime, *p.Resolution)
	require.Equal(t, session.Open, b.session(actionID, acct).Status)

	down = false
	require.True(t, b.runOnce(b.ex))
	require.Equal(t, []string{first, second}, b.turnInputs(s.SID, 2))
	require.EqualValues(t, "COMPLETED", b.turn(s.SID, 2).Status)
}

// G4: a park that nothing resumes expires at its TTL and the session
// fails, naming the turn and the cause.
func TestG4ParkExpiryFailsTheSession(t *testing.T) {
	t.Parallel()
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		return nil, context.DeadlineExceeded
	})
	actionID := b.probeMonitor(parked("2h", ""))
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(actionID, acct)
	require.Equal(t, turns.CodeTimeout, b.parks(s.SID)[0].Cause)

	b.clock.Advance(2*time.Hour - time.Second)
	n, err := b.parkLoop().Once(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	b.clock.Advance(time.Second)
	n, err = b.parkLoop().Once(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	s = b.session(actionID, acct)
	require.Equal(t, session.Failed, s.Status)
	require.Contains(t, *s.Reason, "turn 1 failed and the session stayed parked until")
	require.Equal(t, session.ParkExpired, b.parks(s.SID)[0].Status)
	require.False(t, b.runOnce(b.ex))
}

// G4: a delivery by a trigger the park names in resumeOn resumes it; one
// by another trigger does not.
func TestG4ParkResumesOnANamedTrigger(t *testing.T) {
	t.Parallel()
	down := true
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if down {
			return nil, errors.New("connection reset by peer")
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(parked("24h", "", "opened"))
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s := b.session(actionID, acct)
	require.Equal(t, session.Waiting, s.Status)

	b.entry(acct, 2) // trigger "entry": not named
	b.dispatch()
	require.Equal(t, session.Waiting, b.session(actionID, acct).Status)

	again := b.startAgain(acct) // trigger "opened": named
	b.dispatch()
	s = b.session(actionID, acct)
	require.Equal(t, session.Open, s.Status)
	p := b.parks(s.SID)[0]
	require.Equal(t, session.ParkResumed, p.Status)
	require.Equal(t, session.ResolvedByEvent, *p.Resolution)
	require.Equal(t, again, "event/"+*p.ResolvedBy)

	down = false
	require.True(t, b.runOnce(b.ex))
	require.EqualValues(t, "COMPLETED", b.turn(s.SID, 2).Status)
}

// G4, G10: an operator resumes a parked session, or one waiting after a
// turn-scoped failure; a session that does not wait so is refused.
func TestG4OperatorResume(t *testing.T) {
	t.Parallel()
	down := true
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if down {
			return nil, errors.New("upstream 502")
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(parked("24h", ""))
	acct := b.openAccount()
	b.dispatch()
	_, err := b.app.Sessions.Resume(b.ctx, actionID, acct, "ops")
	require.Equal(t, fault.NotResumable, fault.CodeOf(err), "open, waiting for nothing: %v", err)
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))

	s, err := b.app.Sessions.Resume(b.ctx, actionID, acct, "ops")
	require.NoError(t, err)
	require.Equal(t, session.Open, s.Status)
	p := b.parks(s.SID)[0]
	require.Equal(t, session.ParkResumed, p.Status)
	require.Equal(t, session.ResolvedByOperator, *p.Resolution)
	require.Equal(t, "ops", *p.ResolvedBy)
	down = false
	require.True(t, b.runOnce(b.ex))
	require.EqualValues(t, "COMPLETED", b.turn(s.SID, 2).Status)
}

// G4: closing a parked session ends its park (CANCELLED), and a permanent
// error still fails the session of an action with a park block (T7).
func TestG4CloseEndsTheParkAndPermanentErrorsStillFail(t *testing.T) {
	t.Parallel()
	permanent := false
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if permanent {
			return nil, turns.Permanent(errors.New("the input can never be handled"))
		}
		return nil, errors.New("upstream 502")
	})
	actionID := b.probeMonitor(parked("24h", ""))
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	_, err := b.app.Sessions.Close(b.ctx, actionID, acct, "not worth it")
	require.NoError(t, err)
	s := b.session(actionID, acct)
	require.Equal(t, session.Cancelled, s.Status)
	require.Equal(t, session.ParkCancelled, b.parks(s.SID)[0].Status)

	permanent = true
	other := b.openAccount()
	b.entry(other, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	s = b.session(actionID, other)
	require.Equal(t, session.Failed, s.Status)
	require.Empty(t, b.parks(s.SID))
}

// G4: the park block is checked when the action is stored.
func TestG4ParkDefinitionIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, c := range []struct {
		park  action.Park
		field string
	}{
		{action.Park{TTL: "soon"}, "session.park.ttl"},
		{action.Park{TTL: "0.5s"}, "session.park.ttl"},
		{action.Park{TTL: "800h"}, "session.park.ttl"},
		{action.Park{TTL: "1h", ResumeAfter: ptr("2h")}, "session.park.resumeAfter"},
		{action.Park{TTL: "1h", ResumeOn: []string{"nope"}}, "session.park.resumeOn[0]"},
	} {
		def := monitor(t)
		def.Kind = probeKind
		p := c.park
		def.Session.Park = &p
		_, err := b.actions.Create(b.ctx, uuid.New(), def)
		require.Equal(t, fault.InvalidAction, fault.CodeOf(err), "%+v: %v", c.park, err)
		require.Equal(t, c.field, fault.As(err).Field, "%+v", c.park)
	}
}

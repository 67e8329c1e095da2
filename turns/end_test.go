package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

const thirtyDays = "session.started_at + duration('720h')"

// E1, E3, T3, T9: endsAt is computed at start; before it turns are ordinary;
// at the end the pending inputs get a final turn at once, which takes them
// although turns.on names none of their triggers, sees Final and EndsAt, and
// completes the session with its reason.
func TestEndFinalTurnTakesEverything_E1_E3(t *testing.T) {
	t.Parallel()
	var got calls
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return endOutcome(req)
	})
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.dispatch()
	s := b.session(id, acct)
	require.NotNil(t, s.EndsAt)
	end := s.StartedAt.Add(720 * time.Hour)
	require.Equal(t, end, *s.EndsAt, "E1: endsAt = started_at + 720h")
	require.Equal(t, &end, b.timerDue(s.SID), "the end is the session's timer")

	e1 := b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	t1 := b.turn(s.SID, 1)
	require.False(t, t1.Final)
	require.Equal(t, &end, t1.EndsAt)

	// Two inputs that start no turn wait (T3) ...
	again := b.startAgain(acct)
	b.clock.Advance(time.Hour)
	again2 := b.startAgain(acct)
	b.dispatch()
	require.False(t, b.runOnce(ex))
	b.clock.Set(end.Add(-time.Microsecond))
	require.Zero(t, b.fire(), "not due before the end")
	require.False(t, b.runOnce(ex))

	// ... until the end, when they get a final turn at once (E3).
	b.clock.Set(end)
	require.Equal(t, 1, b.fire())
	require.True(t, b.runOnce(ex))
	t2 := b.turn(s.SID, 2)
	require.True(t, t2.Final)
	require.Equal(t, &end, t2.EndsAt)
	require.Equal(t, []string{again, again2}, b.turnInputs(s.SID, 2))
	reqs := got.all()
	require.Len(t, reqs, 2)
	require.False(t, reqs[0].Final)
	require.Equal(t, []string{e1}, viewIdentities(reqs[0].Inputs))
	require.True(t, reqs[1].Final)
	require.Equal(t, &end, reqs[1].EndsAt)

	s = b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
	require.Equal(t, "reviewed at the end", *s.Reason)
	require.Nil(t, b.timerDue(s.SID), "a closed session keeps no timer")
	require.False(t, b.runOnce(ex))
}

// E5: with nothing pending at its end the session completes with reason
// ended and no turn.
func TestEndWithNothingPendingCompletesWithoutATurn_E5(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return endOutcome(req) })
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)

	b.clock.Set(s.EndsAt.Add(time.Minute)) // the timer loop was late: no matter
	require.Equal(t, 1, b.fire())
	require.False(t, b.runOnce(ex), "no turn runs")
	s = b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
	require.Equal(t, "ended", *s.Reason)
	require.Equal(t, 1, s.TurnCount)
	require.NotNil(t, s.ClosedAt)
	require.Nil(t, b.timerDue(s.SID))
	require.Zero(t, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING'`, s.SID))
}

// E2: before the end a turn that reports COMPLETED fails with
// action_output_invalid (and so does the session); E3: a final turn that
// reports OPEN fails the same way. An operator can still close a session
// before its end.
func TestEndLimitsOpenAndCompleted_E2_E3(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		out, err := countOutcome(req, "")
		// Always the wrong status: COMPLETED before the end, OPEN in the final turn.
		if !req.Final {
			out.Status, out.Reason = "COMPLETED", "done early"
		}
		return out, err
	})
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})

	early := b.openAccount()
	b.entry(early, 1)
	late := b.openAccount()
	b.startAgain(late) // pending until the end (T3); the start that created the session is not an input (S2)
	closed := b.openAccount()
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, early)
	require.Equal(t, session.Failed, s.Status)
	require.Contains(t, *s.Reason, "action_output_invalid")
	require.Contains(t, *s.Reason, "not its final turn")
	require.EqualValues(t, "FAILED", b.turn(s.SID, 1).Status)

	_, err := b.app.Sessions.Close(b.ctx, id, closed, "operator says so")
	require.NoError(t, err, "E2: closeSession works before the end")

	l := b.session(id, late)
	b.clock.Set(*l.EndsAt)
	b.fire()
	require.True(t, b.runOnce(ex))
	require.True(t, b.turn(l.SID, 1).Final)
	l = b.session(id, late)
	require.Equal(t, session.Failed, l.Status)
	require.Contains(t, *l.Reason, "action_output_invalid")
	require.Contains(t, *l.Reason, "final turn")
	require.Equal(t, session.Cancelled, b.session(id, closed).Status)
}

// E4: a turn after the end that maxInputs cuts is ordinary (it may only keep
// the session OPEN) and the next one continues; the turn that takes the
// rest is final.
func TestEndTurnCutByLimitsIsNotFinal_E4(t *testing.T) {
	t.Parallel()
	var got calls
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return endOutcome(req)
	})
	id := b.probeMonitor(func(d *action.Definition) {
		d.Session.Ends = ptr(thirtyDays)
		d.Session.Turns.MaxInputs = ptr(2)
	})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.dispatch()
	s := b.session(id, acct)
	ins := []string{b.startAgain(acct), b.startAgain(acct), b.startAgain(acct)}
	b.dispatch()

	b.clock.Set(*s.EndsAt)
	b.fire()
	require.Equal(t, 2, b.runAll(ex))
	require.False(t, b.turn(s.SID, 1).Final, "two of three pending: ordinary")
	require.True(t, b.turn(s.SID, 2).Final)
	require.Equal(t, ins[:2], b.turnInputs(s.SID, 1))
	require.Equal(t, ins[2:], b.turnInputs(s.SID, 2))
	reqs := got.all()
	require.False(t, reqs[0].Final)
	require.True(t, reqs[1].Final)
	s = b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
}

// E4, E6: a turn running when the end passes finishes as an ordinary turn,
// and then the end applies: the input delivered meanwhile gets the final
// turn, and an input delivered during the final turn stays PENDING as
// evidence when the session completes.
func TestEndPassingDuringATurn_E4_E6(t *testing.T) {
	t.Parallel()
	var b *bundle
	var acct string
	var during, evidence string
	var end time.Time
	var got calls
	b = setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		switch req.Turn {
		case 1: // the end passes while it runs
			b.clock.Set(end.Add(time.Second))
			during = b.entry(acct, 2)
			b.dispatch()
		case 2: // the final turn
			evidence = b.entry(acct, 3)
			b.dispatch()
		}
		return endOutcome(req)
	})
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})
	acct = b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	s := b.session(id, acct)
	end = *s.EndsAt

	require.True(t, b.runOnce(ex))
	require.False(t, b.turn(s.SID, 1).Final, "it started before the end")
	require.EqualValues(t, "COMPLETED", b.turn(s.SID, 1).Status)
	require.Equal(t, session.Open, b.session(id, acct).Status)

	require.True(t, b.runOnce(ex), "the end applies as soon as the turn is over")
	require.True(t, b.turn(s.SID, 2).Final)
	require.Equal(t, []string{during}, b.turnInputs(s.SID, 2))
	s = b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
	require.False(t, b.runOnce(ex))

	pending := string(session.InputPending)
	left, err := b.app.Sessions.Inputs(b.ctx, s.SID, "", 100, &pending)
	require.NoError(t, err)
	require.Equal(t, []string{evidence}, identities(left), "E6: kept as evidence")
}

// E4: when nothing arrived meanwhile, the end of a turn that ran across the
// end completes the session with reason ended.
func TestEndPassingDuringATurnWithNothingLeft_E4_E5(t *testing.T) {
	t.Parallel()
	var b *bundle
	var end time.Time
	b = setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		b.clock.Set(end)
		return countOutcome(req, "")
	})
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	end = *b.session(id, acct).EndsAt
	require.True(t, b.runOnce(ex))
	require.False(t, b.runOnce(ex))
	s := b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
	require.Equal(t, "ended", *s.Reason)
	require.Equal(t, 1, s.TurnCount)
}

// E6: a session WAITING (for an approval) at its end stays WAITING; the
// turn that takes the response, with everything pending with it, is final.
// Approvals come later: the test sets WAITING, and then delivers the
// "response", through SQL.
func TestEndWhileWaitingStaysWaiting_E6(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return endOutcome(req) })
	id := b.clockMonitor(thirtyDays, []string{"entry"})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)
	_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET status = 'WAITING', reason = 'waiting for an approval' WHERE sid = $1`, s.SID)
	require.NoError(t, err)
	waited := b.entry(acct, 2) // delivered while waiting (P3)
	b.dispatch()

	b.clock.Set(s.EndsAt.Add(time.Hour))
	b.fire()
	require.False(t, b.runOnce(ex))
	s = b.session(id, acct)
	require.Equal(t, session.Waiting, s.Status, "stays WAITING until the response")
	require.Equal(t, 1, s.TurnCount)

	// The response arrives: the session is OPEN again with the response pending.
	_, err = b.app.Pool.Exec(b.ctx, `
		WITH s AS (UPDATE sessions SET status = 'OPEN', reason = NULL, input_count = input_count + 1, next_turn_at = $2
		           WHERE sid = $1 RETURNING sid, input_count)
		INSERT INTO session_inputs (sid, seq, identity, kind, starts_turn, status, byte_size, delivered_at, order_key)
		SELECT sid, input_count, 'command/response', 'COMMAND', true, 'PENDING', 2, $2, lpad(input_count::text, 20, '0') FROM s`,
		s.SID, b.clock.Now())
	require.NoError(t, err)
	require.True(t, b.runOnce(ex))
	require.True(t, b.turn(s.SID, 2).Final)
	require.Equal(t, []string{waited, "command/response"}, b.turnInputs(s.SID, 2))
	require.Equal(t, session.Completed, b.session(id, acct).Status)
}

// E7: without ends a turn may complete the session at any time, and a
// session with no inputs stays OPEN with no timer.
func TestNoEnd_E7(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		out, err := countOutcome(req, "")
		out.Status, out.Reason = "COMPLETED", "done"
		return out, err
	})
	id := b.probeMonitor(nil)
	ex := b.executor("w", turns.Config{})
	quiet, busy := b.openAccount(), b.openAccount()
	b.entry(busy, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	require.Equal(t, session.Completed, b.session(id, busy).Status)
	q := b.session(id, quiet)
	require.Nil(t, q.EndsAt)
	require.Nil(t, b.timerDue(q.SID))
	b.clock.Advance(10000 * time.Hour)
	require.Zero(t, b.fire())
	require.False(t, b.runOnce(ex))
	require.Equal(t, session.Open, b.session(id, quiet).Status)
}

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

// T4: window delays only the first turn after the session was idle; inputs
// arriving meanwhile ride along. An input delivered while a turn runs is not
// delayed (the session is not idle). The timer wakes the executor when the
// window ends.
func TestWindowDelaysOnlyTheFirstTurnAfterIdleness_T4(t *testing.T) {
	t.Parallel()
	var b *bundle
	var acct, during string
	b = setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		if req.Turn == 1 {
			during = b.entry(acct, 9)
			b.dispatch()
		}
		return countOutcome(req, "")
	})
	id := b.probeMonitor(func(d *action.Definition) {
		d.Session.Turns = &action.Turns{Window: ptr("30s")}
	})
	ex := b.executor("w", turns.Config{})
	acct = b.openAccount()
	b.dispatch()
	s := b.session(id, acct)
	require.Nil(t, b.timerDue(s.SID), "the start that created the session is its origin, not an input (S2): nothing waits")
	e0 := b.startAgain(acct)
	b.dispatch()
	t0 := b.clock.Now()
	require.Equal(t, t0.Add(30*time.Second), *b.timerDue(s.SID))
	require.False(t, b.runOnce(ex), "the first turn waits for the window")

	b.clock.Advance(10 * time.Second)
	e1 := b.entry(acct, 1)
	b.dispatch()
	require.False(t, b.runOnce(ex))
	require.Equal(t, t0.Add(30*time.Second), *b.timerDue(s.SID), "a later input does not extend the window")

	b.clock.Set(t0.Add(30 * time.Second))
	require.Equal(t, 1, b.fire())
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{e0, e1}, b.turnInputs(s.SID, 1))
	require.True(t, b.runOnce(ex), "the input delivered during turn 1 runs at once")
	require.Equal(t, []string{during}, b.turnInputs(s.SID, 2))
	require.Nil(t, b.timerDue(s.SID), "nothing left to wait for")

	// Idle again: the next input waits for the window again.
	b.clock.Advance(time.Hour)
	e3 := b.entry(acct, 3)
	b.dispatch()
	require.False(t, b.runOnce(ex))
	b.clock.Advance(30 * time.Second)
	b.fire()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{e3}, b.turnInputs(s.SID, 3))
}

// T4, C4, E3: a firing never waits for a window (it starts its turn at once,
// with the inputs waiting for the window), and neither does the end.
func TestWindowNeverDelaysAFiringOrTheEnd_T4_C4_E3(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return endOutcome(req) })
	id := b.probeMonitor(func(d *action.Definition) {
		d.Session.Ends = ptr("session.started_at + duration('2h')")
		d.Session.Schedule = []action.ScheduleEntry{hourly}
		d.Session.Turns = &action.Turns{Window: ptr("10m")}
	})
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.startAgain(acct) // an input (the start that created the session is its origin, S2), which waits for the window
	b.dispatch()
	s := b.session(id, acct)
	t0 := s.StartedAt
	b.clock.Set(t0.Add(10 * time.Minute))
	b.fire()
	require.True(t, b.runOnce(ex))

	// An entry 5 minutes before the firing would wait until 1h05; the
	// firing at 1h starts the turn at 1h, and the entry goes with it.
	b.clock.Set(t0.Add(55 * time.Minute))
	e1 := b.entry(acct, 1)
	b.dispatch()
	require.Equal(t, t0.Add(time.Hour), *b.timerDue(s.SID))
	b.clock.Set(t0.Add(time.Hour))
	b.fire()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{e1, scheduleID("hourly", t0.Add(time.Hour))}, b.turnInputs(s.SID, 2))

	// An entry 5 minutes before the end: the final turn runs at the end.
	b.clock.Set(t0.Add(115 * time.Minute))
	e2 := b.entry(acct, 2)
	b.dispatch()
	b.clock.Set(t0.Add(2 * time.Hour))
	b.fire()
	require.True(t, b.runOnce(ex))
	require.True(t, b.turn(s.SID, 3).Final)
	require.Equal(t, []string{e2}, b.turnInputs(s.SID, 3))
	require.Equal(t, session.Completed, b.session(id, acct).Status)
}

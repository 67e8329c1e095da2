package turns_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

var hourly = action.ScheduleEntry{Name: "hourly", Every: ptr("1h")}

// C2, C3, C4, C5, C6: without turns.on a firing starts a turn at its time.
// It becomes a SCHEDULE input only when that turn takes it, with identity
// schedule/<name>/<scheduled_at> and a schedule.fired event {schedule,
// scheduled_at, missed}. A server down for three hours fires once, with
// missed = 2. No trigger of any action sees a firing's event.
func TestClockFiringStartsATurn_C2_C3_C4_C5(t *testing.T) {
	t.Parallel()
	var got calls
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return countOutcome(req, "")
	})
	// An action that would start a session on any schedule.fired event (C3);
	// one naming the type alone is refused at create (issue 10: it could
	// never fire), so it matches by prefix.
	spy := b.probeMonitor(func(d *action.Definition) {
		d.Triggers[0].Event = `event.type.startsWith("schedule.")`
		d.Triggers[0].Session.Start.Input = jsonvalue.Value(`{"account_id": "'8d5e4c1a-7d3e-4a36-9f0b-3c8f1f6b2a10'"}`)
	})
	id := b.clockMonitor("", nil, hourly)
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.startAgain(acct) // an input: the start that created the session is only its origin (S2)
	b.dispatch()
	require.True(t, b.runOnce(ex), "without turns.on the start input starts a turn")
	s := b.session(id, acct)
	t0 := s.StartedAt
	require.Equal(t, t0.Add(time.Hour), *b.timerDue(s.SID))

	b.clock.Set(t0.Add(time.Hour - time.Microsecond))
	require.Zero(t, b.fire())
	require.False(t, b.runOnce(ex))
	require.Zero(t, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND kind = 'SCHEDULE'`, s.SID),
		"C6: a firing is recorded only when a turn takes it")

	b.clock.Set(t0.Add(time.Hour))
	require.Equal(t, 1, b.fire())
	require.True(t, b.runOnce(ex))
	reqs := got.all()
	require.Len(t, reqs[1].Inputs, 1)
	f := firedOf(t, reqs[1].Inputs[0])
	require.Equal(t, fired{"hourly", t0.Add(time.Hour).Format(time.RFC3339Nano), 0}, f)
	require.Equal(t, []string{scheduleID("hourly", t0.Add(time.Hour))}, b.turnInputs(s.SID, 2))
	ev, err := b.app.Ledger.Event(b.ctx, reqs[1].Inputs[0].Event.ID)
	require.NoError(t, err)
	require.Equal(t, "schedule.fired", ev.Type, "the firing's event is in the ledger")
	require.Equal(t, t0.Add(2*time.Hour), *b.timerDue(s.SID))

	// Down for three hours: one firing, the latest, with missed = 2 (C5).
	b.clock.Set(t0.Add(4*time.Hour + 20*time.Minute))
	b.fire()
	require.Equal(t, 1, b.runAll(ex))
	reqs = got.all()
	require.Len(t, reqs, 3)
	require.Len(t, reqs[2].Inputs, 1)
	require.Equal(t, fired{"hourly", t0.Add(4 * time.Hour).Format(time.RFC3339Nano), 2}, firedOf(t, reqs[2].Inputs[0]))
	require.Equal(t, t0.Add(5*time.Hour), *b.timerDue(s.SID))

	b.dispatch()
	require.Zero(t, b.count(`SELECT count(*) FROM sessions WHERE action_id = $1`, spy), "C3: to that session alone")
	require.Zero(t, b.count(`SELECT count(*) FROM intake_records WHERE action_id = $1`, spy))
}

// C4, C5, C6 with the seed's session block: an hourly firing (not in
// turns.on) waits for the next turn, which takes only the latest one with
// missed counting those passed over, placed among the events by time; the
// weekday morning firing (in turns.on) starts a turn; two firings due at the
// same time come in definition order.
func TestClockSeedSessionBlock_C4_C5_C6(t *testing.T) {
	t.Parallel()
	var got calls
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return countOutcome(req, "")
	})
	id := b.clockMonitor(thirtyDays, []string{"entry", "morning"},
		action.ScheduleEntry{Name: "morning", Cron: ptr("0 9 * * 1-5"), Timezone: ptr("America/New_York")}, hourly)
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount() // Monday 2025-03-03 09:00 UTC, 04:00 in New York
	b.dispatch()
	s := b.session(id, acct)
	t0 := s.StartedAt
	morning := time.Date(2025, 3, 3, 14, 0, 0, 0, time.UTC) // 09:00 EST
	require.Equal(t, morning, *b.timerDue(s.SID), "only the morning entry and the end need the timer")

	b.clock.Set(t0.Add(3*time.Hour + 30*time.Minute))
	require.Zero(t, b.fire())
	e1 := b.entry(acct, 1) // 12:30 UTC
	b.dispatch()
	b.clock.Set(t0.Add(4*time.Hour + 30*time.Minute))
	e2 := b.entry(acct, 2) // 13:30 UTC
	b.dispatch()
	require.True(t, b.runOnce(ex))
	hour4 := scheduleID("hourly", t0.Add(4*time.Hour))
	require.Equal(t, []string{e1, hour4, e2}, b.turnInputs(s.SID, 1),
		"C6: the 13:00 firing sits between the events committed at 12:30 and 13:30")
	reqs := got.all()
	require.Equal(t, fired{"hourly", t0.Add(4 * time.Hour).Format(time.RFC3339Nano), 3}, firedOf(t, reqs[0].Inputs[1]),
		"C5: the latest of 10:00-13:00, missed = 3")

	b.clock.Set(morning)
	require.Equal(t, 1, b.fire())
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{scheduleID("morning", morning), scheduleID("hourly", morning)}, b.turnInputs(s.SID, 2),
		"C4: the morning firing starts the turn and takes the hourly one due with it")
	reqs = got.all()
	require.Equal(t, 0, firedOf(t, reqs[1].Inputs[0]).Missed)
	require.Equal(t, 0, firedOf(t, reqs[1].Inputs[1]).Missed)
	require.Equal(t, time.Date(2025, 3, 4, 14, 0, 0, 0, time.UTC), *b.timerDue(s.SID), "Tuesday morning next")

	// The listing of the session's inputs follows the same order.
	require.Equal(t, []string{e1, hour4, e2, scheduleID("morning", morning), scheduleID("hourly", morning)},
		identities(b.inputs(s.SID)))
}

// C2, E5: nothing fires at or after the end.
func TestClockNothingAtOrAfterTheEnd_C2(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return endOutcome(req) })
	id := b.clockMonitor("session.started_at + duration('2h')", nil, hourly)
	ex := b.executor("w", turns.Config{})
	acct := b.openAccount()
	b.startAgain(acct) // an input: the start that created the session is only its origin (S2)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)
	t0 := s.StartedAt
	b.clock.Set(t0.Add(time.Hour))
	b.fire()
	require.True(t, b.runOnce(ex))
	require.Equal(t, t0.Add(2*time.Hour), *b.timerDue(s.SID), "the end, not a firing at it")

	b.clock.Set(t0.Add(5 * time.Hour))
	b.fire()
	require.False(t, b.runOnce(ex), "the 2h firing would be at the end: it does not exist")
	s = b.session(id, acct)
	require.Equal(t, session.Completed, s.Status)
	require.Equal(t, "ended", *s.Reason)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND kind = 'SCHEDULE'`, s.SID))
}

// C2: every firings sit at startedAt + k*every whatever happens to the
// process: a firing taken late does not shift the next, and a new process
// (fresh timers, executor and action cache) computes the same grid.
func TestClockEveryDoesNotDriftAcrossRestarts_C2(t *testing.T) {
	t.Parallel()
	var got calls
	run := func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return countOutcome(req, "")
	}
	b := setup(t, run)
	id := b.clockMonitor("", nil, action.ScheduleEntry{Name: "tick", Every: ptr("90m")})
	ex := b.executor("process-a", turns.Config{})
	acct := b.openAccount()
	b.startAgain(acct) // an input: the start that created the session is only its origin (S2)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)
	t0 := s.StartedAt

	b.clock.Set(t0.Add(95 * time.Minute)) // the timer loop is five minutes late
	b.fire()
	require.True(t, b.runOnce(ex))
	require.Equal(t, t0.Add(180*time.Minute), *b.timerDue(s.SID), "the next firing is on the grid, not 90m after the late one")

	// A restarted process: nothing of the first one's memory survives.
	fresh := action.NewStore(b.app.Pool, b.clock, b.kinds)
	timers := session.NewTimers(b.app.Pool, fresh, b.clock, slog.New(slog.DiscardHandler))
	exB := turns.NewExecutor(b.app.Pool, fresh, b.kinds, b.clock, b.log, turns.Config{Owner: "process-b", Lease: testLease})
	b.clock.Set(t0.Add(7*time.Hour + 13*time.Minute))
	n, err := timers.FireOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, b.runOnce(exB))
	reqs := got.all()
	require.Equal(t, fired{"tick", t0.Add(360 * time.Minute).Format(time.RFC3339Nano), 2}, firedOf(t, reqs[2].Inputs[0]),
		"180m, 270m and 360m were due: the latest, two missed")
	require.Equal(t, t0.Add(450*time.Minute), *b.timerDue(s.SID))
}

// C2 and the DST rules through the whole path: 02:30 in New York does not
// exist on 2025-03-09, so the nightly entry fires at 03:00 EDT.
func TestClockDSTGapFiresAfterTheGap_C2(t *testing.T) {
	t.Parallel()
	var got calls
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		got.add(req)
		return countOutcome(req, "")
	})
	id := b.clockMonitor("", nil, action.ScheduleEntry{Name: "nightly", Cron: ptr("30 2 * * *"), Timezone: ptr("America/New_York")})
	ex := b.executor("w", turns.Config{})
	b.clock.Set(time.Date(2025, 3, 8, 17, 0, 0, 0, time.UTC))
	acct := b.openAccount()
	b.startAgain(acct) // an input: the start that created the session is only its origin (S2)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)
	gapEnd := time.Date(2025, 3, 9, 7, 0, 0, 0, time.UTC) // 03:00 EDT
	require.Equal(t, gapEnd, *b.timerDue(s.SID))
	b.clock.Set(gapEnd)
	b.fire()
	require.True(t, b.runOnce(ex))
	require.Equal(t, []string{"schedule/nightly/2025-03-09T07:00:00Z"}, b.turnInputs(s.SID, 2))
	require.Equal(t, time.Date(2025, 3, 10, 6, 30, 0, 0, time.UTC), *b.timerDue(s.SID), "02:30 EDT the next night")
}

// T7, T9, C6, E3: a final turn taking a firing placed between two events is
// replayed after its worker died with the same inputs in the same order and
// the same final and endsAt.
func TestClockReplayedTurnKeepsFiringsAndFinal_T9(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan struct{}, 1)
	b := setup(t, stallFirst(&seen, entered, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	id := b.clockMonitor("session.started_at + duration('3h')", []string{"entry"}, hourly)
	acct := b.openAccount()
	b.dispatch()
	s := b.session(id, acct)
	t0 := s.StartedAt
	b.clock.Set(t0.Add(90 * time.Minute))
	before := b.startAgain(acct)
	b.clock.Set(t0.Add(150 * time.Minute))
	after := b.startAgain(acct)
	b.dispatch()

	b.clock.Set(t0.Add(3 * time.Hour))
	b.fire()
	exA, exB := b.executor("worker-a", turns.Config{}), b.executor("worker-b", turns.Config{})
	ctxA, stopA := context.WithCancel(b.ctx)
	doneA := make(chan error, 1)
	go func() {
		_, err := exA.RunOnce(ctxA)
		doneA <- err
	}()
	within(t, entered, "worker A's turn")
	stopA()
	require.ErrorIs(t, within(t, doneA, "worker A to stop"), context.Canceled)

	b.clock.Advance(testLease)
	require.True(t, b.runOnce(exB))
	want := []string{before, scheduleID("hourly", t0.Add(2*time.Hour)), after}
	require.Equal(t, want, b.turnInputs(s.SID, 1))
	reqs := seen.all()
	require.Len(t, reqs, 2)
	require.Equal(t, want, viewIdentities(reqs[1].Inputs))
	require.True(t, reqs[1].Final)
	require.Equal(t, sameTurn(reqs[0]), sameTurn(reqs[1]))
}

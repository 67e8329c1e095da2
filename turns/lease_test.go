package turns_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/turns"
)

// stallFirst returns a handler whose first call (worker A's) signals
// entered and then runs hold; every later call (worker B's) is a
// well-behaved turn by "B". Calls are recorded in seen.
func stallFirst(seen *calls, entered chan<- struct{}, hold func(ctx context.Context) error) runFunc {
	var stalled atomic.Bool
	return func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		if stalled.CompareAndSwap(false, true) {
			entered <- struct{}{}
			if err := hold(ctx); err != nil {
				return nil, err
			}
			return countOutcome(req, "A")
		}
		return countOutcome(req, "B")
	}
}

func (b *bundle) leaseOwner(sid int64) *string {
	b.t.Helper()
	var owner *string
	require.NoError(b.t, b.app.Pool.QueryRow(b.ctx, `SELECT lease_owner FROM sessions WHERE sid = $1`, sid).Scan(&owner))
	return owner
}

// HARD-PARTS 3, T1, T7, T9: worker A claims turn 1 and stalls (as good as
// dead: its handler does not return until the test lets it). While A's lease
// lasts nobody else can run the session. Once it has expired, worker B
// claims the same RUNNING turn (same number, same execution, attempts
// continuing), receives the same inputs (not the one delivered meanwhile)
// and commits. A's late commit is refused: one checkpoint, inputs consumed once.
func TestLeaseExpiredTurnIsReplayedAndTheLateOwnerCannotCommit(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan struct{}, 1)
	releaseA := make(chan struct{})
	b := setup(t, stallFirst(&seen, entered, func(context.Context) error {
		<-releaseA // A ignores everything until released
		return nil
	}))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	again := b.startAgain(acct) // waits for the entry (T3): turn 1 takes two inputs
	e1 := b.entry(acct, 1)
	b.dispatch()
	exA, exB := b.executor("worker-a", turns.Config{}), b.executor("worker-b", turns.Config{})

	doneA := make(chan error, 1)
	go func() {
		_, err := exA.RunOnce(b.ctx)
		doneA <- err
	}()
	within(t, entered, "worker A's turn")
	s := b.session(actionID, acct)
	require.Equal(t, "worker-a", *b.leaseOwner(s.SID))
	require.False(t, b.runOnce(exB), "A's lease is live: B cannot run the session")
	e2 := b.entry(acct, 2)
	b.dispatch()

	b.clock.Advance(testLease + time.Second)
	require.True(t, b.runOnce(exB), "B replays the turn A left")

	s = b.session(actionID, acct)
	require.Equal(t, 1, s.TurnCount)
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "COMPLETED", tu.Status)
	require.Equal(t, []string{again, e1}, b.turnInputs(s.SID, 1))
	x := b.execution(tu.ExecutionID)
	require.EqualValues(t, "SUCCEEDED", x.Status)
	require.Equal(t, 2, x.Attempts, "B's attempt continues A's count")
	require.Equal(t, tally{Count: 2, By: "B"}, readTally(t, s.State))
	require.Nil(t, b.leaseOwner(s.SID))

	// A wakes up and tries to commit its stale outcome.
	close(releaseA)
	require.NoError(t, within(t, doneA, "worker A to give up"))
	s = b.session(actionID, acct)
	require.Equal(t, tally{Count: 2, By: "B"}, readTally(t, s.State), "A's outcome is not committed")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM session_turns WHERE sid = $1`, s.SID))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM executions WHERE sid = $1`, s.SID))
	tu = b.turn(s.SID, 1)
	require.Equal(t, tally{Count: 2, By: "B"}, readTally(t, tu.CheckpointState), "one checkpoint, B's")
	require.JSONEq(t, `{"turn":1,"by":"B"}`, string(b.execution(tu.ExecutionID).Output))
	require.Len(t, b.transcript(tu.ExecutionID), 3, "B's transcript only")
	require.Equal(t, 2, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'CONSUMED' AND turn = 1`, s.SID))

	// T9: the replay received what the original did.
	reqs := seen.all()
	require.Len(t, reqs, 2)
	require.Equal(t, 1, reqs[0].Attempt)
	require.Equal(t, 2, reqs[1].Attempt)
	require.Equal(t, reqs[0].ExecutionID, reqs[1].ExecutionID)
	require.Equal(t, sameTurn(reqs[0]), sameTurn(reqs[1]))
	require.Equal(t, []string{again, e1}, viewIdentities(reqs[1].Inputs))

	// The input delivered during the turn waited for turn 2.
	require.True(t, b.runOnce(exB))
	require.Equal(t, []string{e2}, b.turnInputs(s.SID, 2))
	require.Equal(t, 3, readTally(t, b.session(actionID, acct).State).Count)
}

// HARD-PARTS 3, T9: worker A's process stops mid-turn (its context ends).
// Nothing of the turn commits and the claim stands until the lease expires;
// then worker B replays the same turn with the same inputs.
func TestLeaseShutdownMidTurnCommitsNothingAndTheTurnIsReplayed(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan struct{}, 1)
	b := setup(t, stallFirst(&seen, entered, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.startAgain(acct) // waits for the entry (T3): turn 1 takes two inputs
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
	stopA()
	require.ErrorIs(t, within(t, doneA, "worker A to stop"), context.Canceled)

	s := b.session(actionID, acct)
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "RUNNING", tu.Status)
	require.Empty(t, s.State)
	require.Equal(t, 2, b.count(`SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING'`, s.SID))
	require.Empty(t, b.transcript(tu.ExecutionID))
	require.False(t, b.runOnce(exB), "the dead worker's lease has not expired yet")

	b.clock.Advance(testLease)
	require.True(t, b.runOnce(exB))
	tu2 := b.turn(b.session(actionID, acct).SID, 1)
	require.EqualValues(t, "COMPLETED", tu2.Status)
	require.Equal(t, tu.ExecutionID, tu2.ExecutionID)
	reqs := seen.all()
	require.Len(t, reqs, 2)
	require.Equal(t, sameTurn(reqs[0]), sameTurn(reqs[1]))
}

// HARD-PARTS 3: a worker whose lease was taken over notices it at its next
// heartbeat, stops its handler and commits nothing. Worker A reads a clock
// that stands still (its heartbeats never reach past the expiry B sees).
func TestLeaseLostMidTurnStopsTheHandler(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	b := setup(t, stallFirst(&seen, entered, func(ctx context.Context) error {
		<-ctx.Done() // only the heartbeat can end A's turn
		stopped <- ctx.Err()
		return ctx.Err()
	}))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.startAgain(acct) // waits for the entry (T3): turn 1 takes two inputs
	b.entry(acct, 1)
	b.dispatch()
	const shortLease = 30 * time.Millisecond // heartbeats every 10ms of real time
	exA := turns.NewExecutor(b.app.Pool, b.actions, b.kinds, clock.NewManual(epoch), b.log,
		turns.Config{Owner: "worker-a", Lease: shortLease})
	exB := b.executor("worker-b", turns.Config{})

	doneA := make(chan error, 1)
	go func() {
		_, err := exA.RunOnce(b.ctx)
		doneA <- err
	}()
	within(t, entered, "worker A's turn")
	b.clock.Advance(time.Minute)
	// A heartbeat of A's in flight holds the session's row for a moment,
	// and a claim skips locked rows: B tries until it gets it.
	require.Eventually(t, func() bool { return b.runOnce(exB) }, 30*time.Second, 5*time.Millisecond, "worker B takes the expired turn over")
	require.ErrorIs(t, within(t, stopped, "A's handler to be stopped"), context.Canceled)
	require.NoError(t, within(t, doneA, "worker A to give up"))

	s := b.session(actionID, acct)
	require.Equal(t, tally{Count: 2, By: "B"}, readTally(t, s.State))
	require.Equal(t, 2, b.execution(b.turn(s.SID, 1).ExecutionID).Attempts)
}

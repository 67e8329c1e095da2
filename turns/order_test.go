package turns_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// T1, HARD-PARTS 3: two executors (two processes, different owners, four
// workers each) run against the same sessions with a slow handler. No
// session ever has two turns running at once, while different sessions run
// in parallel; turns are numbered from 1.
func TestT1OneTurnAtATimePerSessionAcrossProcesses(t *testing.T) {
	t.Parallel()
	const accounts = 6 // more than one process's workers: both must take turns
	var (
		mu       sync.Mutex
		running  = map[string]*atomic.Int32{}
		overlaps atomic.Int32
	)
	entered := make(chan string, 64)
	release := make(chan struct{})
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		mu.Lock()
		n := running[req.SessionID]
		if n == nil {
			n = new(atomic.Int32)
			running[req.SessionID] = n
		}
		mu.Unlock()
		if n.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer n.Add(-1)
		entered <- req.SessionID
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(nil)
	accts := make([]string, accounts)
	first := map[string]string{}
	for i := range accts {
		accts[i] = b.openAccount()
		first[accts[i]] = b.entry(accts[i], 0)
	}
	b.dispatch()

	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	defer stop()
	for _, owner := range []string{"process-a", "process-b"} {
		ex := b.executor(owner, turns.Config{Workers: 4, Poll: 5 * time.Millisecond})
		wg.Go(func() { _ = ex.Run(ctx, nil) })
	}

	// Every session's first turn is held at once: sessions run in parallel,
	// and with four workers per process both processes hold some.
	seen := map[string]bool{}
	for len(seen) < accounts {
		seen[within(t, entered, "every session's first turn")] = true
	}
	require.Equal(t, 2, b.count(`SELECT count(DISTINCT lease_owner) FROM sessions WHERE lease_owner IS NOT NULL`))

	// Inputs delivered while the turns run wait for the next turn, and no
	// worker of either process can start it meanwhile.
	later := map[string][]string{}
	for _, a := range accts {
		for n := 1; n <= 3; n++ {
			later[a] = append(later[a], b.entry(a, n))
		}
	}
	b.dispatch()
	close(release)

	require.Eventually(t, func() bool {
		var open int
		err := b.app.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM session_inputs WHERE status <> 'CONSUMED')
			+ (SELECT count(*) FROM session_turns WHERE status <> 'COMPLETED')`).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 10*time.Millisecond, "every input consumed by a completed turn")
	stop()

	require.Zero(t, overlaps.Load(), "two turns of one session ran at once")
	for _, a := range accts {
		s := b.session(actionID, a)
		require.Equal(t, 2, s.TurnCount, "session %s", a)
		require.Equal(t, []string{first[a]}, b.turnInputs(s.SID, 1), "the account event is the origin, not an input (S2)")
		require.Equal(t, later[a], b.turnInputs(s.SID, 2))
		require.Equal(t, 4, readTally(t, s.State).Count)
	}
}

// T2: inputs delivered during a turn wait for the next turn; the next turn
// takes every pending input up to maxInputs, in delivery order.
func TestT2InputsDuringATurnWaitForTheNext(t *testing.T) {
	t.Parallel()
	var seen calls
	entered := make(chan int, 8)
	held := make(chan struct{})
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		entered <- req.Turn
		if req.Turn == 1 {
			select {
			case <-held:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(func(d *action.Definition) { d.Session.Turns.MaxInputs = ptr(3) })
	acct := b.openAccount()
	entries := []string{b.entry(acct, 1)}
	b.dispatch()
	ex := b.executor("p", turns.Config{})

	done := make(chan error, 1)
	go func() {
		_, err := ex.RunOnce(b.ctx)
		done <- err
	}()
	require.Equal(t, 1, within(t, entered, "turn 1"))
	for n := 2; n <= 6; n++ {
		entries = append(entries, b.entry(acct, n))
	}
	b.dispatch()
	close(held)
	require.NoError(t, within(t, done, "turn 1 to commit"))

	s := b.session(actionID, acct)
	// Turn 1 had room for three but took only what was pending when it began.
	require.Equal(t, entries[:1], b.turnInputs(s.SID, 1))
	require.True(t, b.runOnce(ex))
	require.True(t, b.runOnce(ex))
	require.False(t, b.runOnce(ex))
	require.Equal(t, entries[1:4], b.turnInputs(s.SID, 2), "cut at maxInputs, in delivery order")
	require.Equal(t, entries[4:6], b.turnInputs(s.SID, 3))

	reqs := seen.all()
	require.Len(t, reqs, 3)
	require.Equal(t, entries[1:4], viewIdentities(reqs[1].Inputs))
	require.Equal(t, entries[4:6], viewIdentities(reqs[2].Inputs))
	for _, r := range reqs {
		for i := 1; i < len(r.Inputs); i++ {
			require.Less(t, r.Inputs[i-1].Sequence, r.Inputs[i].Sequence, "delivery order")
		}
	}
	s = b.session(actionID, acct)
	require.Equal(t, 3, s.TurnCount)
	require.Equal(t, 6, readTally(t, s.State).Count)
}

// T2: maxBytes cuts a turn's inputs in delivery order where the next one
// would not fit, and a turn always takes at least one input.
func TestT2MaxBytesCutsATurnButTakesAtLeastOne(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		return countOutcome(req, "")
	})
	// Sizes are those of the stored event data; every account and every
	// entry of this test has the same size. The account record that
	// creates the session is its origin, not an input (S2): a second one,
	// delivered and waiting (T3), gives the turns an input of another size.
	size := func(v map[string]any) int {
		return b.count(`SELECT octet_length($1::jsonb::text)`, string(jsonvalue.MustEncode(v)))
	}
	sample := uuid.NewString()
	accountSize := size(map[string]any{"account_id": sample})
	entrySize := size(map[string]any{"account_id": sample, "n": 1})

	fits3 := b.probeMonitor(func(d *action.Definition) { d.Session.Turns.MaxBytes = ptr(accountSize + 2*entrySize) })
	tiny := b.probeMonitor(func(d *action.Definition) { d.Session.Turns.MaxBytes = ptr(1) })
	acct := b.openAccount()
	again := b.startAgain(acct)
	var entries []string
	for n := 1; n <= 4; n++ {
		entries = append(entries, b.entry(acct, n))
	}
	b.dispatch()
	ex := b.executor("p", turns.Config{})
	for b.runOnce(ex) {
	}

	s := b.session(fits3, acct)
	for i, in := range b.inputs(s.SID) {
		want := entrySize
		if i == 0 {
			want = accountSize
		}
		require.Equal(t, want, in.ByteSize, "input %d", i)
	}
	require.Equal(t, 2, s.TurnCount)
	require.Equal(t, []string{again, entries[0], entries[1]}, b.turnInputs(s.SID, 1), "exactly maxBytes fits")
	require.Equal(t, entries[2:], b.turnInputs(s.SID, 2))

	s = b.session(tiny, acct)
	require.Equal(t, 5, s.TurnCount, "each input alone is larger than maxBytes: one per turn")
	want := append([]string{again}, entries...)
	for i, id := range want {
		require.Equal(t, []string{id}, b.turnInputs(s.SID, i+1))
	}
}

// T3: with the example's turns.on ["entry"], an account.inserted start
// input (a second start for the open session: the one that created it is
// its origin, not an input, S2) alone does not start a turn; the first entry
// starts turn 1, which takes both in delivery order. Without turns.on the
// start input does.
func TestT3TurnsOnStartsOnlyOnNamedTriggers(t *testing.T) {
	t.Parallel()
	var seen calls
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "")
	})
	gated := b.probeMonitor(nil)
	ungated := b.probeMonitor(func(d *action.Definition) { d.Session.Turns.On = nil })
	acct := b.openAccount()
	b.dispatch()
	ex := b.executor("p", turns.Config{})
	require.False(t, b.runOnce(ex), "the start that created the sessions gives them no input and no turn (S2)")
	again := b.startAgain(acct)
	b.dispatch()

	require.True(t, b.runOnce(ex), "without turns.on the start input starts a turn")
	require.False(t, b.runOnce(ex), "with turns.on [entry] the start input waits")
	g := b.session(gated, acct)
	require.Zero(t, g.TurnCount)
	ins := b.inputs(g.SID)
	require.Len(t, ins, 1)
	require.Equal(t, session.InputPending, ins[0].Status)
	require.False(t, ins[0].StartsTurn)
	require.Equal(t, []string{again}, b.turnInputs(b.session(ungated, acct).SID, 1))

	entry := b.entry(acct, 1)
	b.dispatch()
	for b.runOnce(ex) {
	}
	g = b.session(gated, acct)
	require.Equal(t, 1, g.TurnCount)
	require.Equal(t, []string{again, entry}, b.turnInputs(g.SID, 1))
	require.Equal(t, []string{entry}, b.turnInputs(b.session(ungated, acct).SID, 2))

	var req *turns.Request
	for _, r := range seen.all() {
		if r.ActionID == gated {
			req = &r
		}
	}
	require.NotNil(t, req)
	require.Equal(t, 1, req.Turn)
	require.Len(t, req.Inputs, 2)
	require.Equal(t, []string{"opened"}, req.Inputs[0].Triggers)
	require.Equal(t, "account.inserted", req.Inputs[0].Event.Type)
	require.Equal(t, []string{"entry"}, req.Inputs[1].Triggers)
	require.Equal(t, "entry.inserted", req.Inputs[1].Event.Type)
	require.Less(t, req.Inputs[0].Sequence, req.Inputs[1].Sequence)
}

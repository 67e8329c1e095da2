package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Issue 15: actions without a session block run one execution per
// matching event, at least once and committed exactly once.

// onEntry is an action without a session block running probeKind: "all"
// matches every entry, "big" entries with n >= 10.
func onEntry(edit func(*action.Definition)) action.Definition {
	def := action.Definition{Name: "on-entry", Kind: probeKind, Triggers: []action.Trigger{
		{Name: "all", Event: `event.type == "entry.inserted"`},
		{Name: "big", Event: `event.type == "entry.inserted" && int(event.data.n) >= 10`},
	}}
	if edit != nil {
		edit(&def)
	}
	return def
}

func (b *bundle) create(def action.Definition) uuid.UUID {
	b.t.Helper()
	id := uuid.New()
	_, err := b.actions.Create(b.ctx, id, def)
	require.NoError(b.t, err)
	return id
}

func (b *bundle) executions(actionID uuid.UUID) []turns.Execution {
	b.t.Helper()
	xs, err := b.app.Turns.ActionExecutions(b.ctx, actionID, 0, 500, nil)
	require.NoError(b.t, err)
	return xs
}

// runExecutions runs every claimable execution with ex, one by one, and
// returns how many ran.
func (b *bundle) runExecutions(ex *turns.Executor) int {
	b.t.Helper()
	n := 0
	for {
		ran, err := ex.RunExecutionOnce(b.ctx)
		require.NoError(b.t, err)
		if !ran {
			return n
		}
		n++
	}
}

// writeOnce is a handler that writes one record per event it sees (keyed
// by the event id, so a second commit would make version 2) and reports it.
func writeOnce(calls *calls) runFunc {
	return func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		calls.add(req)
		ev := req.Inputs[0].Event
		v, err := req.Env.LedgerPut(ctx, "seen", ev.ID.String(), jsonvalue.MustEncode(map[string]any{"n": string(ev.Data)}))
		if err != nil {
			return nil, err
		}
		req.Transcript.Add("wrote", map[string]any{"version": v})
		return &turns.Outcome{Status: "COMPLETED", Output: jsonvalue.MustEncode(map[string]any{"version": v})}, nil
	}
}

func TestSessionlessOneExecutionPerMatchingEvent(t *testing.T) {
	t.Parallel()
	var seen calls
	b := setup(t, writeOnce(&seen))
	id := b.create(onEntry(nil))
	small := b.entryValue(map[string]any{"n": 1})
	big := b.entryValue(map[string]any{"n": 12})
	_, err := b.app.Ledger.PutValue(b.ctx, "account", uuid.NewString(), jsonvalue.MustEncode(map[string]any{}), "")
	require.NoError(t, err) // matches no trigger
	b.dispatch()

	xs := b.executions(id)
	require.Len(t, xs, 2, "one execution per matching event, however many triggers matched")
	require.Equal(t, big, "event/"+xs[0].EventID.String(), "newest event first")
	require.Equal(t, []string{"all", "big"}, xs[0].Triggers)
	require.Equal(t, small, "event/"+xs[1].EventID.String())
	require.Equal(t, []string{"all"}, xs[1].Triggers)
	for _, x := range xs {
		require.Equal(t, turns.ExecQueued, x.Status)
		require.Nil(t, x.SID)
		require.Zero(t, x.Attempts)
	}

	// A dispatcher that sees the events again (a replica whose batch
	// overlapped, a cursor moved back) queues nothing more: one
	// execution per action and event.
	_, err = b.app.Pool.Exec(b.ctx, `UPDATE dispatch_state SET position = 0`)
	require.NoError(t, err)
	b.dispatch()
	require.Len(t, b.executions(id), 2)

	ex := b.executor("w1", turns.Config{})
	ex.EnvFunc = b.app.Tools.Env
	require.Equal(t, 2, b.runExecutions(ex))
	reqs := seen.all()
	require.Len(t, reqs, 2)
	// Claims take executions in the commit order of their events.
	require.Equal(t, small, reqs[0].Inputs[0].Identity)
	require.Equal(t, big, reqs[1].Inputs[0].Identity)
	for _, r := range reqs {
		require.Empty(t, r.SessionID, "no session")
		require.Nil(t, r.State)
		require.Len(t, r.Inputs, 1)
		require.Equal(t, session.KindEvent, r.Inputs[0].Kind)
		require.Equal(t, 1, r.Attempt)
	}
	require.Equal(t, []string{"all", "big"}, reqs[1].Inputs[0].Triggers)

	for _, x := range b.executions(id) {
		require.Equal(t, turns.ExecSucceeded, x.Status)
		require.Equal(t, 1, x.Attempts)
		require.JSONEq(t, `{"version": 1}`, string(x.Output))
		require.Len(t, b.transcript(x.ID), 1)
	}
	// The handler's writes committed with the outcome, once each.
	require.Equal(t, 2, b.count(`SELECT count(*) FROM events WHERE type = 'seen.inserted'`))
	require.Zero(t, b.count(`SELECT count(*) FROM events WHERE type = 'seen.updated'`))
	require.False(t, b.runOnce(ex), "no session, no turn")
}

func TestSessionlessRetriesSeeTheSameInputThenFailVisibly(t *testing.T) {
	t.Parallel()
	var seen calls
	var fail atomic.Bool
	fail.Store(true)
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		// Writes of a failed attempt roll back with it.
		if _, err := req.Env.LedgerPut(ctx, "seen", req.Inputs[0].Event.ID.String(), jsonvalue.MustEncode(req.Attempt)); err != nil {
			return nil, err
		}
		req.Transcript.Add("attempt", req.Attempt)
		if fail.Load() {
			return nil, fmt.Errorf("downstream refused attempt %d", req.Attempt)
		}
		return &turns.Outcome{Output: jsonvalue.MustEncode("done")}, nil
	})
	id := b.create(onEntry(nil))
	ident := b.entryValue(map[string]any{"n": 3})
	b.dispatch()

	ex := b.executor("w1", turns.Config{MaxAttempts: 3})
	ex.EnvFunc = b.app.Tools.Env
	var slept []time.Duration
	turns.SetRetrySleep(ex, func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	})
	require.Equal(t, 1, b.runExecutions(ex))
	reqs := seen.all()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.Equal(t, i+1, r.Attempt)
		require.Equal(t, reqs[0].ExecutionID, r.ExecutionID)
		require.Equal(t, ident, r.Inputs[0].Identity, "every attempt receives the same event")
		require.Equal(t, reqs[0].Inputs, r.Inputs)
	}
	require.Equal(t, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, slept)

	x := b.executions(id)[0]
	require.Equal(t, turns.ExecFailed, x.Status)
	require.Equal(t, 3, x.Attempts)
	require.NotNil(t, x.Error)
	require.Contains(t, *x.Error, "downstream refused attempt 3")
	require.Zero(t, b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'seen'`), "nothing a failed attempt wrote commits")
	require.Len(t, b.transcript(x.ID), 1, "the last attempt's transcript is kept")

	// An operator retries it: a fresh set of attempts, the same event,
	// the earlier transcript kept.
	_, err := b.app.Turns.RetryExecution(b.ctx, id, x.ID, "ops", b.clock.Now())
	require.NoError(t, err)
	fail.Store(false)
	require.Equal(t, 1, b.runExecutions(ex))
	x = b.executions(id)[0]
	require.Equal(t, turns.ExecSucceeded, x.Status)
	require.Equal(t, 4, x.Attempts)
	require.Equal(t, 1, x.Retries)
	require.Equal(t, "ops", *x.RetriedBy)
	require.Nil(t, x.Error)
	require.Equal(t, ident, seen.all()[3].Inputs[0].Identity)
	require.Equal(t, 4, seen.all()[3].Attempt)
	tr := b.transcript(x.ID)
	require.Len(t, tr, 2)
	require.Equal(t, []int{1, 2}, []int{tr[0].Seq, tr[1].Seq})
	require.JSONEq(t, `3`, string(tr[0].Data))
	require.JSONEq(t, `4`, string(tr[1].Data))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'seen' AND version = 1 AND value = '4'`))

	// Only a FAILED execution is retried.
	_, err = b.app.Turns.RetryExecution(b.ctx, id, x.ID, "ops", b.clock.Now())
	require.Equal(t, fault.NotRetryable, fault.CodeOf(err))
	_, err = b.app.Turns.RetryExecution(b.ctx, uuid.New(), x.ID, "ops", b.clock.Now())
	require.Equal(t, fault.NotFound, fault.CodeOf(err))
}

func TestSessionlessOutcomes(t *testing.T) {
	t.Parallel()
	outcomes := map[string]*turns.Outcome{
		"1": {Status: "FAILED", Reason: "the customer is unknown"},
		"2": {Status: "WAITING", Approvals: []turns.Approval{{InterruptID: uuid.New()}}},
		"3": {Status: "OPEN", State: jsonvalue.MustEncode(map[string]any{"ignored": true}), Output: jsonvalue.MustEncode(1)},
	}
	var runs atomic.Int32
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		runs.Add(1)
		var d struct{ N json.Number }
		if err := json.Unmarshal(req.Inputs[0].Event.Data, &d); err != nil {
			return nil, err
		}
		return outcomes[d.N.String()], nil
	})
	id := b.create(onEntry(nil))
	for _, n := range []int{1, 2, 3} {
		b.entryValue(map[string]any{"n": n})
	}
	b.dispatch()
	ex := b.executor("w1", turns.Config{})
	require.Equal(t, 3, b.runExecutions(ex))
	require.EqualValues(t, 3, runs.Load(), "a FAILED or invalid outcome is not retried")
	xs := b.executions(id)
	require.Equal(t, turns.ExecSucceeded, xs[0].Status)
	require.JSONEq(t, `1`, string(xs[0].Output))
	require.Equal(t, turns.ExecFailed, xs[1].Status)
	require.Contains(t, *xs[1].Error, "action_output_invalid: an action without a session block cannot wait for an approval")
	require.Equal(t, turns.ExecFailed, xs[2].Status)
	require.Equal(t, "handler_failed: the customer is unknown", *xs[2].Error)
}

// A worker that lost its lease (it stalled past it, or died) commits
// nothing; the execution runs again under the next claim, whose outcome
// alone commits (HARD-PARTS 3 for executions).
func TestSessionlessLeaseLostCommitsOnce(t *testing.T) {
	t.Parallel()
	entered, release := make(chan int, 4), make(chan struct{})
	var releaseOnce atomic.Bool
	let := func() {
		if releaseOnce.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(let) // a failing test does not leave the stalled worker blocked
	var seen calls
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		entered <- req.Attempt
		if req.Attempt == 1 {
			<-release // the stalled worker, which writes once the other committed
		}
		if _, err := req.Env.LedgerPut(ctx, "seen", req.Inputs[0].Event.ID.String(), jsonvalue.MustEncode(req.Attempt)); err != nil {
			return nil, err
		}
		return &turns.Outcome{Output: jsonvalue.MustEncode(req.Attempt)}, nil
	})
	id := b.create(onEntry(nil))
	b.entryValue(map[string]any{"n": 1})
	b.dispatch()

	slow := b.executor("slow", turns.Config{Lease: time.Minute})
	slow.EnvFunc = b.app.Tools.Env
	fast := b.executor("fast", turns.Config{Lease: time.Minute})
	fast.EnvFunc = b.app.Tools.Env
	done := make(chan error, 1)
	go func() {
		_, err := slow.RunExecutionOnce(b.ctx)
		done <- err
	}()
	require.Equal(t, 1, within(t, entered, "the first attempt"))
	ran, err := fast.RunExecutionOnce(b.ctx)
	require.NoError(t, err)
	require.False(t, ran, "the lease is live: nothing to claim")

	b.clock.Advance(2 * time.Minute) // the slow worker's lease expires
	ran, err = fast.RunExecutionOnce(b.ctx)
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, 2, within(t, entered, "the second attempt"))
	let()
	require.NoError(t, within(t, done, "the slow worker"))

	x := b.executions(id)[0]
	require.Equal(t, turns.ExecSucceeded, x.Status)
	require.Equal(t, 2, x.Attempts)
	require.JSONEq(t, `2`, string(x.Output), "the run that held the lease committed")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'seen' AND version = 1 AND value = '2'`),
		"the handler's writes committed once, with the outcome")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM events WHERE type LIKE 'seen.%'`))
	require.Len(t, b.transcript(x.ID), 0)
	require.Len(t, seen.all(), 2)
}

// Issue 15: at most limit executions of a concurrency group run at once,
// and a group's executions start in the commit order of their events.
func TestSessionlessConcurrencyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		return &turns.Outcome{Output: req.Inputs[0].Event.Data}, nil
	})
	key := `string(event.data.account)`
	perAccount := b.create(onEntry(func(d *action.Definition) {
		d.Concurrency = &action.ConcurrencyDef{Limit: 1, Key: &key}
	}))
	b.create(onEntry(func(d *action.Definition) {
		d.Name = "two-at-a-time"
		d.Concurrency = &action.ConcurrencyDef{Limit: 2}
	}))
	for i, acct := range []string{"a", "a", "b", "a", "b"} {
		b.entryValue(map[string]any{"account": acct, "n": i})
	}
	b.dispatch()
	xs := b.executions(perAccount)
	require.Len(t, xs, 5)
	require.Equal(t, "a", *xs[4].ConcurrencyKey)

	ex := b.executor("w1", turns.Config{})
	claimed := func() map[string][]int {
		js, err := turns.ClaimExecutions(b.ctx, ex, 50)
		require.NoError(t, err)
		out := map[string][]int{}
		for _, j := range js {
			x := b.execution(uuid.MustParse(j.ID()))
			out[x.ActionID.String()] = append(out[x.ActionID.String()], int(*x.EventPosition))
		}
		return out
	}
	// First claim: a's first, b's first (one per account), and the other
	// action's first two events.
	first := claimed()
	pos := func(x turns.Execution) int { return int(*x.EventPosition) }
	require.Equal(t, []int{pos(xs[4]), pos(xs[2])}, first[perAccount.String()])
	require.Len(t, first, 2)
	for a, ps := range first {
		if a != perAccount.String() {
			require.Equal(t, []int{pos(xs[4]), pos(xs[3])}, ps, "limit 2 without a key: the action's first two")
		}
	}
	require.Empty(t, claimed(), "every group is full")

	// The claimed executions' leases expire (their workers died): they
	// are the ones claimed again, not later events of their groups.
	b.clock.Advance(2 * testLease)
	again, err := turns.ClaimExecutions(b.ctx, ex, 50)
	require.NoError(t, err)
	require.Len(t, again, 4)
	for _, j := range again {
		require.Equal(t, 2, j.Attempt(), "a re-claim is the next attempt")
	}
	// Finishing a's first admits a's second, and nothing else of a.
	for _, j := range again {
		x := b.execution(uuid.MustParse(j.ID()))
		if x.ActionID == perAccount && pos(*x) == pos(xs[4]) {
			require.NoError(t, turns.RunExecution(b.ctx, ex, j))
		}
	}
	next := claimed()
	require.Equal(t, map[string][]int{perAccount.String(): {pos(xs[3])}}, next)
}

// A3 for the dispatcher: a concurrency key that fails for an event fails
// that event's execution at once, visibly, and a retry is refused.
func TestSessionlessConcurrencyKeyFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ context.Context, req *turns.Request) (*turns.Outcome, error) {
		return nil, errors.New("must not run")
	})
	keyStr := `string(event.data.account)`
	id := b.create(onEntry(func(d *action.Definition) {
		d.Concurrency = &action.ConcurrencyDef{Limit: 1, Key: &keyStr}
	}))
	b.entryValue(map[string]any{"n": 1}) // no account field
	b.dispatch()
	x := b.executions(id)[0]
	require.Equal(t, turns.ExecFailed, x.Status)
	require.Nil(t, x.ConcurrencyKey)
	require.Contains(t, *x.Error, "concurrency_key_failed: concurrency.key: ")
	require.NotNil(t, x.FinishedAt)
	require.Zero(t, b.runExecutions(b.executor("w1", turns.Config{})))
	_, err := b.app.Turns.RetryExecution(b.ctx, id, x.ID, "ops", b.clock.Now())
	require.Equal(t, fault.NotRetryable, fault.CodeOf(err))
}

package turns

import (
	"context"
	"time"
)

// SetRetrySleep replaces the wait between retries of e, so tests of T7 see
// the backoff it asks for without waiting for it. Compiled only into this
// package's tests.
func SetRetrySleep(e *Executor, sleep func(ctx context.Context, d time.Duration) error) {
	e.sleep = sleep
}

// Ran is a claimed turn whose handler has run and whose outcome is not
// committed yet (for tests of batched claims and commits).
type Ran struct{ f *finished }

// SID is the turn's session.
func (r Ran) SID() int64 { return r.f.c.sess.SID }

// Turn is the turn's number.
func (r Ran) Turn() int { return r.f.c.turn }

// ClaimAndRun claims up to n runnable sessions in one claim and runs each
// turn's handler, committing nothing. It returns the turns and how many
// sessions the claim leased.
func ClaimAndRun(ctx context.Context, e *Executor, n int) ([]Ran, int, error) {
	cs, leased, err := e.claim(ctx, n)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Ran, 0, len(cs))
	for _, c := range cs {
		f, done, err := e.execute(ctx, ctx, c)
		done()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, Ran{f})
	}
	return out, leased, nil
}

// Verdicts of CommitBatch.
const (
	Committed = "committed"
	LeaseLost = "lease lost"
	Alone     = "alone"
)

// CommitBatch commits turns as the completer does: in one transaction that
// waits up to Config.SettleLockWait for their sessions, then, if the wait
// ran out, in one that skips the sessions another transaction holds. It
// returns each turn's verdict.
func CommitBatch(ctx context.Context, e *Executor, rs []Ran) ([]string, error) {
	fs := make([]*finished, len(rs))
	for i, r := range rs {
		fs[i] = r.f
	}
	vs, err := newCompleter(e).batch(ctx, fs)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = map[verdict]string{committed: Committed, leaseLost: LeaseLost, alone: Alone}[v]
	}
	return out, nil
}

// SettleAtOnce settles turns in one round trip, decided from their
// sessions as their claims read them (the completer's first try). ok is
// false when it did not apply or did not commit; err is why it did not.
func SettleAtOnce(ctx context.Context, e *Executor, rs []Ran) (ok bool, err error) {
	fs := make([]*finished, len(rs))
	for i, r := range rs {
		fs[i] = r.f
	}
	vs, err := e.settleAtOnce(ctx, fs)
	return vs != nil, err
}

// CommitAlone commits one turn by itself, waiting for its session's lock.
func CommitAlone(ctx context.Context, e *Executor, r Ran) (bool, error) {
	return e.settleOne(ctx, r.f)
}

// Job is a claimed execution of an action without a session block, not
// run yet (issue 15's tests of claims and concurrency).
type Job struct{ j *job }

// ID is the execution's id.
func (j Job) ID() string { return j.j.id.String() }

// Attempt is the attempt the claim started.
func (j Job) Attempt() int { return j.j.attempt }

// ClaimExecutions claims up to n executions of actions without a session
// block without running them.
func ClaimExecutions(ctx context.Context, e *Executor, n int) ([]Job, error) {
	js, err := e.claimJobs(ctx, n)
	out := make([]Job, len(js))
	for i, j := range js {
		out[i] = Job{j}
	}
	return out, err
}

// RunExecution runs a claimed execution to its commit.
func RunExecution(ctx context.Context, e *Executor, j Job) error { return e.runJob(ctx, j.j) }

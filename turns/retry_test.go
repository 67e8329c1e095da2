package turns_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// retryBundle is a bundle whose probe handler is attempt(n) for the nth call,
// with the executor's retry waits recorded instead of slept.
type retryBundle struct {
	*bundle
	seen   *calls
	ex     *turns.Executor
	mu     sync.Mutex
	sleeps []time.Duration
}

func setupRetry(t *testing.T, attempt func(n int, req *turns.Request) (*turns.Outcome, error)) *retryBundle {
	seen := &calls{}
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return attempt(len(seen.all()), req)
	})
	rb := &retryBundle{bundle: b, seen: seen}
	rb.ex = b.executor("p", turns.Config{MaxAttempts: 3, Backoff: time.Second})
	turns.SetRetrySleep(rb.ex, func(ctx context.Context, d time.Duration) error {
		rb.mu.Lock()
		rb.sleeps = append(rb.sleeps, d)
		rb.mu.Unlock()
		return ctx.Err()
	})
	return rb
}

// T7: a flaky handler fails twice and then succeeds; every attempt of the
// turn's execution sees the same inputs and state, the waits between
// attempts back off, and only the successful attempt's transcript is kept.
func TestT7RetriesSeeTheSameInputsAndState(t *testing.T) {
	t.Parallel()
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		req.Transcript.Add("attempt", n)
		if n == 2 || n == 3 { // turn 2's first two attempts fail
			return nil, fmt.Errorf("flaky failure %d", n)
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex)) // turn 1 gives the session a state
	b.entry(acct, 2)
	b.entry(acct, 3)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))

	reqs := b.seen.all()[1:]
	require.Len(t, reqs, 3)
	require.NotEmpty(t, reqs[0].State)
	for i, r := range reqs {
		require.Equal(t, i+1, r.Attempt)
		require.Equal(t, sameTurn(reqs[0]), sameTurn(r), "attempt %d", i+1)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, b.sleeps)

	s := b.session(actionID, acct)
	tu := b.turn(s.SID, 2)
	require.EqualValues(t, "COMPLETED", tu.Status)
	x := b.execution(tu.ExecutionID)
	require.EqualValues(t, "SUCCEEDED", x.Status)
	require.Equal(t, 3, x.Attempts)
	entries := b.transcript(tu.ExecutionID)
	require.Equal(t, "attempt", entries[0].Kind)
	require.JSONEq(t, "4", string(entries[0].Data), "the transcript is the last attempt's")
	require.Equal(t, 3, readTally(t, s.State).Count, "three entries (the account event is the origin, S2)")
}

// T7: a turn whose execution does not succeed fails, and so does its
// session; its inputs stay PENDING and the reason names the execution.
// Retryable errors are retried up to MaxAttempts; a Permanent error, a
// panic and an invalid outcome fail at once. The executor survives a panic.
func TestT7FailedExecutionFailsTheTurnAndTheSession(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		run      func(req *turns.Request) (*turns.Outcome, error)
		attempts int
		reason   string
	}{
		{"retries spent", func(*turns.Request) (*turns.Outcome, error) {
			return nil, errors.New("upstream unavailable")
		}, 3, "upstream unavailable"},
		{"permanent error", func(*turns.Request) (*turns.Outcome, error) {
			return nil, turns.Permanent(errors.New("config rejected upstream"))
		}, 1, "config rejected upstream"},
		{"panic", func(*turns.Request) (*turns.Outcome, error) {
			panic("handler bug")
		}, 1, "handler bug"},
		{"no outcome", func(*turns.Request) (*turns.Outcome, error) {
			return nil, nil
		}, 1, "action_output_invalid"},
		{"unknown status", func(*turns.Request) (*turns.Outcome, error) {
			return &turns.Outcome{Status: "BOGUS", State: jsonvalue.Value(`{}`)}, nil
		}, 1, "action_output_invalid"},
		{"COMPLETED without reason", func(*turns.Request) (*turns.Outcome, error) {
			return &turns.Outcome{Status: "COMPLETED"}, nil
		}, 1, "action_output_invalid"},
		{"FAILED without reason", func(*turns.Request) (*turns.Outcome, error) {
			return &turns.Outcome{Status: "FAILED"}, nil
		}, 1, "action_output_invalid"},
		{"WAITING without an approval", func(*turns.Request) (*turns.Outcome, error) {
			return &turns.Outcome{Status: "WAITING"}, nil
		}, 1, "action_output_invalid"},
		{"state is not storable", func(*turns.Request) (*turns.Outcome, error) {
			return &turns.Outcome{Status: "OPEN", State: jsonvalue.Value(`{"a":"\u0000"}`)}, nil
		}, 1, "action_output_invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
				return tc.run(req)
			})
			actionID := b.probeMonitor(nil)
			acct := b.openAccount()
			b.entry(acct, 1)
			b.dispatch()
			require.True(t, b.runOnce(b.ex))
			require.Len(t, b.seen.all(), tc.attempts)

			s := b.session(actionID, acct)
			tu := b.turn(s.SID, 1)
			require.EqualValues(t, "FAILED", string(s.Status))
			require.NotNil(t, s.Reason)
			require.Contains(t, *s.Reason, tu.ExecutionID.String(), "the reason names the execution")
			require.Contains(t, *s.Reason, tc.reason)
			require.NotNil(t, s.ClosedAt)
			require.Empty(t, s.State)
			require.EqualValues(t, "FAILED", tu.Status)
			require.EqualValues(t, "FAILED", *tu.CheckpointStatus)
			x := b.execution(tu.ExecutionID)
			require.EqualValues(t, "FAILED", x.Status)
			require.Equal(t, tc.attempts, x.Attempts)
			require.NotNil(t, x.Error)
			require.Contains(t, *x.Error, tc.reason)
			for _, in := range b.inputs(s.SID) {
				require.Equal(t, session.InputPending, in.Status, "a failed turn consumes nothing")
				require.Nil(t, in.Turn)
			}
			require.False(t, b.runOnce(b.ex), "a FAILED session runs no more turns")
		})
	}
}

// T7: a panicking handler fails its own turn only; the same executor goes
// on to run other sessions' turns.
func TestT7PanicFailsTheTurnAndTheExecutorSurvives(t *testing.T) {
	t.Parallel()
	var bad string
	b := setupRetry(t, func(n int, req *turns.Request) (*turns.Outcome, error) {
		if req.SessionID == bad {
			panic("handler bug")
		}
		return countOutcome(req, "")
	})
	actionID := b.probeMonitor(nil)
	bad = b.openAccount()
	good := b.openAccount()
	b.entry(bad, 1)
	b.entry(good, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.ex))
	require.True(t, b.runOnce(b.ex))
	require.False(t, b.runOnce(b.ex))
	require.EqualValues(t, "FAILED", string(b.session(actionID, bad).Status))
	require.Contains(t, *b.session(actionID, bad).Reason, "panicked")
	g := b.session(actionID, good)
	require.Equal(t, "OPEN", string(g.Status))
	require.Equal(t, 1, readTally(t, g.State).Count, "the entry (the account event is the origin, S2)")
}

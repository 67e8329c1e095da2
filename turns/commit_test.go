package turns_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// T5, T6: the handler gets the session id, input, state and the turn's
// inputs; what it returns (state, status, output) commits together with the
// consumption of the inputs, the checkpoint, the execution and the
// transcript, and turn N+1 builds on what turn N committed.
func TestT5T6OutcomeCommitsWithTheInputs(t *testing.T) {
	t.Parallel()
	var seen calls
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "probe")
	})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	again := b.startAgain(acct) // waits for the entry (T3); the account event that created the session is its origin (S2)
	entry := b.entry(acct, 7)
	b.dispatch()
	ex := b.executor("p", turns.Config{})
	require.True(t, b.runOnce(ex))

	s := b.session(actionID, acct)
	tu := b.turn(s.SID, 1)
	req := seen.all()[0]
	require.Equal(t, actionID, req.ActionID)
	require.Equal(t, 1, req.Version)
	require.Equal(t, acct, req.SessionID)
	require.JSONEq(t, `{"account_id":"`+acct+`"}`, string(req.Input))
	require.Empty(t, req.State, "a new session has no state")
	require.Equal(t, 1, req.Turn)
	require.Equal(t, 1, req.Attempt)
	require.Equal(t, tu.ExecutionID, req.ExecutionID)
	require.Equal(t, []string{again, entry}, viewIdentities(req.Inputs))
	for _, in := range req.Inputs {
		require.Equal(t, session.KindEvent, in.Kind)
		require.NotNil(t, in.Event)
	}
	require.JSONEq(t, `{"account_id":"`+acct+`","n":7}`, string(req.Inputs[1].Event.Data))

	// Everything of the turn is committed, together.
	require.Equal(t, "OPEN", string(s.Status))
	require.JSONEq(t, `{"count":2,"by":"probe"}`, string(s.State))
	require.EqualValues(t, "COMPLETED", tu.Status)
	require.JSONEq(t, `{"count":2,"by":"probe"}`, string(tu.CheckpointState))
	require.Equal(t, "OPEN", *tu.CheckpointStatus)
	require.NotNil(t, tu.FinishedAt)
	for _, in := range b.inputs(s.SID) {
		require.Equal(t, session.InputConsumed, in.Status)
		require.Equal(t, 1, *in.Turn)
	}
	x := b.execution(tu.ExecutionID)
	require.EqualValues(t, "SUCCEEDED", x.Status)
	require.Equal(t, 1, x.Attempts)
	require.Equal(t, 1, *x.Turn)
	require.JSONEq(t, `{"turn":1,"by":"probe"}`, string(x.Output))
	kinds := []string{}
	for _, e := range b.transcript(tu.ExecutionID) {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"input", "input", "reply"}, kinds)

	// Turn 2 starts from what turn 1 committed.
	b.entry(acct, 8)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	require.JSONEq(t, string(s.State), string(seen.all()[1].State))
	require.Equal(t, 3, readTally(t, b.session(actionID, acct).State).Count)
}

// failCommit installs a trigger that makes any transaction marking an
// execution SUCCEEDED fail while armed. The turn's commit marks its
// execution after it has written the session, the inputs and the
// checkpoint, so all of those must roll back with it.
const failCommit = `
CREATE TABLE test_fail_commit (armed boolean NOT NULL);
INSERT INTO test_fail_commit VALUES (true);
CREATE FUNCTION test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT armed FROM test_fail_commit) THEN
		RAISE EXCEPTION 'commit refused by the test';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER test_fail_commit BEFORE UPDATE ON executions
	FOR EACH ROW WHEN (NEW.status = 'SUCCEEDED') EXECUTE FUNCTION test_fail_commit();`

// T6: when the commit transaction fails, nothing of the turn is committed
// (state, status, consumption, checkpoint, execution, transcript), and the
// turn is run again (its lease given up at once) with the same inputs.
func TestT6FailedCommitLeavesNothingAndTheTurnRunsAgain(t *testing.T) {
	t.Parallel()
	var seen calls
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "probe")
	})
	_, err := b.app.Pool.Exec(b.ctx, failCommit)
	require.NoError(t, err)
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.startAgain(acct) // waits for the entry (T3): turn 1 takes two inputs
	b.entry(acct, 1)
	b.dispatch()
	ex := b.executor("p", turns.Config{Lease: time.Minute})

	_, err = ex.RunOnce(b.ctx)
	require.ErrorContains(t, err, "commit refused by the test")

	s := b.session(actionID, acct)
	require.Equal(t, "OPEN", string(s.Status))
	require.Empty(t, s.State)
	require.Nil(t, s.Reason)
	for _, in := range b.inputs(s.SID) {
		require.Equal(t, session.InputPending, in.Status)
		require.Nil(t, in.Turn)
	}
	tu := b.turn(s.SID, 1)
	require.EqualValues(t, "RUNNING", tu.Status)
	require.Empty(t, tu.CheckpointState)
	require.Nil(t, tu.CheckpointStatus)
	require.Nil(t, tu.FinishedAt)
	x := b.execution(tu.ExecutionID)
	require.EqualValues(t, "RUNNING", x.Status)
	require.Empty(t, x.Output)
	require.Empty(t, b.transcript(tu.ExecutionID))

	require.Contains(t, *x.Error, "commit refused by the test", "why it did not commit is noted")

	// The failed run gave its lease up: the same turn runs again at once.
	_, err = b.app.Pool.Exec(b.ctx, `UPDATE test_fail_commit SET armed = false`)
	require.NoError(t, err)
	require.True(t, b.runOnce(ex))

	s = b.session(actionID, acct)
	require.Equal(t, 1, s.TurnCount, "the failed commit's turn ran again; no new turn")
	tu2 := b.turn(s.SID, 1)
	require.EqualValues(t, "COMPLETED", tu2.Status)
	require.Equal(t, tu.ExecutionID, tu2.ExecutionID)
	require.Equal(t, 2, b.execution(tu.ExecutionID).Attempts)
	require.Len(t, b.transcript(tu.ExecutionID), 3, "one attempt's transcript")
	require.Equal(t, 2, readTally(t, s.State).Count)
	for _, in := range b.inputs(s.SID) {
		require.Equal(t, session.InputConsumed, in.Status)
	}
	reqs := seen.all()
	require.Len(t, reqs, 2)
	require.Equal(t, sameTurn(reqs[0]), sameTurn(reqs[1]), "the rerun sees the same request")
}

// sameTurn is what every run of one turn's execution must see alike (T7, T9):
// the request without its attempt number.
func sameTurn(r turns.Request) string {
	r.Attempt = 0
	raw, _ := json.Marshal(r)
	return string(raw)
}

// T10: only kinds whose handlers call back get a credential; an
// in-process handler's turn mints none (and spends no commits on it).
func TestT10InProcessKindsGetNoCredential(t *testing.T) {
	t.Parallel()
	var seen calls
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		seen.add(req)
		return countOutcome(req, "probe")
	})
	b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(b.executor("p", turns.Config{})))
	reqs := seen.all()
	require.Len(t, reqs, 1)
	require.Empty(t, reqs[0].Credential)
	require.False(t, b.kinds.Credential(probeKind))
}

package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// T9: a replay runs the handler again on exactly what the turn received
// (its inputs, the state the session had then, its number and final
// flag), commits nothing it writes, and is stored as an execution of its
// own whose turn is the original's, with a diff against the original
// outcome: empty when it comes out the same, naming what differs when the
// world it reads has changed.
func TestReplayTurn_T9(t *testing.T) {
	type seen struct {
		Turn   int
		State  json.RawMessage
		Inputs []string
		Final  bool
	}
	var calls []seen
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		s := seen{Turn: req.Turn, State: json.RawMessage(req.State), Final: req.Final}
		for _, in := range req.Inputs {
			s.Inputs = append(s.Inputs, in.Identity)
		}
		calls = append(calls, s)
		// Reads a record the world may change, writes one, counts turns.
		limit, _, err := req.Env.LedgerGet(ctx, "limits", "max")
		if err != nil {
			return nil, err
		}
		if _, err := req.Env.LedgerPut(ctx, "seen", req.ExecutionID.String(), jsonvalue.Value(`{"n":1}`)); err != nil {
			return nil, err
		}
		n := 0
		if len(req.State) > 0 && string(req.State) != "null" {
			var st struct{ N int }
			_ = json.Unmarshal(req.State, &st)
			n = st.N
		}
		req.Transcript.Add("note", map[string]any{"turn": req.Turn})
		return &turns.Outcome{Status: "OPEN", State: jsonvalue.MustEncode(map[string]any{"n": n + 1}),
			Output: jsonvalue.MustEncode(map[string]any{"limit": limit, "inputs": len(req.Inputs)})}, nil
	})
	_, err := b.app.Ledger.PutValue(b.ctx, "limits", "max", jsonvalue.Value(`100`), "")
	require.NoError(t, err)
	id := b.probeMonitor(func(d *action.Definition) {
		d.Permissions = &action.Permissions{Read: []string{"limits"}, Write: []string{"seen"}}
	})
	ex := b.executor("w", turns.Config{})
	ex.EnvFunc = b.app.Tools.Env
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	e2, e3 := b.entry(acct, 2), b.entry(acct, 3)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s := b.session(id, acct)
	t2 := b.turn(s.SID, 2)
	seenBefore := b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'seen'`)
	require.Equal(t, 2, seenBefore)

	r, err := ex.Replay(b.ctx, id, t2.ExecutionID, turns.ReplayLive, "operator")
	require.NoError(t, err)
	require.Equal(t, seen{Turn: 2, State: json.RawMessage(`{"n": 1}`), Inputs: []string{e2, e3}}, calls[2], "what turn 2 received")
	require.Equal(t, turns.ExecSucceeded, r.Status)
	require.Equal(t, t2.ExecutionID, *r.ReplayOf)
	require.Equal(t, 2, *r.Turn, "the replay reads the original turn")
	rec, err := r.Record()
	require.NoError(t, err)
	require.Empty(t, rec.Diff, "the same inputs and world: the same outcome")
	require.Equal(t, "operator", rec.By)
	require.Equal(t, seenBefore, b.count(`SELECT count(*) FROM kv_values WHERE namespace = 'seen'`), "nothing it wrote committed")
	require.Len(t, b.transcript(r.ID), 1, "its transcript is kept")
	require.Equal(t, 2, b.count(`SELECT count(*) FROM session_turns WHERE sid = $1`, s.SID), "no turn was added")

	// The world changed: the replay says how the outcome would differ.
	_, err = b.app.Ledger.PutValue(b.ctx, "limits", "max", jsonvalue.Value(`50`), "")
	require.NoError(t, err)
	r, err = ex.Replay(b.ctx, id, r.ID, "", "operator") // a replay of a replay replays the original
	require.NoError(t, err)
	require.Equal(t, t2.ExecutionID, *r.ReplayOf)
	rec, err = r.Record()
	require.NoError(t, err)
	require.Equal(t, []turns.Change{{Op: "replace", Path: "/output/limit", Original: float64(100), Replay: float64(50)}}, rec.Diff)

	// Refusals name the field.
	for _, tc := range []struct {
		err   error
		code  string
		field string
	}{
		{func() error { _, err := ex.Replay(b.ctx, id, r.ID, "MAYBE", ""); return err }(), fault.BadInput, "provider"},
		{func() error { _, err := ex.Replay(b.ctx, b.probeMonitor(nil), t2.ExecutionID, "", ""); return err }(), fault.NotFound, "id"},
	} {
		fe := fault.As(tc.err)
		require.NotNil(t, fe, "%v", tc.err)
		require.Equal(t, tc.code, fe.Code)
		require.Equal(t, tc.field, fe.Field)
	}
}

// T9, issue 15: an execution of an action without a session block replays
// on its event; a failure replays as a failure.
func TestReplaySessionless_T9(t *testing.T) {
	fail := false
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		if fail {
			return nil, turns.Permanent(errors.New("failing now"))
		}
		return &turns.Outcome{Status: "COMPLETED", Output: jsonvalue.MustEncode(map[string]any{"event": req.Inputs[0].Event.Type})}, nil
	})
	id := b.create(onEntry(nil))
	ex := b.executor("w", turns.Config{})
	b.entry(b.openAccount(), 12)
	b.dispatch()
	require.Equal(t, 1, b.runExecutions(ex))
	orig := b.executions(id)[0]
	fail = true
	r, err := ex.Replay(b.ctx, id, orig.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, turns.ExecFailed, r.Status)
	require.Nil(t, r.Turn)
	rec, err := r.Record()
	require.NoError(t, err)
	paths := map[string]bool{}
	for _, c := range rec.Diff {
		paths[c.Path] = true
	}
	require.Equal(t, map[string]bool{"/status": true, "/output": true, "/error": true}, paths)
	require.Len(t, b.executions(id), 1, "a replay is not an execution of the event")
}

package session_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// S6, S5, T3 (issue 14: set-based delivery): one dispatch batch whose
// events interleave over several sessions delivers each to its session
// once, at consecutive places in event order, counts them on the
// session, and keeps the intake records of the events that reached no
// session in event order, whether the session is missing or closed.
func TestDeliveriesOfOneBatchInterleaved_S6_S5(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	a, b, closed, missing := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	for _, acct := range []string{a, b, closed} {
		f.put("account", acct, account(acct))
	}
	require.Equal(t, 3, f.dispatch())
	_, err := f.app.Sessions.Close(f.ctx, monitorID, closed, "done")
	require.NoError(t, err)

	// One batch: a, b, missing, a, closed, b, a.
	order := []string{a, b, missing, a, closed, b, a}
	var evs []ledger.Event
	for i, acct := range order {
		evs = append(evs, f.put("entry", uuid.NewString(), entry(acct, i+1)))
	}
	require.Equal(t, len(order), f.dispatch(), "one batch")

	want := map[string][]uuid.UUID{}
	for i, acct := range order {
		want[acct] = append(want[acct], evs[i].ID)
	}
	for _, acct := range []string{a, b} {
		s := f.session(monitorID, acct)
		ins := f.inputs(s)
		require.Len(t, ins, len(want[acct]))
		for i, in := range ins {
			require.Equal(t, int64(i+1), in.Seq, "consecutive places")
			require.Equal(t, want[acct][i], *in.EventID, "in event order")
			require.Equal(t, session.InputPending, in.Status)
			require.True(t, in.StartsTurn, "entry starts turns (T3)")
		}
		var count int
		require.NoError(t, f.app.Pool.QueryRow(f.ctx, `SELECT input_count FROM sessions WHERE sid = $1`, s.SID).Scan(&count))
		require.Equal(t, len(want[acct]), count, "the session counts them")
		require.NotNil(t, f.nextTurnAt(s), "runnable")
	}
	require.Empty(t, f.inputs(f.session(monitorID, closed)))
	require.Equal(t, []intakeView{
		{evs[2].ID, "entry", missing, session.ReasonSessionNotFound},
		{evs[4].ID, "entry", closed, session.ReasonSessionClosed},
	}, f.intakeViews(monitorID))

	// Dispatching again delivers nothing more.
	require.Equal(t, 0, f.dispatch())
	require.Len(t, f.inputs(f.session(monitorID, a)), 3)
}

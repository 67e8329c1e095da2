package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// pinned is an action whose only trigger pins the event type other.x.
func pinned(i int) action.Definition {
	return action.Definition{
		Name: fmt.Sprintf("pinned-%d", i), Kind: "agent.echo",
		Triggers: []action.Trigger{{Name: "other", Event: `event.type == "other.x"`,
			Session: startRole(`{"k": "string(event.data.k)"}`)}},
		Session: &action.SessionDef{ID: "string(session.input.k)"},
	}
}

// countOthers counts rows of table that belong to actions other than id.
func (f *fixture) countOthers(table string, id uuid.UUID) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.app.Pool.QueryRow(f.ctx, `SELECT count(*) FROM `+table+` WHERE action_id <> $1`, id).Scan(&n))
	return n
}

// Trigger index through dispatch: with 200 actions pinned to other.x,
// account and entry events reach only the monitor, and an other.x event
// reaches every pinned action and not the monitor. (That the pinned
// predicates are not even evaluated is shown by TestTriggerIndexCandidates;
// BenchmarkDispatch shows the cost.)
func TestPinnedActionsAreNotReached(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	for i := range 200 {
		f.create(pinned(i))
	}

	acct := uuid.NewString()
	open := f.put("account", "a", account(acct))
	e := f.put("entry", "e", entry(acct, 1))
	f.dispatch()
	s := f.session(monitorID, acct)
	require.Equal(t, &open.ID, s.OriginEventID)
	require.Equal(t, []delivered{{e.ID, []string{"entry"}}}, f.delivered(s))
	for _, table := range []string{"sessions", "intake_records", "trigger_diagnostics"} {
		require.Zero(t, f.countOthers(table, monitorID), table)
	}

	_, err := f.app.Ledger.AppendEvent(f.ctx, "other.x", jsonvalue.Value(`{"k": "z"}`), "")
	require.NoError(t, err)
	f.dispatch()
	require.Equal(t, 200, f.countOthers("sessions", monitorID))
	require.Equal(t, 1, f.sessionCount(monitorID))
	require.Empty(t, f.intake(monitorID))
}

// BenchmarkDispatch measures the dispatch cost per event (an entry
// delivered to the monitor's session) with 1 and with 1000 other actions
// pinned to another event type. With the trigger index the two should cost
// about the same. Run with
//
//	go test -run '^$' -bench Dispatch ./session/
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("pinned=%d", n), func(b *testing.B) {
			f := setup(b)
			monitorID := f.create(monitor())
			for i := range n {
				f.create(pinned(i))
			}
			acct := uuid.NewString()
			f.put("account", "a", account(acct))
			f.dispatch() // opens the session and builds the trigger index
			require.NotNil(b, f.session(monitorID, acct))

			appendEntries(b, f, acct, b.N)
			b.ResetTimer()
			done := 0
			for done < b.N {
				k, err := f.app.Dispatcher.DispatchOnce(f.ctx)
				require.NoError(b, err)
				require.NotZero(b, k)
				done += k
			}
			b.StopTimer()
			require.Equal(b, b.N, done)
		})
	}
}

// appendEntries appends n entry.inserted events for acct, in few transactions.
func appendEntries(b *testing.B, f *fixture, acct string, n int) {
	b.Helper()
	ctx := context.Background()
	data := jsonvalue.Value(entry(acct, 1))
	for n > 0 {
		k := min(n, 2000)
		evs := make([]ledger.NewEvent, k)
		for i := range evs {
			evs[i] = ledger.NewEvent{Type: "entry.inserted", Data: data}
		}
		tx, err := f.app.Pool.Begin(ctx)
		require.NoError(b, err)
		_, err = ledger.Append(ctx, tx, f.clock.Now(), evs...)
		require.NoError(b, err)
		require.NoError(b, tx.Commit(ctx))
		f.clock.Advance(time.Millisecond)
		n -= k
	}
}

package session_test

import (
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/session"
)

// backfill runs backfill batches until none has work and returns how many
// batches ran.
func (f *fixture) backfill() int {
	f.t.Helper()
	n := 0
	for {
		m, err := f.app.Dispatcher.BackfillOnce(f.ctx)
		require.NoError(f.t, err)
		if m == 0 {
			return n
		}
		n++
	}
}

// sessionView is what two actions' sessions are compared by: the id, the
// input, startedAt and the events delivered, in any order.
type sessionView struct {
	ID        string
	Input     string
	StartedAt string
	Events    []string
}

func (f *fixture) sessionViews(actionID uuid.UUID) []sessionView {
	f.t.Helper()
	ss, err := f.app.Sessions.List(f.ctx, actionID, 0, 500, nil, nil)
	require.NoError(f.t, err)
	var out []sessionView
	for _, s := range ss {
		v := sessionView{ID: s.ID, Input: string(s.Input), StartedAt: s.StartedAt.String()}
		for _, in := range f.inputs(s) {
			v.Events = append(v.Events, in.EventID.String())
		}
		sort.Strings(v.Events)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Issue 15: an action created with from judges the events from there to
// its creation as a backfill, in batches, while live dispatch judges what
// comes after; the sessions, their start times and their inputs are
// exactly those of an identical action that judged every event live, and
// no event reaches a session twice. (S2, S3, S6 hold across the seam.)
func TestBackfillJudgesPastEventsAsLiveWould(t *testing.T) {
	f := setup(t)
	f.app.Dispatcher.Batch = 3 // several batches for each
	live := f.create(monitor())
	accts := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	for i, a := range accts {
		f.put("account", a, account(a))
		f.put("entry", uuid.NewString(), entry(a, i))
	}
	f.put("entry", uuid.NewString(), entry(accts[0], 7))
	head := f.head()

	// Live dispatch lags: the backfill cannot run ahead of it.
	from := int64(1)
	v, err := f.app.Actions.CreateFrom(f.ctx, uuid.New(), monitor(), action.From{Position: &from})
	require.NoError(t, err)
	late := v.ActionID
	require.Equal(t, head, v.FromPosition)
	require.Equal(t, 0, f.backfill(), "nothing is judged beyond the dispatch cursor")
	_, err = f.app.Dispatcher.DispatchOnce(f.ctx) // three of seven
	require.NoError(t, err)
	require.Equal(t, 1, f.backfill())
	bf, err := f.app.Actions.Backfill(f.ctx, late, 1)
	require.NoError(t, err)
	require.EqualValues(t, 3, bf.Cursor, "up to the dispatch cursor")
	require.Nil(t, bf.Joined, "live dispatch has not reached the version's start")

	// Live traffic goes on before and between backfill batches.
	f.put("entry", uuid.NewString(), entry(accts[1], 8))
	f.dispatch()
	_, err = f.app.Dispatcher.BackfillOnce(f.ctx)
	require.NoError(t, err)
	bf, err = f.app.Actions.Backfill(f.ctx, late, 1)
	require.NoError(t, err)
	require.Equal(t, action.BackfillRunning, bf.Status)
	require.EqualValues(t, 6, bf.Cursor, "one batch of three more")
	f.put("account", "late", account(uuid.NewString()))
	f.put("entry", uuid.NewString(), entry(accts[2], 9))
	f.dispatch()
	require.Positive(t, f.backfill())
	joined := f.cursor()

	bf, err = f.app.Actions.Backfill(f.ctx, late, 1)
	require.NoError(t, err)
	require.Equal(t, action.BackfillDone, bf.Status)
	require.Equal(t, head, bf.ToPosition)
	require.Equal(t, joined, bf.Cursor, "it judged up to the dispatch cursor")
	require.Equal(t, joined, *bf.Joined)
	require.EqualValues(t, joined, bf.Events)
	require.Equal(t, 1.0, bf.Progress(f.head()))
	require.NotNil(t, bf.FinishedAt)

	// Joined: live dispatch judges the version from there on.
	f.put("entry", uuid.NewString(), entry(accts[0], 10))
	f.dispatch()
	require.Equal(t, f.sessionViews(live), f.sessionViews(late))
	require.Len(t, f.sessionViews(late), 4)
	require.Equal(t, 0, f.backfill(), "nothing left")
}

// Issue 15: a backfill can be cancelled; it stops where it is and its
// work stays. from is checked against the ledger.
func TestBackfillCancelAndBounds(t *testing.T) {
	f := setup(t)
	f.app.Dispatcher.Batch = 2
	for range 5 {
		a := uuid.NewString()
		f.put("account", a, account(a))
	}
	f.dispatch()
	from := int64(1)
	v, err := f.app.Actions.CreateFrom(f.ctx, uuid.New(), monitor(), action.From{Position: &from})
	require.NoError(t, err)
	_, err = f.app.Dispatcher.BackfillOnce(f.ctx)
	require.NoError(t, err)
	bf, err := f.app.Actions.CancelBackfill(f.ctx, v.ActionID, 1, "operator")
	require.NoError(t, err)
	require.Equal(t, action.BackfillCancelled, bf.Status)
	require.EqualValues(t, 2, bf.Cursor)
	require.Equal(t, "operator", *bf.CancelledBy)
	require.Equal(t, 0.4, bf.Progress(f.head()))
	require.Equal(t, 1, f.backfill(), "it skips the rest of the past and joins")
	bf, err = f.app.Actions.Backfill(f.ctx, v.ActionID, 1)
	require.NoError(t, err)
	require.Equal(t, action.BackfillCancelled, bf.Status)
	require.EqualValues(t, 5, *bf.Joined)
	require.Equal(t, 2, f.sessionCount(v.ActionID), "the first batch's sessions stay")
	a := uuid.NewString()
	f.put("account", a, account(a))
	f.dispatch()
	require.Equal(t, 3, f.sessionCount(v.ActionID), "live from the join")
	again, err := f.app.Actions.CancelBackfill(f.ctx, v.ActionID, 1, "someone else")
	require.NoError(t, err)
	require.Equal(t, "operator", *again.CancelledBy, "cancelled once")
	_, err = f.app.Actions.CancelBackfill(f.ctx, v.ActionID, 2, "operator")
	require.Equal(t, fault.NotFound, fault.CodeOf(err))

	for _, p := range []int64{0, -3, f.head() + 2} {
		_, err := f.app.Actions.CreateFrom(f.ctx, uuid.New(), monitor(), action.From{Position: &p})
		fe := fault.As(err)
		require.NotNil(t, fe, "from %d", p)
		require.Equal(t, fault.BadInput, fe.Code)
		require.Equal(t, "from", fe.Field)
	}
	next := f.head() + 1
	v, err = f.app.Actions.CreateFrom(f.ctx, uuid.New(), monitor(), action.From{Position: &next})
	require.NoError(t, err)
	bf, err = f.app.Actions.Backfill(f.ctx, v.ActionID, 1)
	require.NoError(t, err)
	require.Nil(t, bf, "nothing before the head to go back to")
}

// Issue 15: an update with from backfills the new version's triggers
// alone; an action without a session block runs one execution per event
// however many versions judged it.
func TestBackfillOnUpdate(t *testing.T) {
	f := setup(t)
	def := action.Definition{Name: "on", Kind: "agent.echo", Triggers: []action.Trigger{
		{Name: "a", Event: `event.type == "a.inserted"`},
	}}
	id := f.create(def)
	for i := range 3 {
		f.put("a", uuid.NewString(), `{}`)
		f.put("b", uuid.NewString(), `{}`)
		_ = i
	}
	f.dispatch()
	count := func(version int) int {
		var n int
		require.NoError(t, f.app.Pool.QueryRow(f.ctx, `SELECT count(*) FROM executions WHERE action_id = $1 AND version = $2`, id, version).Scan(&n))
		return n
	}
	require.Equal(t, 3, count(1))
	def.Triggers = append(def.Triggers, action.Trigger{Name: "b", Event: `event.type == "b.inserted"`})
	from := int64(1)
	_, err := f.app.Actions.UpdateFrom(f.ctx, id, def, action.From{Position: &from})
	require.NoError(t, err)
	f.backfill()
	require.Equal(t, 3, count(1), "version 1's executions stay")
	require.Equal(t, 3, count(2), "version 2 ran the b events; the a events already had their execution")
	var total, events int
	require.NoError(t, f.app.Pool.QueryRow(f.ctx, `SELECT count(*), count(DISTINCT event_id) FROM executions WHERE action_id = $1`, id).Scan(&total, &events))
	require.Equal(t, total, events)
	_ = session.Open
}

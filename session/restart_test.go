package session_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
)

// newProcess builds a dispatcher as a freshly started process would: its
// own action store (no compiled cache) and no trigger index yet.
func (f *fixture) newProcess(batch int) *session.Dispatcher {
	actions := action.NewStore(f.app.Pool, f.clock, f.app.Kinds)
	d := session.NewDispatcher(f.app.Pool, actions, f.clock, f.log)
	d.Batch = batch
	return d
}

// sessionWant is what one account's session must end with: the account
// event as its origin (S2: the start that creates a session is not one of
// its inputs) and its entries as inputs, in commit order.
type sessionWant struct {
	origin uuid.UUID
	inputs []uuid.UUID
}

// workload writes accounts accounts, each with entries entries, interleaved,
// plus events no trigger matches. It returns what the monitor's session of
// each account must end with.
func workload(f *fixture, accounts, entries int) map[string]*sessionWant {
	want := map[string]*sessionWant{}
	ids := make([]string, accounts)
	for i := range ids {
		ids[i] = uuid.NewString()
		want[ids[i]] = &sessionWant{origin: f.put("account", ids[i], account(ids[i])).ID}
	}
	for j := range entries {
		for i, id := range ids {
			w := want[id]
			w.inputs = append(w.inputs, f.put("entry", fmt.Sprintf("%d-%d", i, j), entry(id, j)).ID)
		}
		f.put("noise", fmt.Sprint(j), `{}`)
	}
	return want
}

// requireDeliveredOnce checks every account's session was created by its
// account event and every wanted entry reached it exactly once, in commit
// order, and nothing else did.
func requireDeliveredOnce(t *testing.T, f *fixture, monitorID uuid.UUID, want map[string]*sessionWant) {
	t.Helper()
	for id, w := range want {
		s := f.session(monitorID, id)
		require.Equal(t, &w.origin, s.OriginEventID, "session %s", id)
		var got []uuid.UUID
		for _, d := range f.delivered(s) {
			got = append(got, d.Event)
		}
		require.Equal(t, w.inputs, got, "session %s", id)
	}
	require.Equal(t, len(want), f.sessionCount(monitorID))
	require.Empty(t, f.intake(monitorID))
	require.Equal(t, f.head(), f.cursor(), "the cursor is at the ledger head")
}

// HARD-PARTS 2: a dispatcher stopped halfway and a new process taking over
// deliver every event exactly once, and the cursor ends at the head.
func TestExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	want := workload(f, 5, 4) // 5 starts + 20 entries + 4 noise = 29 events

	first := f.newProcess(7)
	for range 2 {
		n, err := first.DispatchOnce(f.ctx)
		require.NoError(t, err)
		require.Equal(t, 7, n)
	}
	require.EqualValues(t, 14, f.cursor(), "the cursor moved with each committed batch")

	second := f.newProcess(7)
	require.Equal(t, 15, dispatchAll(t, f.ctx, second))
	requireDeliveredOnce(t, f, monitorID, want)

	// The old process waking up again finds nothing left.
	require.Zero(t, dispatchAll(t, f.ctx, first))
	requireDeliveredOnce(t, f, monitorID, want)
}

// HARD-PARTS 2: a batch that fails halfway (the process dies mid-batch)
// leaves neither inputs nor a moved cursor behind; the next process redoes
// the whole batch, once.
func TestExactlyOnceAfterFailedBatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	want := workload(f, 3, 3)

	// Make the 5th input of the run fail, after earlier inputs of the same
	// batch were written: the first batch (3 accounts, 2 entries) delivers
	// 2 inputs, the second (4 entries, 1 noise) fails at its third entry.
	_, err := f.app.Pool.Exec(f.ctx, `
		CREATE FUNCTION crash() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT count(*) FROM session_inputs) >= 4 THEN RAISE EXCEPTION 'simulated crash'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER crash BEFORE INSERT ON session_inputs FOR EACH ROW EXECUTE FUNCTION crash();`)
	require.NoError(t, err)

	d := f.newProcess(5)
	n, err := d.DispatchOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	_, err = d.DispatchOnce(f.ctx)
	require.ErrorContains(t, err, "simulated crash")
	require.EqualValues(t, 5, f.cursor(), "the failed batch did not move the cursor")
	var inputs int
	require.NoError(t, f.app.Pool.QueryRow(f.ctx, `SELECT count(*) FROM session_inputs`).Scan(&inputs))
	require.Equal(t, 2, inputs, "the failed batch left no inputs")

	_, err = f.app.Pool.Exec(f.ctx, `DROP TRIGGER crash ON session_inputs`)
	require.NoError(t, err)
	dispatchAll(t, f.ctx, f.newProcess(5))
	requireDeliveredOnce(t, f, monitorID, want)
}

// HARD-PARTS 2: dispatchers of several processes running at once share the
// cursor: every event is delivered once.
func TestExactlyOnceConcurrentDispatchers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	want := workload(f, 6, 5)
	head := f.head()

	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		d := f.newProcess(4)
		wg.Go(func() {
			// A dispatcher returns 0 while another holds the cursor, so each
			// works until the cursor reaches the head (bounded by ctx).
			for {
				if _, err := d.DispatchOnce(ctx); err != nil {
					errs <- err
					return
				}
				var cur int64
				if err := f.app.Pool.QueryRow(ctx, `SELECT position FROM dispatch_state`).Scan(&cur); err != nil {
					errs <- err
					return
				}
				if cur == head {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireDeliveredOnce(t, f, monitorID, want)
}

// A1, A2: an action's triggers see only events after its from_position,
// the ledger head when it was created, even when the dispatcher had not yet
// reached the earlier events.
func TestActionSeesOnlyEventsAfterItsCreation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := uuid.NewString()
	f.put("account", "before", account(before))
	f.put("entry", "before", entry(before, 1))

	v, err := f.app.Actions.Create(f.ctx, uuid.New(), monitor())
	require.NoError(t, err)
	require.EqualValues(t, 2, v.FromPosition)
	after := uuid.NewString()
	e3 := f.put("account", "after", account(after))
	f.put("entry", "late", entry(before, 2)) // names a session that never started
	require.Zero(t, f.cursor(), "nothing was dispatched before the action appeared")

	f.dispatch()
	f.noSession(v.ActionID, before)
	s := f.session(v.ActionID, after)
	require.Equal(t, &e3.ID, s.OriginEventID)
	require.Empty(t, f.delivered(s), "the start that created it is its origin, not an input (S2)")
	recs := f.intake(v.ActionID)
	require.Len(t, recs, 1)
	require.Equal(t, session.ReasonSessionNotFound, recs[0].Reason)

	// An action created later still sees the events after its own creation only.
	later, err := f.app.Actions.Create(f.ctx, uuid.New(), monitor())
	require.NoError(t, err)
	require.Equal(t, f.head(), later.FromPosition)
	e5 := f.put("account", "after2", account(after))
	f.dispatch()
	require.Equal(t, []delivered{{e5.ID, []string{"opened"}}}, f.delivered(f.session(v.ActionID, after)))
	s = f.session(later.ActionID, after)
	require.Equal(t, &e5.ID, s.OriginEventID)
	require.Empty(t, f.inputs(s))
	f.noSession(later.ActionID, before)
}

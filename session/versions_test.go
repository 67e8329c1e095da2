package session_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// monitorV2 is the monitor with one more start trigger: a vip.inserted
// event also starts a session for its account.
func monitorV2() action.Definition {
	d := monitor()
	d.Config = jsonvalue.Value(`{"agent_id": "monitor-v2"}`)
	d.Triggers = append(d.Triggers, action.Trigger{Name: "vip", Event: `event.type == "vip.inserted"`,
		Session: startRole(`{"account_id": "string(event.data.account_id)"}`)})
	return d
}

func (f *fixture) update(id uuid.UUID, def action.Definition) action.Version {
	f.t.Helper()
	v, err := f.actions().Update(f.ctx, id, def)
	require.NoError(f.t, err)
	return v
}

func (f *fixture) actions() *action.Store { return f.app.Actions }

func (f *fixture) setStatus(id uuid.UUID, status string) {
	f.t.Helper()
	_, err := f.actions().SetStatus(f.ctx, id, status)
	require.NoError(f.t, err)
}

// A2: an update takes effect at the ledger head: with the dispatcher caught
// up, it reloads on the epoch change, and the new trigger starts sessions
// for later events, at the new version; a session started before keeps v1.
func TestA2UpdateAppliesToLaterEvents(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	a, b := uuid.NewString(), uuid.NewString()
	f.put("account", a, account(a))
	f.dispatch() // builds the trigger index at v1

	v := f.update(id, monitorV2())
	require.Equal(t, 2, v.Version)
	require.Equal(t, f.head(), v.FromPosition)
	f.put("vip", b, account(b))
	f.dispatch()

	require.Equal(t, 1, f.session(id, a).Version)
	require.Equal(t, 2, f.session(id, b).Version)
}

// A2: each event is judged by the version current when it committed, even
// when the dispatcher reaches it after the update: v2's new trigger sees
// nothing before the update, and v1's triggers still see everything before.
func TestA2LaggingDispatcherJudgesEventsByTheirVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	before, vipBefore, vipAfter, after := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	f.put("account", before, account(before))
	f.put("vip", vipBefore, account(vipBefore))
	e1 := f.put("entry", "e1", entry(before, 1))
	f.update(id, monitorV2())
	f.put("vip", vipAfter, account(vipAfter))
	f.put("account", after, account(after))
	e2 := f.put("entry", "e2", entry(before, 2))
	f.dispatch()

	s := f.session(id, before)
	require.Equal(t, 1, s.Version, "started by an event before the update")
	require.Equal(t, []delivered{{e1.ID, []string{"entry"}}, {e2.ID, []string{"entry"}}}, f.delivered(s),
		"events already bound for the session keep going to it")
	f.noSession(id, vipBefore)
	require.Equal(t, 2, f.session(id, vipAfter).Version)
	require.Equal(t, 2, f.session(id, after).Version)
	require.Empty(t, f.intake(id))
}

// A2: an update equal to the current definition makes no version; an
// unknown id is NOT_FOUND; an invalid one fails as create fails and
// writes nothing.
func TestA2UpdateIdempotentUnknownInvalid(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	v := f.update(id, monitor())
	require.Equal(t, 1, v.Version)
	f.update(id, monitorV2())
	v = f.update(id, monitorV2())
	require.Equal(t, 2, v.Version)
	vs, err := f.actions().Versions(f.ctx, id)
	require.NoError(t, err)
	require.Len(t, vs, 2)

	_, err = f.actions().Update(f.ctx, uuid.New(), monitor())
	require.Equal(t, fault.NotFound, fault.CodeOf(err))

	bad := monitor()
	bad.Triggers[1].Event = "event.nope("
	bad.Session.Turns.On = []string{"missing"}
	_, createErr := f.actions().Create(f.ctx, uuid.New(), bad)
	_, updateErr := f.actions().Update(f.ctx, id, bad)
	require.Len(t, action.Errors(updateErr), 2)
	require.Equal(t, createErr.Error(), updateErr.Error())
	vs, err = f.actions().Versions(f.ctx, id)
	require.NoError(t, err)
	require.Len(t, vs, 2)
}

// A2: disabling or archiving stops the triggers for events committed after
// the change (events before it are still matched when the dispatcher gets
// to them); enabling again matches events committed after the enabling.
func TestA2StatusStopsAndResumesTriggers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	a := uuid.NewString()
	f.put("account", a, account(a))
	f.dispatch()

	e1 := f.put("entry", "e1", entry(a, 1))
	f.setStatus(id, action.StatusDisabled)
	f.put("entry", "e2", entry(a, 2))
	whileOff := uuid.NewString()
	f.put("account", whileOff, account(whileOff))
	f.dispatch()
	require.Equal(t, []delivered{{e1.ID, []string{"entry"}}}, f.delivered(f.session(id, a)))
	f.noSession(id, whileOff)

	f.setStatus(id, action.StatusActive)
	e3 := f.put("entry", "e3", entry(a, 3))
	f.dispatch()
	require.Equal(t, []delivered{{e1.ID, []string{"entry"}}, {e3.ID, []string{"entry"}}}, f.delivered(f.session(id, a)))

	f.setStatus(id, action.StatusArchived)
	archived := uuid.NewString()
	f.put("account", archived, account(archived))
	f.dispatch()
	f.noSession(id, archived)
	require.Empty(t, f.intake(id))
	require.Equal(t, session.Open, f.session(id, a).Status, "the open session stays open")
}

// A2: setting the status an action has changes nothing (not even where its
// triggers resume); an unknown id is NOT_FOUND, an unknown status BAD_USER_INPUT.
func TestA2SetStatusIdempotentUnknown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	before, err := f.actions().Get(f.ctx, id)
	require.NoError(t, err)
	f.put("account", "x", account(uuid.NewString()))
	got, err := f.actions().SetStatus(f.ctx, id, action.StatusActive)
	require.NoError(t, err)
	require.Equal(t, before, got)

	_, err = f.actions().SetStatus(f.ctx, uuid.New(), action.StatusDisabled)
	require.Equal(t, fault.NotFound, fault.CodeOf(err))
	_, err = f.actions().SetStatus(f.ctx, id, "PAUSED")
	require.Equal(t, fault.BadInput, fault.CodeOf(err))
}

package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// S1, S2, I1: a start creates one session and is its origin, not one of
// its inputs; the same start again is delivered to it; a closed session
// never starts again and takes no resume; a resume naming no session is
// kept as an intake record.
func TestS1S2StartDeliverClose(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	acct := uuid.NewString()

	e1 := f.put("account", "first", account(acct))
	require.Equal(t, 1, f.dispatch())

	s := f.session(monitorID, acct)
	require.Equal(t, session.Open, s.Status)
	require.Equal(t, 1, s.Version)
	require.JSONEq(t, account(acct), string(s.Input))
	require.Equal(t, &e1.ID, s.OriginEventID)
	require.Equal(t, e1.CommitTime, s.StartedAt)
	require.Empty(t, f.delivered(s), "the creating start is the origin, not an input (S2)")

	// S1/S2: the same start (another account.inserted with the same input)
	// goes to the same session, as an input.
	e2 := f.put("account", "second", account(acct))
	f.dispatch()
	s = f.session(monitorID, acct)
	require.Equal(t, 1, f.sessionCount(monitorID))
	require.Equal(t, &e1.ID, s.OriginEventID, "the origin stays the earliest start")
	require.Equal(t, e1.CommitTime, s.StartedAt)
	require.Equal(t, []delivered{{e2.ID, []string{"opened"}}}, f.delivered(s))

	// I1: the input's event resolves to the ledger event and its record.
	in := f.inputs(s)[0]
	evs, err := f.app.Ledger.EventsByID(f.ctx, []uuid.UUID{*in.EventID})
	require.NoError(t, err)
	rec := evs[*in.EventID].RecordAt()
	require.NotNil(t, rec)
	require.Equal(t, "account", rec.Namespace)
	require.Equal(t, "second", rec.Key)
	require.EqualValues(t, 1, rec.Version)
	require.JSONEq(t, account(acct), string(rec.Value))
	require.Equal(t, session.InputPending, in.Status)
	require.Equal(t, len(e2.Data), in.ByteSize)

	// A resume for the open session is delivered.
	e3 := f.put("entry", "e3", entry(acct, 10))
	f.dispatch()
	require.Len(t, f.delivered(f.session(monitorID, acct)), 2)
	require.Equal(t, e3.ID, f.delivered(f.session(monitorID, acct))[1].Event)

	// Closed: a start never opens it again, a resume is not delivered.
	closed, err := f.app.Sessions.Close(f.ctx, monitorID, acct, "fraud confirmed")
	require.NoError(t, err)
	require.Equal(t, session.Cancelled, closed.Status)
	e4 := f.put("account", "third", account(acct))
	e5 := f.put("entry", "e5", entry(acct, 20))
	unknown := uuid.NewString()
	e6 := f.put("entry", "e6", entry(unknown, 30))
	f.dispatch()

	s = f.session(monitorID, acct)
	require.Equal(t, session.Cancelled, s.Status)
	require.Len(t, f.inputs(s), 2, "nothing is delivered to a closed session (T8)")
	require.Equal(t, 1, f.sessionCount(monitorID))
	f.noSession(monitorID, unknown)
	require.Equal(t, []intakeView{
		{e4.ID, "opened", acct, session.ReasonSessionClosed},
		{e5.ID, "entry", acct, session.ReasonSessionClosed},
		{e6.ID, "entry", unknown, session.ReasonSessionNotFound},
	}, f.intakeViews(monitorID))
	require.Equal(t, f.head(), f.cursor())
}

// tiered is an action whose input carries more than its id, so that two
// starts can name one session with different inputs.
func tiered() action.Definition {
	return action.Definition{
		Name: "tiered",
		Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)", "tier": "string(event.data.tier)"}`)},
			{Name: "gold_entry", Event: `event.type == "entry.inserted" && session.input.tier == "gold"`,
				Session: resumeRole("string(event.data.account_id)")},
			{Name: "vip_note", Event: `event.type == "note.inserted" && session.id.startsWith("vip-")`,
				Session: resumeRole("string(event.data.account_id)")},
		},
		Session: &action.SessionDef{
			InputSchema: jsonvalue.Value(`{"type": "object", "properties": {"account_id": {"type": "string"},
				"tier": {"type": "string", "enum": ["gold", "silver"]}}, "required": ["account_id", "tier"], "additionalProperties": false}`),
			ID: "string(session.input.account_id)",
		},
	}
}

// S2, S5: a start with a different input for an open session is a
// conflict, kept as an intake record; the session keeps its input, and a
// later start with the same input (in another key order) is delivered.
func TestS2InputConflict(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(tiered())

	e1 := f.put("account", "a", `{"account_id": "vip-1", "tier": "gold"}`)
	e2 := f.put("account", "b", `{"account_id": "vip-1", "tier": "silver"}`)
	e3 := f.put("account", "c", `{"tier": "gold", "account_id": "vip-1"}`) // same input, other key order
	f.dispatch()

	s := f.session(id, "vip-1")
	require.JSONEq(t, `{"account_id": "vip-1", "tier": "gold"}`, string(s.Input))
	require.Equal(t, &e1.ID, s.OriginEventID)
	require.Equal(t, []delivered{{e3.ID, []string{"opened"}}}, f.delivered(s))
	require.Equal(t, []intakeView{{e2.ID, "opened", "vip-1", session.ReasonInputConflict}}, f.intakeViews(id))
}

// S5: each way a start or resume can fail leaves an intake record with its
// reason, and no session.
func TestS5IntakeReasons(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	named := f.create(action.Definition{
		Name: "named", Kind: "agent.echo",
		Triggers: []action.Trigger{{Name: "person", Event: `event.type == "person.inserted"`,
			Session: startRole(`{"name": "event.data.name"}`)}},
		Session: &action.SessionDef{ID: "string(session.input.name)"},
	})

	notUUID := f.put("account", "a", account("not-a-uuid"))
	noField := f.put("account", "b", `{"owner": "x"}`)
	noID := f.put("entry", "c", `{"amount": 1}`)
	nobody := uuid.NewString()
	notFound := f.put("entry", "d", entry(nobody, 1))
	emptyName := f.put("person", "p1", `{"name": ""}`)
	tooLong := f.put("person", "p2", `{"name": "`+longName+`"}`)
	fine := f.put("person", "p3", `{"name": "ada"}`)
	f.put("other", "x", `{}`) // matches no trigger: no record
	f.dispatch()

	require.Equal(t, []intakeView{
		{notUUID.ID, "opened", "", session.ReasonInputInvalid},
		{noField.ID, "opened", "", session.ReasonMappingFailed},
		{noID.ID, "entry", "", session.ReasonIDFailed},
		{notFound.ID, "entry", nobody, session.ReasonSessionNotFound},
	}, f.intakeViews(monitorID))
	require.Equal(t, []intakeView{
		{emptyName.ID, "person", "", session.ReasonIDFailed},
		{tooLong.ID, "person", "", session.ReasonIDFailed},
	}, f.intakeViews(named))
	require.Zero(t, f.sessionCount(monitorID))
	require.Equal(t, 1, f.sessionCount(named))
	require.Equal(t, &fine.ID, f.session(named, "ada").OriginEventID)
	for _, r := range f.intake(monitorID) {
		require.Equal(t, 1, r.Version)
		require.Equal(t, monitorID, r.ActionID)
	}
}

var longName = strings.Repeat("n", session.MaxIDLen+1)

// S6, T3: an event matching several triggers of one action reaches each
// session once, as one input naming every trigger that matched; it starts a
// turn when any of them is named in turns.on. The event that creates the
// session reaches it once too, as its origin: no other trigger delivers it.
func TestS6OneInputPerSessionAndT3(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(action.Definition{
		Name: "double", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
			{Name: "reopened", Event: `event.type == "account.inserted"`,
				Session: resumeRole("string(event.data.account_id)")},
			{Name: "entry", Event: `event.type == "entry.inserted"`,
				Session: resumeRole("string(event.data.account_id)")},
			{Name: "big_entry", Event: `event.type == "entry.inserted" && event.data.amount > 100`,
				Session: resumeRole("string(event.data.account_id)")},
		},
		Session: &action.SessionDef{ID: "string(session.input.account_id)", Turns: &action.Turns{On: []string{"big_entry"}}},
	})

	acct := uuid.NewString()
	open := f.put("account", "a", account(acct)) // creates the session: its origin, not an input (S2)
	small := f.put("entry", "e1", entry(acct, 5))
	f.dispatch()
	s := f.session(id, acct)
	require.Equal(t, &open.ID, s.OriginEventID)
	require.Equal(t, []delivered{{small.ID, []string{"entry"}}}, f.delivered(s),
		"the creating event reached the session once, as its origin: reopened does not deliver it (S6)")
	require.Nil(t, f.nextTurnAt(s), "no input named in turns.on yet (T3)")

	again := f.put("account", "b", account(acct)) // a later start with the same input: delivered once for both triggers
	big := f.put("entry", "e2", entry(acct, 500))
	dispatchedAt := f.clock.Now()
	f.dispatch()

	require.Equal(t, []delivered{
		{small.ID, []string{"entry"}},
		{again.ID, []string{"opened", "reopened"}},
		{big.ID, []string{"entry", "big_entry"}},
	}, f.delivered(s))
	var starts []bool
	for _, in := range f.inputs(s) {
		starts = append(starts, in.StartsTurn)
	}
	require.Equal(t, []bool{false, false, true}, starts)
	require.Equal(t, &dispatchedAt, f.nextTurnAt(s))
	require.Empty(t, f.intake(id))
}

// T3: with the monitor's turns.on ["entry"], a start input (a second start
// for the open session, S2) waits without making the session runnable; the
// entry starts a turn. Without turns.on every input starts one.
func TestT3StartsTurnFlag(t *testing.T) {
	t.Parallel()
	f := setup(t)
	monitorID := f.create(monitor())
	def := monitor()
	def.Name = "every-input"
	def.Session.Turns = nil
	everyID := f.create(def)

	acct := uuid.NewString()
	f.put("account", "a", account(acct)) // creates both sessions (their origin, S2)
	f.put("account", "b", account(acct)) // a start for the open sessions: an input of each
	f.dispatch()
	m, e := f.session(monitorID, acct), f.session(everyID, acct)
	require.False(t, f.inputs(m)[0].StartsTurn)
	require.Nil(t, f.nextTurnAt(m))
	require.True(t, f.inputs(e)[0].StartsTurn)
	require.Equal(t, ptr(f.clock.Now()), f.nextTurnAt(e))

	firstRunnable := f.clock.Now()
	f.clock.Advance(time.Hour)
	f.put("entry", "e", entry(acct, 1))
	at := f.clock.Now()
	f.dispatch()
	require.True(t, f.inputs(m)[1].StartsTurn)
	require.Equal(t, &at, f.nextTurnAt(m))
	require.True(t, f.inputs(e)[1].StartsTurn)
	require.Equal(t, &firstRunnable, f.nextTurnAt(e), "runnable since the first waiting input")
}

// S2, S6: the event that creates a session is not delivered to it, even by
// a resume trigger defined before the start trigger.
func TestS6CreatingEventNotDeliveredWhateverTheTriggerOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, readsSession := range []bool{false, true} {
		pred := `event.type == "account.inserted"`
		if readsSession {
			pred += ` && session.id != ""`
		}
		id := f.create(action.Definition{
			Name: "resume-first", Kind: "agent.echo",
			Triggers: []action.Trigger{
				{Name: "reopened", Event: pred, Session: resumeRole("string(event.data.account_id)")},
				{Name: "opened", Event: `event.type == "account.inserted"`,
					Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
			},
			Session: &action.SessionDef{ID: "string(session.input.account_id)"},
		})
		acct := uuid.NewString()
		e := f.put("account", "k-"+acct, account(acct))
		f.dispatch()
		s := f.session(id, acct)
		require.Equal(t, &e.ID, s.OriginEventID)
		require.Empty(t, f.delivered(s), "readsSession=%v", readsSession)
		require.Empty(t, f.intake(id), "readsSession=%v", readsSession)
	}
}

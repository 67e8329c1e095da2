package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
)

// versioned is an action whose versions differ in what resumes a session:
// accounts start sessions, and entry.inserted events of the given kind
// resume them (trigger "entry"). turns and window are the session's
// turns.on and turns.window.
func versioned(kind string, on []string, window *string) action.Definition {
	return action.Definition{
		Name: "versioned", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
			{Name: "entry", Event: fmt.Sprintf(`event.type == "entry.inserted" && event.data.kind == %q`, kind),
				Session: resumeRole("string(event.data.account_id)")},
		},
		Session: &action.SessionDef{ID: "string(session.input.account_id)",
			Turns: &action.Turns{On: on, Window: window}},
	}
}

// kindEntry is the data of an entry.inserted event of a kind for account id.
func kindEntry(id, kind string) string {
	return fmt.Sprintf(`{"account_id": %q, "kind": %q}`, id, kind)
}

// A2, S4: a session is resumed by the resume triggers of the version it
// started with, never by another version's: after an update, an event that
// only v1's trigger matches reaches the v1 session and not the v2 session,
// and the other way round. Whether the input starts a turn and its window
// are its session's version's (T3, T4).
func TestA2S4ResumeByTheSessionsVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(versioned("a", nil, ptr("5s")))
	old, nu := uuid.NewString(), uuid.NewString()
	f.put("account", old, account(old))
	f.dispatch()

	f.update(id, versioned("b", []string{"opened"}, nil))
	f.put("account", nu, account(nu))
	oldA := f.put("entry", "1", kindEntry(old, "a"))
	f.put("entry", "2", kindEntry(nu, "a"))
	f.put("entry", "3", kindEntry(old, "b"))
	nuB := f.put("entry", "4", kindEntry(nu, "b"))
	f.dispatch()

	so, sn := f.session(id, old), f.session(id, nu)
	require.Equal(t, 1, so.Version)
	require.Equal(t, 2, sn.Version)
	require.Equal(t, []delivered{{oldA.ID, []string{"entry"}}}, f.delivered(so), "v1's trigger resumes the v1 session")
	require.Equal(t, []delivered{{nuB.ID, []string{"entry"}}}, f.delivered(sn), "v2's trigger resumes the v2 session")

	require.True(t, f.inputs(so)[0].StartsTurn, "v1 lets every input start a turn")
	require.Equal(t, ptr(f.clock.Now().Add(5*time.Second)), f.nextTurnAt(so), "after v1's window")
	require.False(t, f.inputs(sn)[0].StartsTurn, "v2's turns.on names only the start")
	require.Nil(t, f.nextTurnAt(sn))
	require.Empty(t, f.intake(id))
}

// A2, S4: the same holds for resume predicates that read the session: the
// v1 session is judged by v1's terms on session.input, the v2 session by
// v2's, and a trigger never looks past a session of another version.
func TestA2S4SessionTermsOfTheSessionsVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tiers := func(tier string) action.Definition {
		return action.Definition{
			Name: "tiers", Kind: "agent.echo",
			Triggers: []action.Trigger{
				{Name: "opened", Event: `event.type == "account.inserted"`,
					Session: startRole(`{"account_id": "string(event.data.account_id)", "tier": "string(event.data.tier)"}`)},
				{Name: "note", Event: fmt.Sprintf(`event.type == "note.inserted" && session.input.tier == %q`, tier),
					Session: resumeRole("string(event.data.account_id)")},
			},
			Session: &action.SessionDef{ID: "string(session.input.account_id)"},
		}
	}
	id := f.create(tiers("gold"))
	f.put("account", "1", `{"account_id": "v1-gold", "tier": "gold"}`)
	f.dispatch()
	f.update(id, tiers("silver"))
	f.put("account", "2", `{"account_id": "v2-gold", "tier": "gold"}`)
	f.put("account", "3", `{"account_id": "v2-silver", "tier": "silver"}`)
	notes := map[string]string{}
	for _, sid := range []string{"v1-gold", "v2-gold", "v2-silver"} {
		notes[sid] = f.put("note", sid, `{"account_id": "`+sid+`"}`).ID.String()
	}
	f.dispatch()

	got := map[string][]string{}
	for _, sid := range []string{"v1-gold", "v2-gold", "v2-silver"} {
		for _, d := range f.delivered(f.session(id, sid)) {
			got[sid] = append(got[sid], d.Triggers[0]+" "+d.Event.String())
		}
	}
	require.Equal(t, map[string][]string{
		"v1-gold":   {"note " + notes["v1-gold"]},   // v1: gold
		"v2-silver": {"note " + notes["v2-silver"]}, // v2: silver
	}, got, "v2-gold is gold, which v2 rules out; v1's terms never see it")
	require.Empty(t, f.intake(id))
}

// A2, S2: a start trigger that delivers to an open session with the same
// input is one of the session's triggers too: after an update renames it,
// a start event reaches the v1 session under v1's name and the v2 session
// under v2's, and only v2 creates new sessions.
func TestA2S2StartDeliversByTheSessionsVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	chat := func(trigger string) action.Definition {
		return action.Definition{
			Name: "chat", Kind: "agent.echo",
			Triggers: []action.Trigger{{Name: trigger, Event: `event.type == "message.inserted"`,
				Session: startRole(`{"k": "string(event.data.k)"}`)}},
			Session: &action.SessionDef{ID: "string(session.input.k)"},
		}
	}
	id := f.create(chat("msg"))
	f.put("message", "1", `{"k": "old"}`)
	f.dispatch()
	f.update(id, chat("message"))
	f.put("message", "2", `{"k": "new"}`)
	toOld := f.put("message", "3", `{"k": "old"}`)
	toNew := f.put("message", "4", `{"k": "new"}`)
	f.dispatch()

	require.Equal(t, []delivered{{toOld.ID, []string{"msg"}}}, f.delivered(f.session(id, "old")))
	sn := f.session(id, "new")
	require.Equal(t, 2, sn.Version)
	require.Equal(t, []delivered{{toNew.ID, []string{"message"}}}, f.delivered(sn))
	require.Empty(t, f.intake(id))
}

// A2, S5: intake records come from the version that covers the event
// alone, so an update does not double them: a resume naming a missing or
// closed session after the update is recorded once, by v2, whichever
// version the closed session had.
func TestA2S5IntakeRecordsNotDoubledByUpdate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	open, closed := uuid.NewString(), uuid.NewString()
	f.put("account", open, account(open))
	f.put("account", closed, account(closed))
	f.dispatch()
	_, err := f.app.Sessions.Close(f.ctx, id, closed, "done")
	require.NoError(t, err)

	v2 := monitor()
	v2.Name = "early-fraud-detector-v2"
	f.update(id, v2) // the same triggers: v1's still apply to the open v1 session
	missing := uuid.NewString()
	eMissing := f.put("entry", "1", entry(missing, 1))
	eClosed := f.put("entry", "2", entry(closed, 2))
	eOpen := f.put("entry", "3", entry(open, 3))
	f.dispatch()

	require.Equal(t, []intakeView{
		{eMissing.ID, "entry", missing, session.ReasonSessionNotFound},
		{eClosed.ID, "entry", closed, session.ReasonSessionClosed},
	}, f.intakeViews(id))
	for _, r := range f.intake(id) {
		require.Equal(t, 2, r.Version, "recorded by the covering version")
	}
	require.Equal(t, []delivered{{eOpen.ID, []string{"entry"}}}, f.delivered(f.session(id, open)), "once (S6)")
}

// A2, S6: an event reaches a v1 session once when two of v1's triggers
// match it after an update, listing both triggers; v2's triggers (which
// would match too) take no part.
func TestA2S6TwoTriggersOfTheSessionsVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	def := monitor()
	def.Triggers = append(def.Triggers, action.Trigger{Name: "big", Event: `event.type == "entry.inserted" && event.data.amount > 100`,
		Session: resumeRole("string(event.data.account_id)")})
	id := f.create(def)
	acct := uuid.NewString()
	f.put("account", acct, account(acct))
	f.dispatch()

	v2 := monitor()
	v2.Triggers[1].Name = "ledger_entry"
	v2.Session.Turns.On = []string{"ledger_entry"}
	f.update(id, v2)
	big := f.put("entry", "1", entry(acct, 500))
	small := f.put("entry", "2", entry(acct, 5))
	f.dispatch()

	require.Equal(t, []delivered{{big.ID, []string{"entry", "big"}}, {small.ID, []string{"entry"}}}, f.delivered(f.session(id, acct)))
	require.Empty(t, f.intake(id))
}

// A2: a disabled action resumes nothing, for sessions of any version, with
// events committed after the change; an event committed before it still
// reaches the session by its version's trigger, and enabling the action
// again resumes both sessions by their own versions' triggers.
func TestA2DisabledActionResumesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(versioned("a", nil, nil))
	old, nu := uuid.NewString(), uuid.NewString()
	f.put("account", old, account(old))
	f.dispatch()
	f.update(id, versioned("b", nil, nil))
	f.put("account", nu, account(nu))
	f.dispatch()

	before := f.put("entry", "1", kindEntry(old, "a"))
	f.setStatus(id, action.StatusDisabled)
	f.put("entry", "2", kindEntry(old, "a"))
	f.put("entry", "3", kindEntry(nu, "b"))
	f.dispatch()
	require.Equal(t, []delivered{{before.ID, []string{"entry"}}}, f.delivered(f.session(id, old)))
	require.Empty(t, f.delivered(f.session(id, nu)))

	f.setStatus(id, action.StatusActive)
	oldAgain := f.put("entry", "4", kindEntry(old, "a"))
	nuAgain := f.put("entry", "5", kindEntry(nu, "b"))
	f.put("entry", "6", kindEntry(nu, "a"))
	f.dispatch()
	require.Equal(t, []delivered{{before.ID, []string{"entry"}}, {oldAgain.ID, []string{"entry"}}}, f.delivered(f.session(id, old)))
	require.Equal(t, []delivered{{nuAgain.ID, []string{"entry"}}}, f.delivered(f.session(id, nu)))
	require.Empty(t, f.intake(id))
}

// A2: a lagging dispatcher starts a v1 session from an event before the
// update and keeps resuming it by v1's trigger after it, also when the
// trigger index is rebuilt (another action's creation changes the epoch)
// once the cursor is past v1's events.
func TestA2PinnedVersionSurvivesReload(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(versioned("a", nil, nil))
	acct := uuid.NewString()
	f.put("account", acct, account(acct))
	f.update(id, versioned("b", nil, nil))
	first := f.put("entry", "1", kindEntry(acct, "a"))
	f.put("entry", "2", kindEntry(acct, "b"))
	f.dispatch()
	require.Equal(t, 1, f.session(id, acct).Version)

	f.create(pinned(0)) // new epoch: the index is rebuilt from Active
	second := f.put("entry", "3", kindEntry(acct, "a"))
	f.put("entry", "4", kindEntry(acct, "b"))
	f.dispatch()
	require.Equal(t, []delivered{{first.ID, []string{"entry"}}, {second.ID, []string{"entry"}}}, f.delivered(f.session(id, acct)))
}

// activeVersions lists the versions Active returns for action id, each
// with whether it covers and whether it still reaches its pinned sessions
// at position pos.
func (f *fixture) activeVersions(id uuid.UUID, pos int64) []string {
	f.t.Helper()
	all, err := f.actions().Active(f.ctx, f.app.Pool)
	require.NoError(f.t, err)
	var out []string
	for _, c := range all {
		if c.ActionID == id {
			out = append(out, fmt.Sprintf("v%d covers=%t pinned=%t", c.Version, c.Covers(pos), c.CoversPinned(pos)))
		}
	}
	return out
}

// A2: Active returns a version that covers no more events only while it has
// open sessions, and then only for them; a disabled action's versions drop
// out once the dispatcher is past the change.
func TestA2ActiveKeepsOldVersionsWhileSessionsOpen(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	acct := uuid.NewString()
	f.put("account", acct, account(acct))
	f.dispatch()
	v2 := monitor()
	v2.Name = "v2"
	f.update(id, v2)
	f.dispatch()
	next := f.head() + 1
	require.Equal(t, []string{"v1 covers=false pinned=true", "v2 covers=true pinned=true"}, f.activeVersions(id, next))

	_, err := f.app.Sessions.Close(f.ctx, id, acct, "done")
	require.NoError(t, err)
	require.Equal(t, []string{"v2 covers=true pinned=true"}, f.activeVersions(id, next), "no open session at v1")

	other := uuid.NewString()
	f.put("account", other, account(other)) // a v2 session, once dispatched
	v3 := monitor()
	v3.Name = "v3"
	f.update(id, v3)
	pending := f.put("entry", "1", entry(other, 1))
	f.setStatus(id, action.StatusDisabled)
	require.Equal(t, []string{"v2 covers=false pinned=true", "v3 covers=true pinned=true"}, f.activeVersions(id, pending.Position),
		"v2 still covers the account event the dispatcher has not reached; the entry is v3's, and v2's for v2's sessions")
	require.Equal(t, []string{"v2 covers=false pinned=false", "v3 covers=false pinned=false"}, f.activeVersions(id, pending.Position+1),
		"nothing after the disabling")
	f.dispatch()
	require.Empty(t, f.activeVersions(id, f.head()+1), "disabled, and the dispatcher is past the change")
}

// A2: versions whose positions are all 0 (created and updated on an empty
// ledger) cover nothing once replaced, yet v1 still reaches a session
// written at v1 by another writer (in a new process, whose index is built
// then).
func TestA2ActiveReplacedOnEmptyLedger(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())
	v2 := monitor()
	v2.Name = "v2"
	f.update(id, v2)
	require.Equal(t, []string{"v2 covers=true pinned=true"}, f.activeVersions(id, 1))

	_, err := f.app.Pool.Exec(f.ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, created_at, updated_at)
		VALUES ($1, 'imported', 1, '{}', 'OPEN', $2, $2, $2)`, id, f.clock.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"v1 covers=false pinned=true", "v2 covers=true pinned=true"}, f.activeVersions(id, 1))
}

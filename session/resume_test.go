package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
)

// S4: a resume predicate's terms on session.input and session.id are
// checked against the session the event names; a session they rule out
// gets nothing, and that is a non-match, not an intake record.
func TestS4ResumeTermsCheckedPerSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(tiered())

	f.put("account", "1", `{"account_id": "vip-1", "tier": "gold"}`)
	f.put("account", "2", `{"account_id": "std-1", "tier": "gold"}`)
	f.put("account", "3", `{"account_id": "vip-2", "tier": "silver"}`)
	entries := map[string]string{}
	notes := map[string]string{}
	for _, sid := range []string{"vip-1", "std-1", "vip-2"} {
		entries[sid] = f.put("entry", sid, `{"account_id": "`+sid+`"}`).ID.String()
		notes[sid] = f.put("note", sid, `{"account_id": "`+sid+`"}`).ID.String()
	}
	unknown := f.put("note", "x", `{"account_id": "vip-9"}`)
	f.dispatch()

	got := map[string][]string{}
	for _, sid := range []string{"vip-1", "std-1", "vip-2"} {
		for _, d := range f.delivered(f.session(id, sid)) { // the start is the origin, not an input (S2)
			got[sid] = append(got[sid], d.Triggers[0]+" "+d.Event.String())
		}
	}
	require.Equal(t, map[string][]string{
		"vip-1": {"gold_entry " + entries["vip-1"], "vip_note " + notes["vip-1"]},
		"std-1": {"gold_entry " + entries["std-1"]}, // session.id rules the note out
		"vip-2": {"vip_note " + notes["vip-2"]},     // session.input.tier rules the entry out
	}, got)
	require.Equal(t, []intakeView{{unknown.ID, "vip_note", "vip-9", session.ReasonSessionNotFound}}, f.intakeViews(id))
	diags, err := f.app.Sessions.Diagnostics(f.ctx, id)
	require.NoError(t, err)
	require.Empty(t, diags)
}

// S4, S5: an event that fails a resume predicate's event-only terms does
// not match, so it must not become an intake record because the session
// it would name is missing or its id does not evaluate.
func TestS4EventTermsDecideBeforeSessionLookup(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(action.Definition{
		Name: "big-gold", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)", "tier": "string(event.data.tier)"}`)},
			{Name: "big_gold", Event: `event.type == "entry.inserted" && event.data.amount > 100 && session.input.tier == "gold"`,
				Session: resumeRole("string(event.data.account_id)")},
		},
		Session: &action.SessionDef{ID: "string(session.input.account_id)"},
	})
	f.put("account", "1", `{"account_id": "a1", "tier": "gold"}`)
	f.put("entry", "small-unknown", `{"account_id": "nobody", "amount": 5}`) // event terms fail
	f.put("entry", "small-no-id", `{"amount": 5}`)                           // event terms fail
	big := f.put("entry", "big", `{"account_id": "a1", "amount": 500}`)
	f.dispatch()

	require.Empty(t, f.intake(id))
	require.Equal(t, big.ID, f.delivered(f.session(id, "a1"))[0].Event, "the only input: the start event is the origin (S2)")
}

// A predicate that fails to evaluate (a missing field) is a non-match: no
// session, no input, no intake record; a diagnostic row per trigger counts
// the failures across batches and keeps the latest.
func TestPredicateErrorsAreCountedNonMatches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(action.Definition{
		Name: "regional", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "opened", Event: `event.type == "account.inserted" && event.data.region == "eu"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
			{Name: "large", Event: `event.type == "entry.inserted" && event.data.amount > 10`,
				Session: resumeRole("string(event.data.account_id)")},
		},
		Session: &action.SessionDef{ID: "string(session.input.account_id)"},
	})

	f.put("account", "no-region", `{"account_id": "a0"}`)
	f.put("account", "eu", `{"account_id": "a1", "region": "eu"}`)
	f.put("entry", "1", `{"account_id": "a1"}`)
	f.put("entry", "2", `{"account_id": "a1", "amount": 50}`)
	f.dispatch()

	diagByTrigger := func() map[string]session.Diagnostic {
		t.Helper()
		ds, err := f.app.Sessions.Diagnostics(f.ctx, id)
		require.NoError(t, err)
		out := map[string]session.Diagnostic{}
		for _, d := range ds {
			require.Equal(t, 1, d.Version)
			out[d.Trigger] = d
		}
		return out
	}
	ds := diagByTrigger()
	require.Len(t, ds, 2)
	require.EqualValues(t, 1, ds["opened"].Count)
	require.Contains(t, ds["opened"].LastMessage, "region")
	require.EqualValues(t, 1, ds["large"].Count)
	require.Contains(t, ds["large"].LastMessage, "amount")

	f.noSession(id, "a0")
	s := f.session(id, "a1")
	require.Len(t, f.inputs(s), 1, "the entry with an amount (the start event is the origin, S2)")
	require.Empty(t, f.intake(id))

	// The count grows across batches and within one; the latest event is kept.
	f.put("entry", "3", `{"account_id": "a1"}`)
	f.dispatch()
	f.put("entry", "4", `{"account_id": "a1"}`)
	last := f.put("entry", "5", `{"account_id": "a1", "note": "no amount"}`)
	at := f.clock.Now()
	f.dispatch()
	ds = diagByTrigger()
	require.EqualValues(t, 4, ds["large"].Count)
	require.Equal(t, last.ID, ds["large"].LastEventID)
	require.Equal(t, at, ds["large"].LastAt)
	require.EqualValues(t, 1, ds["opened"].Count)
	require.Len(t, f.inputs(s), 1, "still only the entry with an amount")
}

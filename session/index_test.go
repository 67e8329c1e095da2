package session

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// compileAction compiles a one-session action whose triggers have the
// given predicates (the first starts, the others resume).
func compileAction(t *testing.T, fromPosition int64, predicates ...string) *action.Compiled {
	t.Helper()
	def := action.Definition{Name: "a", Kind: "agent.echo",
		Session: &action.SessionDef{ID: "string(session.input.k)"}}
	for i, p := range predicates {
		tr := action.Trigger{Name: fmt.Sprintf("t%d", i), Event: p}
		if i == 0 {
			tr.Session = &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"k": "string(event.data.k)"}`)}}
		} else {
			tr.Session = &action.TriggerRole{Resume: &action.ResumeRole{ID: "string(event.data.k)"}}
		}
		def.Triggers = append(def.Triggers, tr)
	}
	c, err := action.Compile(def, nil)
	require.NoError(t, err)
	c.ActionID, c.Version, c.FromPosition = uuid.New(), 1, fromPosition
	return c
}

// candidateNames lists, per candidate action, the names of its candidate triggers.
func candidateNames(ix *triggerIndex, typ string, pos int64) map[*action.Compiled][]string {
	out := map[*action.Compiled][]string{}
	for _, ar := range ix.candidates(ledger.Event{Type: typ, Position: pos}) {
		for _, tr := range ar.triggers {
			out[ar.action] = append(out[ar.action], tr.Name)
		}
	}
	return out
}

// The trigger index offers an event only the triggers whose predicates pin
// its type, plus those that pin none; actions pinned to other types are
// never evaluated, however many there are. Triggers keep definition order
// within an action, and an action version sees only events after its
// from_position.
func TestTriggerIndexCandidates(t *testing.T) {
	t.Parallel()
	var active []*action.Compiled
	for range 200 {
		active = append(active, compileAction(t, 0, `event.type == "other.x"`))
	}
	monitor := compileAction(t, 0,
		`event.type == "account.inserted"`,
		`event.type == "entry.inserted"`,
		`event.data.kind == "audit" && event.type != "noise.x"`, // pins no type
		`event.type in ["entry.inserted", "entry.updated"] && event.data.amount > 100`,
	)
	late := compileAction(t, 10, `event.type == "entry.inserted"`)
	active = append(active, monitor, late)
	ix := buildIndex(active)

	require.Equal(t, map[*action.Compiled][]string{
		monitor: {"t1", "t2", "t3"},
		late:    {"t0"},
	}, candidateNames(ix, "entry.inserted", 11))
	require.Equal(t, map[*action.Compiled][]string{monitor: {"t1", "t2", "t3"}}, candidateNames(ix, "entry.inserted", 10),
		"an event at from_position predates the version")
	require.Equal(t, map[*action.Compiled][]string{monitor: {"t2", "t3"}}, candidateNames(ix, "entry.updated", 11))
	require.Equal(t, map[*action.Compiled][]string{monitor: {"t2"}}, candidateNames(ix, "unrelated.x", 11))

	others := candidateNames(ix, "other.x", 11)
	require.Len(t, others, 201, "every pinned action and the monitor's unpinned trigger")
	require.Equal(t, []string{"t2"}, others[monitor])
}

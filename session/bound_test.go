package session_test

import (
	"encoding/json"
	"log/slog"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
)

// heapAllocated returns the bytes the process has allocated on the heap so far.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestRefusedEvaluationIsRecordedOnce_Issue10 covers issue 10 item 3 in the
// dispatcher: an event whose evaluation the size limit refuses (with a
// definition that passes the static cost check) is a trigger diagnostic
// or an intake record once, the cursor moves past it in the same batch,
// later events are dispatched, and a new dispatcher (a restart) does not
// evaluate it again. The heap grows by megabytes where the unchecked
// replace would build 1.6 GB per trigger. Not parallel: it measures the
// process's allocations.
func TestRefusedEvaluationIsRecordedOnce_Issue10(t *testing.T) {
	f := setup(t)
	// Quadratic in each element only, so the static check lets it through;
	// 40 KB elements make replace want 1.6 GB.
	const blowup = `event.data.items.map(i, i.replace("", i)).size() > 0`
	mapping, err := json.Marshal(map[string]string{"account_id": "string(" + blowup + ")"})
	require.NoError(t, err)
	id := f.create(action.Definition{
		Name: "blowup", Kind: "agent.echo",
		Triggers: []action.Trigger{
			{Name: "by_predicate", Event: `event.type == "blob.inserted" && ` + blowup,
				Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
			{Name: "by_mapping", Event: `event.type == "blob.inserted"`,
				Session: startRole(string(mapping))},
			{Name: "opened", Event: `event.type == "account.inserted"`,
				Session: startRole(`{"account_id": "string(event.data.account_id)"}`)},
		},
		Session: &action.SessionDef{ID: "string(session.input.account_id)"},
	})

	big, err := json.Marshal(map[string]any{"account_id": "b1", "items": []string{strings.Repeat("a", 40_000)}})
	require.NoError(t, err)
	blob := f.put("blob", "b1", string(big))
	after := f.put("account", "a1", account("a1"))

	before := heapAllocated()
	require.Equal(t, 2, f.dispatch())
	grown := heapAllocated() - before
	t.Logf("heap allocations while dispatching: %d bytes", grown)
	require.Less(t, grown, uint64(64<<20), "dispatching allocated %d bytes", grown)
	require.Equal(t, f.head(), f.cursor(), "the cursor moved past the refused event")

	ds, err := f.app.Sessions.Diagnostics(f.ctx, id)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "by_predicate", ds[0].Trigger)
	require.EqualValues(t, 1, ds[0].Count)
	require.Equal(t, blob.ID, ds[0].LastEventID)
	require.Contains(t, ds[0].LastMessage, "size limit")
	require.Contains(t, ds[0].LastMessage, "replace would need at least 1600080000 bytes")

	recs := f.intake(id)
	require.Len(t, recs, 1)
	require.Equal(t, blob.ID, recs[0].EventID)
	require.Equal(t, "by_mapping", recs[0].Trigger)
	require.Equal(t, session.ReasonMappingFailed, recs[0].Reason)
	require.Contains(t, recs[0].Message, "size limit")

	f.noSession(id, "b1")
	require.Equal(t, after.ID, *f.session(id, "a1").OriginEventID, "the event after it was dispatched")

	// A restart: a new dispatcher finds nothing to do; the refused event is
	// not evaluated again.
	d := session.NewDispatcher(f.app.Pool, f.app.Actions, f.clock, slog.New(slog.DiscardHandler))
	require.Zero(t, dispatchAll(t, f.ctx, d))
	ds, err = f.app.Sessions.Diagnostics(f.ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, ds[0].Count)
	require.Len(t, f.intake(id), 1)
}

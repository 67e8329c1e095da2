package server_test

import (
	"encoding/json"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// heapAllocs returns the bytes the process has allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestCELAllocationBounded_Issue10 sends issue 10 item 3's input over HTTP
// to a running service. The issue's predicate is refused at createAction
// with INVALID_EXPRESSION naming the field and giving the estimate and the
// limit. A predicate that still passes create but would build 1.6 GB on a
// 40 KB string is refused at evaluation before it allocates: the putValue
// that triggers it leaves a trigger diagnostic, the process allocates a few
// megabytes, and the service answers the next request. Not parallel: it
// measures the process's allocations.
func TestCELAllocationBounded_Issue10(t *testing.T) {
	e := newEnv(t)

	def := monitorDef()
	trigger(def, 0)["event"] = `event.data.s.replace("", event.data.s).size() > 0`
	r := e.do(t, createActionOp, map[string]any{"id": uuid.NewString(), "input": def})
	fe := requireError(t, r, "INVALID_EXPRESSION", "input.triggers[0].event")
	require.Contains(t, fe.Message, "may cost 1099513829796 units")
	require.Contains(t, fe.Message, "the limit of one evaluation is 1000000")

	actionID := uuid.NewString()
	def = monitorDef()
	trigger(def, 0)["event"] = `event.type == "blob.inserted" && event.data.items.map(i, i.replace("", i)).size() > 0`
	e.ok(t, createActionOp, map[string]any{"id": actionID, "input": def}, nil)

	before := heapAllocs()
	ev := e.put(t, "blob", "b1", map[string]any{"account_id": uuid.NewString(), "items": []string{strings.Repeat("a", 40_000)}}, "")
	var out struct {
		Actions struct {
			Action struct {
				TriggerDiagnostics []struct {
					Trigger     string
					Count       json.Number
					LastEvent   struct{ ID string }
					LastMessage string
				}
			}
		}
	}
	poll(t, "a trigger diagnostic", func() bool {
		e.ok(t, `query($a: UUID!) { actions { action(id: $a) {
		    triggerDiagnostics { trigger count lastEvent { id } lastMessage } } } }`, map[string]any{"a": actionID}, &out)
		return len(out.Actions.Action.TriggerDiagnostics) > 0
	})
	grown := heapAllocs() - before
	t.Logf("heap allocations while the event was dispatched: %d bytes", grown)
	require.Less(t, grown, uint64(64<<20), "the service allocated %d bytes", grown)

	d := out.Actions.Action.TriggerDiagnostics[0]
	require.Equal(t, "opened", d.Trigger)
	require.Equal(t, json.Number("1"), d.Count)
	require.Equal(t, ev.Event.ID, d.LastEvent.ID)
	require.Contains(t, d.LastMessage, "size limit")
	e.requireAlive(t)
}

package server_test

import (
	"encoding/json"
	"fmt"

	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 14: a write's answer carries the event it appended, so asking for
// the event costs no read: putValue is its group's one round trip (BEGIN,
// the write and COMMIT together) however many event fields it asks for, and
// the event it answers is the one stored (L2).
func TestPutValueAnswersItsEventWithoutReadingIt(t *testing.T) {
	t.Parallel()
	e, proxy := newProxiedEnv(t)
	const op = `mutation($k: String!, $v: JSON!) { ledger { putValue(namespace: "entry", key: $k, value: $v) {
	  key version value event { id position eventType data commitTime record { ... on KVValue { namespace key version } } } } } }`
	type answer struct {
		Ledger struct {
			PutValue struct {
				Key     string
				Version int
				Event   struct {
					ID         string
					Position   string
					EventType  string
					Data       map[string]any
					CommitTime string
					Record     struct {
						Namespace, Key string
						Version        int
					}
				}
			}
		}
	}
	// The first write prepares the statements on the connections it uses.
	notifier := e.app.Ledger.Notifier()
	e.ok(t, op, map[string]any{"k": "warm", "v": map[string]any{"n": 0}}, nil)
	notifier.Flush()
	// The fewest of five: a connection idle for a second is pinged before
	// use, one more round trip that a loaded machine can add to any run.
	var got answer
	best := int64(-1)
	for i := range 5 {
		before := proxy.RoundTrips()
		e.ok(t, op, map[string]any{"k": fmt.Sprintf("e%d", i+1), "v": map[string]any{"n": 1}}, &got)
		notifier.Flush()
		if n := proxy.RoundTrips() - before; best < 0 || n < best {
			best = n
		}
	}
	require.EqualValues(t, 2, best,
		"BEGIN, the write and COMMIT together, then the notification of the new head; no read of the event")

	pv := got.Ledger.PutValue
	require.Equal(t, "entry.inserted", pv.Event.EventType)
	require.Equal(t, map[string]any{"n": json.Number("1")}, pv.Event.Data)
	require.Equal(t, "entry", pv.Event.Record.Namespace)
	require.Equal(t, "e5", pv.Event.Record.Key)
	require.Equal(t, 1, pv.Event.Record.Version)

	// The same event read back from the ledger.
	var read struct {
		Ledger struct {
			Event struct {
				ID, Position, EventType, CommitTime string
			}
		}
	}
	e.ok(t, `query($id: UUID!) { ledger { event(id: $id) { id position eventType commitTime } } }`,
		map[string]any{"id": pv.Event.ID}, &read)
	require.Equal(t, pv.Event.ID, read.Ledger.Event.ID)
	require.Equal(t, pv.Event.Position, read.Ledger.Event.Position)
	require.Equal(t, pv.Event.EventType, read.Ledger.Event.EventType)
	require.Equal(t, pv.Event.CommitTime, read.Ledger.Event.CommitTime)
}

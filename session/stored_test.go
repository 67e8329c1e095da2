package session_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// TestStoredDefinitionLoadsWithoutLaterChecks_Issue10: the checks that a
// definition can work at all apply when it is stored, not when a stored
// one is loaded, so a version stored before them (here written into
// action_versions directly) still compiles and can be closed, listed and
// replaced.
func TestStoredDefinitionLoadsWithoutLaterChecks_Issue10(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(monitor())

	old := monitor()
	old.Triggers[0].Event = `event.type == "account.inserted" && 1 / 0 == 1`
	old.Session.InputSchema = jsonvalue.Value(`{"type": "object", "properties": {"account_id": {"type": "string", "const": 7}}, "required": ["account_id"]}`)
	ends := "session.started_at - duration('1h')"
	old.Session.Ends = &ends
	_, err := action.Compile(old, nil)
	require.Error(t, err, "refused when stored")

	raw, err := json.Marshal(old)
	require.NoError(t, err)
	_, err = f.app.Pool.Exec(f.ctx, `UPDATE action_versions SET definition = $2 WHERE action_id = $1 AND version = 1`, id, string(raw))
	require.NoError(t, err)

	fresh := action.NewStore(f.app.Pool, f.clock, f.app.Kinds)
	comp, err := fresh.Compiled(f.ctx, id, 1)
	require.NoError(t, err)
	require.Equal(t, old.Triggers[0].Event, comp.Triggers[0].Predicate.Source())
}

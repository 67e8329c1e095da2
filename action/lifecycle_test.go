package action_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// TestG7_CompileSingleton checks session.concurrency compiles to the
// singleton rule with its optional slot key, and only 1 is accepted.
func TestG7_CompileSingleton(t *testing.T) {
	t.Parallel()
	d := monitor()
	d.Session.Concurrency = ptr(1)
	c, err := action.Compile(d, nil)
	require.NoError(t, err)
	require.True(t, c.Session.Singleton)
	require.Nil(t, c.Session.SlotKey)

	d.Session.ConcurrencyKey = ptr("string(session.input.account_id)")
	c, err = action.Compile(d, nil)
	require.NoError(t, err)
	require.NotNil(t, c.Session.SlotKey)

	requireFault(t, func(d *action.Definition) { d.Session.Concurrency = ptr(2) }, fault.InvalidAction, "session.concurrency")
	requireFault(t, func(d *action.Definition) { d.Session.Concurrency = ptr(0) }, fault.InvalidAction, "session.concurrency")
	requireFault(t, func(d *action.Definition) { d.Session.ConcurrencyKey = ptr("string(session.input.account_id)") }, fault.InvalidAction, "session.concurrencyKey")
	requireFault(t, func(d *action.Definition) {
		d.Session.Concurrency = ptr(1)
		d.Session.ConcurrencyKey = ptr("string(session.input.nope)")
	}, fault.InvalidAction, "session.concurrencyKey")
	requireFault(t, func(d *action.Definition) {
		d.Session.Concurrency = ptr(1)
		d.Session.ConcurrencyKey = ptr("1")
	}, fault.InvalidExpression, "session.concurrencyKey")
}

// TestG8_CompileDisplayTitle checks session.displayTitle compiles as a
// string expression over session.input.
func TestG8_CompileDisplayTitle(t *testing.T) {
	t.Parallel()
	d := monitor()
	d.Session.DisplayTitle = ptr(`"Account " + string(session.input.account_id)`)
	c, err := action.Compile(d, nil)
	require.NoError(t, err)
	require.NotNil(t, c.Session.Title)
	requireFault(t, func(d *action.Definition) { d.Session.DisplayTitle = ptr("string(session.input.nope)") }, fault.InvalidAction, "session.displayTitle")
	requireFault(t, func(d *action.Definition) { d.Session.DisplayTitle = ptr("1 +") }, fault.InvalidExpression, "session.displayTitle")
}

// TestG6_CompileArchiveAfterInactive checks the auto-archive duration.
func TestG6_CompileArchiveAfterInactive(t *testing.T) {
	t.Parallel()
	d := monitor()
	d.Session.ArchiveAfterInactive = ptr("72h")
	c, err := action.Compile(d, nil)
	require.NoError(t, err)
	require.Equal(t, 72*time.Hour, c.Session.ArchiveAfter)
	requireFault(t, func(d *action.Definition) { d.Session.ArchiveAfterInactive = ptr("soon") }, fault.InvalidAction, "session.archiveAfterInactive")
	requireFault(t, func(d *action.Definition) { d.Session.ArchiveAfterInactive = ptr("1s") }, fault.InvalidAction, "session.archiveAfterInactive")
}

func requireFault(t *testing.T, edit func(d *action.Definition), code, field string) {
	t.Helper()
	d := monitor()
	edit(&d)
	_, err := action.Compile(d, nil)
	require.Error(t, err)
	var found []string
	for _, e := range action.Errors(err) {
		fe := fault.As(e)
		require.NotNil(t, fe)
		if fe.Code == code && fe.Field == field {
			return
		}
		found = append(found, fe.Code+" "+fe.Field+": "+fe.Message)
	}
	t.Fatalf("no %s at %s; got %q", code, field, found)
}

package turns_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Tests of singletons, archive, titles and ambient status (G6, G7, G8).

// G7: with session.concurrency 1 a new session starts only while no live
// session holds the slot; the refused start is an intake record naming the
// live one; a final status frees the slot; a successor takes it over.
func TestG7SingletonRefusesASecondLiveSession(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") })
	one := 1
	actionID := b.probeMonitor(func(d *action.Definition) { d.Session.Concurrency = &one })
	first := b.openAccount()
	b.dispatch()
	second := b.openAccount()
	b.dispatch()
	s, err := b.app.Sessions.Get(b.ctx, actionID, second)
	require.NoError(t, err)
	require.Nil(t, s, "the slot is taken")
	recs, err := b.app.Sessions.IntakeRecords(b.ctx, actionID, 0, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, session.ReasonSlotTaken, recs[0].Reason)
	require.Contains(t, recs[0].Message, first)

	// A successor takes the slot over; the chain holds it until it is final.
	_, err = b.app.Sessions.CloseWith(b.ctx, actionID, first, session.CloseRequest{Reason: "rotate", Successor: true})
	require.NoError(t, err)
	third := b.openAccount()
	b.dispatch()
	s, err = b.app.Sessions.Get(b.ctx, actionID, third)
	require.NoError(t, err)
	require.Nil(t, s, "the successor holds the slot")
	_, err = b.app.Sessions.Close(b.ctx, actionID, first+"~2", "done")
	require.NoError(t, err)
	fourth := b.openAccount()
	b.dispatch()
	require.Equal(t, session.Open, b.session(actionID, fourth).Status, "a final status frees the slot")
}

// G6: archive hides a session from lists and changes nothing else; a new
// input shows it again; the archiver archives idle sessions only.
func TestG6ArchiveIsVisibilityOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, "") })
	ex := b.executor("p", turns.Config{})
	after := "1h"
	actionID := b.probeMonitor(func(d *action.Definition) { d.Session.ArchiveAfterInactive = &after })
	idle, busy := b.openAccount(), b.openAccount()
	b.dispatch()
	hidden := false
	list := func(archived *bool) []string {
		ss, err := b.app.Sessions.List(b.ctx, actionID, 0, 100, nil, archived)
		require.NoError(t, err)
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		return ids
	}
	s, err := b.app.Sessions.Archive(b.ctx, actionID, idle, true)
	require.NoError(t, err)
	require.NotNil(t, s.ArchivedAt)
	require.Equal(t, session.Open, s.Status)
	require.Equal(t, []string{busy}, list(&hidden))
	require.Len(t, list(nil), 2)
	b.entry(idle, 1)
	b.dispatch()
	require.Nil(t, b.session(actionID, idle).ArchivedAt, "a new input shows it again")
	require.True(t, b.runOnce(ex))

	b.entry(busy, 1) // pending: never archived
	b.dispatch()
	arch := session.NewArchiver(b.app.Pool, b.clock, b.log)
	n, err := arch.Once(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not idle long enough")
	b.clock.Advance(time.Hour)
	n, err = arch.Once(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotNil(t, b.session(actionID, idle).ArchivedAt)
	require.Nil(t, b.session(actionID, busy).ArchivedAt, "work pending")
}

// G8: a session's display title is rendered from session.displayTitle at
// its start and cut to 64 characters; a turn's ambient_status becomes the
// session's one-line status.
func TestG8DisplayTitleAndAmbientStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		out, err := countOutcome(req, "")
		out.AmbientStatus = "checking\nentry " + strings.Repeat("x", 300)
		return out, err
	})
	ex := b.executor("p", turns.Config{})
	title := `"Account " + session.input.account_id + " " + "` + strings.Repeat("y", 80) + `"`
	actionID := b.probeMonitor(func(d *action.Definition) { d.Session.DisplayTitle = &title })
	acct := b.openAccount()
	b.dispatch()
	s := b.session(actionID, acct)
	require.NotNil(t, s.DisplayTitle)
	require.True(t, strings.HasPrefix(*s.DisplayTitle, "Account "+acct))
	require.Equal(t, 64, utf8.RuneCountInString(*s.DisplayTitle))
	require.True(t, strings.HasSuffix(*s.DisplayTitle, "…"))
	b.entry(acct, 1)
	b.dispatch()
	require.True(t, b.runOnce(ex))
	s = b.session(actionID, acct)
	require.True(t, strings.HasPrefix(*s.AmbientStatus, "checking entry xxx"), "one line")
	require.Equal(t, turns.MaxAmbientStatus, utf8.RuneCountInString(*s.AmbientStatus))
}

package session_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/session"
)

// Issue 12 item 1: a transaction's notice is one notification per channel
// naming the committing transaction and its sessions, "*" when they would
// not fit a payload; feed routing reads the same keys.
func TestNoticePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn, err := b.app.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN `+session.SessionsChannel+`; LISTEN `+session.InboxChannel)
	require.NoError(t, err)

	send := func(n session.Notice) (xid uint64) {
		tx, err := b.app.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&xid))
		require.NoError(t, n.Send(ctx, tx))
		require.NoError(t, tx.Commit(ctx))
		return xid
	}
	var n session.Notice
	n.Session(7)
	n.Session(9)
	n.Session(7)
	n.Interrupts = true
	xid := send(n)
	for _, ch := range []string{session.SessionsChannel, session.InboxChannel} {
		note, err := conn.Conn().WaitForNotification(ctx)
		require.NoError(t, err)
		require.Equal(t, ch, note.Channel)
		parsed, err := session.ParseNote(note.Payload)
		require.NoError(t, err)
		require.Equal(t, session.Note{XID: xid, SIDs: []int64{7, 9}}, parsed)
		keys, all := session.NoteKeys(note.Payload)
		require.Equal(t, []string{"7", "9"}, keys)
		require.False(t, all)
	}

	var many session.Notice
	for sid := int64(1_000_000); sid < 1_002_000; sid++ {
		many.Session(sid)
	}
	xid = send(many)
	note, err := conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, session.SessionsChannel, note.Channel, "interrupts unchanged: no inbox note")
	parsed, err := session.ParseNote(note.Payload)
	require.NoError(t, err)
	require.Equal(t, session.Note{XID: xid, All: true}, parsed)
	_, all := session.NoteKeys(note.Payload)
	require.True(t, all)
}

package ledger_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// listen opens a connection listening on channels.
func listen(t *testing.T, b testBundle, channels ...string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, c := range channels {
		_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize())
		require.NoError(t, err)
	}
	return conn
}

// received returns the notifications conn has, waiting up to a second
// for the first and taking the others already there.
func received(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	var out []string
	wait := time.Second
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, n.Channel+":"+n.Payload)
		wait = 50 * time.Millisecond
	}
}

// Issue 14: a write commits without notifying in its transaction; the
// Store's Notifier announces the new head after the commit. Notifications
// queued while a send is in flight go together, identical ones once, and
// of the heads only the newest.
func TestNotifierAnnouncesAfterCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn := listen(t, b, ledger.NotifyChannel, "test_wake")
	nt := b.store.Notifier()

	kv, err := b.store.PutValue(ctx, "account", "a", jsonvalue.Value(`{}`), "")
	require.NoError(t, err)
	nt.Flush()
	require.Equal(t, []string{ledger.NotifyChannel + ":" + strconv.FormatInt(kv.Written.Position, 10)}, received(t, conn))

	// While nothing sends, queue several: one statement carries them.
	nt.Head(7)
	nt.Notify("test_wake", "x")
	nt.Head(9)
	nt.Notify("test_wake", "x")
	nt.Notify("test_wake", "y")
	nt.Head(8)
	nt.Flush()
	// The first Head may start a send by itself; everything after it waits
	// for that send and goes in the next, where 8 is older than 9.
	got := received(t, conn)
	require.Subset(t, got, []string{"test_wake:x", "test_wake:y", ledger.NotifyChannel + ":9"})
	require.NotContains(t, got, ledger.NotifyChannel+":8", "of the heads queued together, only the newest")
	require.LessOrEqual(t, len(got), 5, "each queued once per send: %v", got)

	// A nil Notifier drops what it is given.
	var none *ledger.Notifier
	none.Notify("test_wake", "z")
	none.Head(1)
	none.Flush()
}

// Issue 14: the Notifier hands each notification to Local as it is
// queued, before any send, so the loops of the process that committed
// wake without the round trip through PostgreSQL; the sent copies follow.
func TestNotifierWakesThisProcessAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := listen(t, b, ledger.NotifyChannel, "test_wake")
	nt := ledger.NewNotifier(b.pool)
	var local []string
	nt.Local = func(channel, payload string) { local = append(local, channel+":"+payload) }

	nt.Head(3)
	nt.Notify("test_wake", "x")
	require.Equal(t, []string{ledger.NotifyChannel + ":3", "test_wake:x"}, local, "handed over as queued, not when sent")
	nt.Flush()
	require.ElementsMatch(t, []string{ledger.NotifyChannel + ":3", "test_wake:x"}, received(t, conn), "and sent as before")
}

// Issue 14: a wake-up carries the process's Origin, so that its listener
// can skip the copy of a wake-up Local delivered already (other processes'
// wake-ups, and those sent without a Notifier, still wake it).
func TestNotifierWakeCarriesTheOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := listen(t, b, "test_wake")
	nt := ledger.NewNotifier(b.pool)
	nt.Origin = "process p1"
	var local []string
	nt.Local = func(channel, payload string) { local = append(local, channel+":"+payload) }
	nt.Wake("test_wake")
	require.Equal(t, []string{"test_wake:process p1"}, local)
	nt.Flush()
	require.Equal(t, []string{"test_wake:process p1"}, received(t, conn))
}

package ledger_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

func keys(payload string) ([]string, bool) {
	if payload == "*" {
		return nil, true
	}
	return strings.Split(payload, ","), false
}

func drain(s *ledger.Sub) []string {
	var out []string
	for {
		select {
		case n := <-s.C():
			if n.Resync {
				out = append(out, "resync")
			} else {
				out = append(out, n.Channel+":"+n.Payload)
			}
		default:
			return out
		}
	}
}

// Issue 12 item 1: the feed routes a notification to the subscribers of
// its channel and keys (every key for "*", every subscriber of an
// unrouted channel), in order, and never waits on one: a note that does
// not fit a full buffer is dropped and reported as lost, once.
func TestFeedRoutesAndDrops(t *testing.T) {
	t.Parallel()
	f := ledger.NewFeed(2)
	f.Route("s", keys)
	one := f.Subscribe(ledger.Topic{Channel: "s", Key: "1"})
	two := f.Subscribe(ledger.Topic{Channel: "s", Key: "2"}, ledger.Topic{Channel: "l"})
	all := f.Subscribe(ledger.Topic{Channel: "s"})
	require.Equal(t, 3, f.Subscribers())

	f.Publish("s", "1")
	f.Publish("s", "2,3")
	require.Equal(t, []string{"s:1"}, drain(one))
	require.Equal(t, []string{"s:2,3"}, drain(two))
	require.Equal(t, []string{"s:1", "s:2,3"}, drain(all))

	f.Publish("s", "*")
	f.Publish("l", "7")
	require.Equal(t, []string{"s:*"}, drain(one))
	require.Equal(t, []string{"s:*", "l:7"}, drain(two))
	require.Equal(t, []string{"s:*"}, drain(all))

	// Three notes for buffers of two: the third is dropped, and said so.
	for i := 0; i < 3; i++ {
		f.Publish("s", "1")
	}
	require.Equal(t, []string{"s:1", "s:1"}, drain(one))
	require.Equal(t, []string{"s"}, one.Lost())
	require.Nil(t, one.Lost(), "reported once")
	require.Equal(t, []string{"s:1", "s:1"}, drain(all))
	require.Equal(t, []string{"s"}, all.Lost())
	require.Nil(t, two.Lost(), "not a note of its keys")
	published, dropped := f.Stats()
	require.Equal(t, int64(7), published)
	require.Equal(t, int64(2), dropped)

	// Resync: every channel of every subscriber is lost, with a note.
	f.Resync()
	require.Equal(t, []string{"resync"}, drain(two))
	lost := two.Lost()
	require.ElementsMatch(t, []string{"s", "l"}, lost)
	drain(one)
	drain(all)

	one.Close()
	f.Publish("s", "1")
	require.Empty(t, drain(one), "a closed subscriber gets nothing")
	require.Equal(t, 2, f.Subscribers())

	drain(all)
	f.Close()
	_, ok := <-all.C()
	require.False(t, ok, "closing the feed closes its subscribers")
	_, ok = <-f.Subscribe(ledger.Topic{Channel: "s"}).C()
	require.False(t, ok, "a subscriber of a closed feed is closed")
}

// Issue 12 item 1: a snapshot sees the transactions committed before it,
// as PostgreSQL's pg_visible_in_snapshot does.
func TestSnapshotSaw(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	open, err := b.pool.Begin(ctx) // in progress when the snapshot is taken
	require.NoError(t, err)
	defer open.Rollback(ctx)
	var inProgress string
	require.NoError(t, open.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&inProgress))
	var before string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&before)) // committed
	var text string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text))
	var after string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&after))
	snap, err := ledger.ParseSnapshot(text)
	require.NoError(t, err)
	for _, c := range []struct {
		xid  string
		want bool
	}{{before, true}, {inProgress, false}, {after, false}} {
		x, err := strconv.ParseUint(c.xid, 10, 64)
		require.NoError(t, err)
		var pg bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_visible_in_snapshot($1::text::xid8, $2::text::pg_snapshot)`, c.xid, text).Scan(&pg))
		require.Equal(t, pg, snap.Saw(x), "xid %s", c.xid)
		require.Equal(t, c.want, snap.Saw(x), "xid %s", c.xid)
	}
	_, err = ledger.ParseSnapshot("1:2")
	require.Error(t, err)
}

// Issue 12 item 1: the tail serves followers from memory while it keeps
// what they want, and a follower behind it (or resuming from an old
// cursor) reads the rest from the database: every event once, in order,
// with the type filter applied both ways.
func TestTailFollowsAndCatchesUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := ledger.NewFeed(0)
	tail := ledger.NewTail(b.pool, f, ledger.TailConfig{Events: 3, Poll: time.Hour})
	done := make(chan error, 1)
	go func() { done <- tail.Run(ctx) }()
	appendN := func(typ string, n int) {
		for i := 0; i < n; i++ {
			_, err := b.store.AppendEvent(ctx, typ, jsonvalue.Value(`{}`), "")
			require.NoError(t, err)
		}
		// The wake-up the listener would deliver.
		f.Publish(ledger.NotifyChannel, "")
	}
	appendN("old.x", 4)
	head, err := tail.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), head)

	// Resuming from position 1: 2-4 come from the database.
	before := tail.CatchUps()
	evs, seen, err := tail.Next(ctx, 1, "", 10)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4}, positions(evs))
	require.Equal(t, int64(4), seen)
	require.Greater(t, tail.CatchUps(), before)

	// Live: waits, then gets what commits. A wake-up still in flight from
	// before may let the first Next return event 5 alone: follow on, as a
	// subscriber does, until 6.
	got := make(chan []ledger.Event, 1)
	go func() {
		var all []ledger.Event
		for pos := int64(4); pos < 6; {
			evs, seen, err := tail.Next(ctx, pos, "", 10)
			if err != nil {
				return
			}
			all, pos = append(all, evs...), seen
		}
		got <- all
	}()
	appendN("new.x", 2)
	require.Equal(t, []int64{5, 6}, positions(<-got))

	// Five more: the tail keeps 3, so a follower at 6 reads from the
	// database; with a type filter it skips the other types.
	appendN("new.y", 1)
	appendN("new.x", 4)
	var all []int64
	for pos := int64(6); pos < 11; {
		evs, seen, err := tail.Next(ctx, pos, "", 10)
		require.NoError(t, err)
		all = append(all, positions(evs)...)
		pos = seen
	}
	require.Equal(t, []int64{7, 8, 9, 10, 11}, all)
	evs, seen, err = tail.Next(ctx, 4, "new.y", 10)
	require.NoError(t, err)
	require.Equal(t, []int64{7}, positions(evs))
	require.GreaterOrEqual(t, seen, int64(7))

	tail.Release()
	cancel()
	require.NoError(t, <-done)
	_, _, err = tail.Next(context.Background(), 11, "", 10)
	require.ErrorIs(t, err, ledger.ErrFeedClosed)
}

func positions(evs []ledger.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

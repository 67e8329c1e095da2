package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
)

const ledgerEventsSub = `subscription($after: String, $type: String) { ledgerEvents(after: $after, type: $type) {
  id eventType position data commitTime } }`

type liveEvent struct {
	ID, EventType, Position, CommitTime string
	Data                                json.RawMessage
}

func nextEvent(t testing.TB, s stream) liveEvent {
	t.Helper()
	var out struct{ LedgerEvents liveEvent }
	s.next(t).data(t, &out)
	return out.LedgerEvents
}

const liveAppendOp = `mutation($t: String!, $d: JSON!) { ledger { appendEvent(type: $t, data: $d) { position } } }`

func (e *env) appendEvent(t testing.TB, typ string, n int) string {
	t.Helper()
	var out struct {
		Ledger struct{ AppendEvent struct{ Position string } }
	}
	e.ok(t, liveAppendOp, map[string]any{"t": typ, "d": map[string]any{"n": n}}, &out)
	return out.Ledger.AppendEvent.Position
}

// appendAsync appends from another goroutine; the error (nil when the
// append committed) arrives on the channel.
func (e *env) appendAsync(typ string, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"query": liveAppendOp, "variables": map[string]any{"t": typ, "d": map[string]any{"n": n}}})
		resp, err := e.srv.Client().Post(e.srv.URL+"/graphql", "application/json", bytes.NewReader(body))
		if err == nil {
			var r response
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if err == nil && len(r.Errors) > 0 {
				err = fmt.Errorf("append: %+v", r.Errors)
			}
		}
		done <- err
	}()
	return done
}

// Issue 12 item 2: ledgerEvents resumes after a cursor, replays from the
// ledger, then follows live, over both transports, with no gap while
// events commit concurrently; the type filter keeps one type.
func TestLiveLedgerEventsResumeWithoutGap(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	for i := 1; i <= 5; i++ {
		e.appendEvent(t, "before.x", i)
	}
	// The events page's endCursor after the third event is a cursor too.
	var page struct {
		Ledger struct {
			Events struct{ PageInfo struct{ EndCursor string } }
		}
	}
	e.ok(t, `{ ledger { events(first: 3) { pageInfo { endCursor } } } }`, nil, &page)

	open := map[string]func() stream{
		"sse": func() stream {
			return sse(t, e.srv.URL, "", ledgerEventsSub, map[string]any{"after": page.Ledger.Events.PageInfo.EndCursor})
		},
		"graphql-transport-ws": func() stream {
			c, _, err := dialWS(t, e.srv.URL, nil, nil)
			require.NoError(t, err)
			c.acked(t)
			return c.subscribe(t, "1", ledgerEventsSub, map[string]any{"after": "3"})
		},
	}
	subs := map[string]stream{}
	for name, o := range open {
		subs[name] = o()
	}
	// Replay: positions 4 and 5.
	for name, s := range subs {
		for want := 4; want <= 5; want++ {
			require.Equal(t, strconv.Itoa(want), nextEvent(t, s).Position, name)
		}
	}
	// Live: 40 events from 4 writers at once.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				errs <- <-e.appendAsync(fmt.Sprintf("live.w%d", w), i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for name, s := range subs {
		for want := 6; want <= 45; want++ {
			ev := nextEvent(t, s)
			require.Equal(t, strconv.Itoa(want), ev.Position, "%s: every position once, in order", name)
		}
	}

	// The type filter keeps one type, replay and live alike.
	typed := sse(t, e.srv.URL, "", ledgerEventsSub, map[string]any{"after": "0", "type": "live.w2"})
	for i := 0; i < 10; i++ {
		ev := nextEvent(t, typed)
		require.Equal(t, "live.w2", ev.EventType)
		jsonEq(t, fmt.Sprintf(`{"n":%d}`, i), ev.Data)
	}
	e.appendEvent(t, "live.w1", 99)
	e.appendEvent(t, "live.w2", 100)
	ev := nextEvent(t, typed)
	require.Equal(t, "live.w2", ev.EventType)
	require.Equal(t, "47", ev.Position)
}

// Issue 12 item 6: an append that takes its position first but commits
// last (it holds the ledger head while another waits on it) is delivered,
// and in position order; and a transaction that began first but appends
// last gets the later position. Positions follow commit order (ledger
// package doc), so a follower reading by position skips nothing.
func TestLiveLedgerEventsLateCommit(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	// A subscription without a cursor starts at the events committed once
	// it is in place, which the client cannot observe: start from a cursor.
	s := sse(t, e.srv.URL, "", ledgerEventsSub, map[string]any{"after": "0"})
	e.appendEvent(t, "mark.start", 0)
	require.Equal(t, "mark.start", nextEvent(t, s).EventType)

	ctx := context.Background()
	early, err := e.app.Pool.Begin(ctx) // begins first, appends last
	require.NoError(t, err)
	defer early.Rollback(ctx)
	_, err = early.Exec(ctx, `SELECT 1`)
	require.NoError(t, err)

	holder, err := e.app.Pool.Begin(ctx) // takes the head and holds it
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	evs, err := ledger.Append(ctx, holder, time.Now(), ledger.NewEvent{Type: "late.holder", Data: jsonvalue.Value(`{}`)})
	require.NoError(t, err)
	require.Equal(t, int64(2), evs[0].Position)

	waiting := e.appendAsync("late.waiter", 1)
	poll(t, "the second append to wait on the ledger head", func() bool {
		return e.countRows(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-waiting)
	_, err = ledger.Append(ctx, early, time.Now(), ledger.NewEvent{Type: "late.early", Data: jsonvalue.Value(`{}`)})
	require.NoError(t, err)
	require.NoError(t, early.Commit(ctx))

	for _, want := range []string{"late.holder", "late.waiter", "late.early"} {
		require.Equal(t, want, nextEvent(t, s).EventType)
	}
}

// Issue 12 item 2: streams take their own path through the HTTP server's
// timeouts. With read, idle and request timeouts of 300 ms, an SSE and a
// WebSocket subscription still deliver a second later; a query still gets
// an answer; and when the server shuts down, both streams end and Serve
// returns.
func TestLiveStreamsOutliveTimeoutsAndEndAtShutdown(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	lim := server.Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, ln, e.app.Handler(), lim) }()
	url := "http://" + ln.Addr().String()

	from := map[string]any{"type": "slowly", "after": e.appendEvent(t, "mark", 0)}
	s := sse(t, url, "", ledgerEventsSub, from)
	ws, _, err := dialWS(t, url, nil, nil)
	require.NoError(t, err)
	ws.acked(t)
	w := ws.subscribe(t, "1", ledgerEventsSub, from)
	e.appendEvent(t, "slowly", 1)
	require.Equal(t, "slowly", nextEvent(t, s).EventType)
	require.Equal(t, "slowly", nextEvent(t, w).EventType)

	time.Sleep(time.Second) // past every timeout of the server: what is tested is time passing
	e.appendEvent(t, "slowly", 2)
	jsonEq(t, `{"n":2}`, nextEvent(t, s).Data)
	jsonEq(t, `{"n":2}`, nextEvent(t, w).Data)

	stop()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(liveWait):
		require.FailNow(t, "Serve did not return after shutdown")
	}
	for m := range s.msgs {
		require.NotEqual(t, "next", m.Type, "no update after shutdown: %s", m.Payload)
	}
	require.Equal(t, "closed", ws.recv(t).Type)
}

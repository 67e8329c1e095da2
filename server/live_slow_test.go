package server_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// gate holds the writes of the responses it wraps while closed: a client
// that has stopped reading, as the server sees it.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// slowWrap passes requests with the header X-Slow through g.
func (g *gate) slowWrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			w = &gatedWriter{ResponseWriter: w, g: g}
		}
		h.ServeHTTP(w, r)
	})
}

type gatedWriter struct {
	http.ResponseWriter
	g *gate
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.g.wait()
	return w.ResponseWriter.Write(p)
}

func (w *gatedWriter) Flush() {
	w.g.wait()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// slowSSE is sse with the X-Slow header.
func slowSSE(t testing.TB, url, query string, vars map[string]any) *sseStream {
	t.Helper()
	return sseWith(t, url, "", query, vars, http.Header{"X-Slow": []string{"1"}})
}

// Issue 12 items 1 and 6: subscribers that stop reading, with a feed
// buffer of 2 notes (and queues of 2 updates) and 4 events kept in memory.
// ledgerEvents catches up from the database (every event, in order);
// sessionUpdates catches up the session's state in memory (the reads it
// did not take fold into one); a subscriber that missed what no table
// holds (a running turn's transcript entries, inbox changes) is closed
// with SUBSCRIPTION_LAGGED, retryable.
func TestLiveSlowSubscribers(t *testing.T) {
	t.Parallel()
	g := newGate()
	// Turns stream their entries at once (LiveDelay < 0), so an echo turn
	// stands for a long one whose entries a stalled subscriber misses.
	e := newLiveEnv(t, server.Config{LiveDelay: -1, Live: server.LiveConfig{Buffer: 2, Tail: ledger.TailConfig{Events: 4}}}, g.slowWrap)
	t.Cleanup(g.release) // before the server closes: a held write would hold it

	t.Run("ledgerEvents catches up", func(t *testing.T) {
		s := slowSSE(t, e.srv.URL, ledgerEventsSub, map[string]any{"type": "slow.ev", "after": e.appendEvent(t, "mark", 0)})
		e.appendEvent(t, "slow.ev", 0)
		first := nextEvent(t, s)
		g.hold()
		defer g.release()
		before := e.app.Tail.CatchUps()
		for i := 1; i <= 30; i++ {
			e.appendEvent(t, "slow.ev", i)
		}
		g.release()
		pos, _ := strconv.Atoi(first.Position)
		for i := 1; i <= 30; i++ {
			ev := nextEvent(t, s)
			jsonEq(t, `{"n":`+strconv.Itoa(i)+`}`, ev.Data)
			next, _ := strconv.Atoi(ev.Position)
			require.Greater(t, next, pos)
			pos = next
		}
		require.Greater(t, e.app.Tail.CatchUps(), before, "it read what the tail no longer kept from the database")
	})

	a := uuid.NewString()
	def := monitorDef()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": def}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	e.waitSession(t, a, acct)
	vars := map[string]any{"a": a, "s": acct}

	t.Run("sessionUpdates catches up the session", func(t *testing.T) {
		s := slowSSE(t, e.srv.URL, sessionUpdatesSub, vars)
		require.Equal(t, 0, nextSessionUpdate(t, s).PendingInputs)
		g.hold()
		defer g.release()
		merged := e.app.Resolver.LiveStats().Merged
		// Further account records of the session's input are inputs that
		// start no turn (turns.on names only entries): 8 changes, each
		// delivered in a transaction (so a notification) of its own. The
		// session's reader reads each once; the stalled subscriber's queue
		// folds the reads it has not taken into one.
		for i := 1; i <= 8; i++ {
			e.put(t, "account", uuid.NewString(), map[string]any{"account_id": acct}, "")
			poll(t, "the input delivered", func() bool {
				return e.countRows(t, `SELECT count(*) FROM session_inputs i JOIN sessions s USING (sid)
					WHERE s.action_id = $1 AND s.id = $2 AND i.status = 'PENDING'`, a, acct) == i
			})
		}
		poll(t, "reads folded for the stalled subscriber", func() bool { return e.app.Resolver.LiveStats().Merged > merged })
		g.release()
		var u sessionUpdate
		for u.PendingInputs != 8 {
			u = nextSessionUpdate(t, s)
			require.Equal(t, "SESSION", u.Kind)
		}
	})

	t.Run("sessionUpdates that missed transcript entries ends", func(t *testing.T) {
		s := slowSSE(t, e.srv.URL, sessionUpdatesSub, vars)
		nextSessionUpdate(t, s)
		g.hold()
		defer g.release()
		lagged, dropped := e.app.Resolver.LiveStats().Lagged, e.app.Feed.Dropped(turns.TranscriptChannel)
		e.put(t, "entry", uuid.NewString(), map[string]any{"account_id": acct, "amount": 1}, "") // a turn of 9 inputs: 10 entries
		// The entries overflow the stalled subscriber's queue, or the
		// session reader's feed buffer (the reader then reports the loss).
		poll(t, "entries dropped for the stalled subscriber", func() bool {
			return e.app.Resolver.LiveStats().Lagged > lagged || e.app.Feed.Dropped(turns.TranscriptChannel) > dropped
		})
		g.release()
		requireLagged(t, s)
	})

	t.Run("inboxUpdates that missed changes ends", func(t *testing.T) {
		tool := uuid.NewString()
		e.ok(t, createOp, map[string]any{"id": tool, "input": freezeTool()}, nil)
		agent := uuid.NewString()
		e.ok(t, createOp, map[string]any{"id": agent, "input": agentMonitor(tool)}, nil)
		s := slowSSE(t, e.srv.URL, inboxUpdatesSub, nil)
		require.Equal(t, "CURRENT", nextInboxUpdate(t, s).Kind)
		g.hold()
		defer g.release()
		lagged, dropped := e.app.Resolver.LiveStats().Lagged, e.app.Feed.Dropped(session.InboxChannel)
		// 8 approvals, one after another: each raised by a transaction (so
		// a notification, a read and an inbox change) of its own.
		for i := 0; i < 8; i++ {
			acct := "s" + strconv.Itoa(i)
			e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
			e.put(t, "entry", "e-"+acct, map[string]any{"account_id": acct, "amount": 1}, "")
			poll(t, "the approval raised", func() bool {
				return e.countRows(t, `SELECT count(*) FROM session_interrupts i JOIN sessions s USING (sid)
					WHERE s.action_id = $1 AND i.status = 'PENDING'`, agent) == i+1
			})
		}
		// The changes overflow the stalled subscriber's queue, or the
		// inbox reader's feed buffer (the reader then ends every
		// subscriber with the reason).
		poll(t, "changes dropped for the stalled subscriber", func() bool {
			return e.app.Resolver.LiveStats().Lagged > lagged || e.app.Feed.Dropped(session.InboxChannel) > dropped
		})
		g.release()
		requireLagged(t, s)
	})
}

// requireLagged reads s until its last answer, which must be
// SUBSCRIPTION_LAGGED with retryable true, followed by the end.
func requireLagged(t testing.TB, s stream) {
	t.Helper()
	for {
		m := s.next(t)
		r := m.result(t)
		if len(r.Errors) == 0 {
			continue
		}
		ge := requireError(t, r, "SUBSCRIPTION_LAGGED", "")
		require.Equal(t, true, ge.Extensions["retryable"])
		require.Equal(t, "complete", s.next(t).Type)
		return
	}
}

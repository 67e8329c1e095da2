package graph

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// sessionUpdates (issue 12). One reader per watched session and process
// (sessionHub) follows the session's notes in the change feed, reads the
// session once per change, and hands each read and each live transcript
// entry to the box of every watcher of the session; each watcher turns
// them into updates against what it last reported (sessionWatch), in
// memory. So a change costs one read however many watch the session. A
// watcher whose client reads slowly has its reads folded together (it is
// caught up, each changed turn still reported), and is ended with
// SUBSCRIPTION_LAGGED only when transcript entries, which no table holds
// until the turn commits, do not fit its box.

// sessionUpdates streams a session's changes and its running turn's
// transcript entries.
func (r *Resolver) sessionUpdates(ctx context.Context, actionID uuid.UUID, id string) (<-chan *model.SessionUpdate, error) {
	if r.Feed == nil {
		return nil, errNoFeed
	}
	if len(id) > session.MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is at most %d bytes", session.MaxIDLen)
	}
	s, err := r.SessionStore.Get(ctx, actionID, id)
	if err != nil {
		return nil, err
	}
	if s == nil {
		if a, err := r.ActionStore.Get(ctx, actionID); err != nil {
			return nil, err
		} else if a == nil {
			return nil, fault.New(fault.NotFound, "actionId", "no action has this id")
		}
		return nil, fault.New(fault.NotFound, "id", "this action has no session with this id")
	}
	sw, first, err := r.watchSession(ctx, s.SID)
	if err != nil {
		return nil, err
	}
	return stream(ctx, r, func(ctx context.Context, send func(*model.SessionUpdate) bool) error {
		defer sw.leave()
		if !send(first) {
			return nil
		}
		w := sw.w
		for !w.done() {
			items, done, err := sw.box.take(ctx)
			if done {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for _, it := range items {
				var ups []*model.SessionUpdate
				if it.snap != nil {
					ups, err = w.apply(it.snap)
				} else {
					ups, err = w.entry(it.entry)
				}
				if err != nil {
					return err
				}
				for _, u := range ups {
					if !send(u) {
						return nil
					}
				}
				if w.done() {
					return nil
				}
			}
		}
		return nil
	}), nil
}

// sessionSnap is one read of a session: the session, how many of its
// inputs are pending, and its turns from the reader's newest before the
// read on (oldest first), all in one snapshot, read at now. Shared by the
// watchers: never changed once made.
type sessionSnap struct {
	s       *session.Session
	pending int
	turns   []turns.Turn
	// settled are the committed transcripts of the turns that settled
	// since the reader's previous read, by execution (issue 14: a short
	// turn publishes no live entries; its subscribers get them from here).
	settled map[uuid.UUID]turns.CommittedTranscript
	now     time.Time
	// lostEntries: transcript notes may have been missed before this read
	// (the reader's feed dropped some, or the listener reconnected).
	lostEntries bool
}

// final reports that the session is closed and its last turn settled:
// nothing will change any more.
func (s *sessionSnap) final() bool {
	if !s.s.Status.Final() {
		return false
	}
	n := len(s.turns)
	return n == 0 || s.turns[n-1].Status != "RUNNING"
}

// sessionItem is what a watcher's box holds: a read, or an entry of the
// running turn's transcript.
type sessionItem struct {
	snap  *sessionSnap
	entry *turns.LiveEntry
}

// mergeSession folds read v into read last: the later session and count,
// and the turns of both (the later read's version of a turn wins), so
// applying the fold reports what applying both would have, each changed
// turn included, save intermediate states of the session alone. Entries
// are never folded.
func mergeSession(last, v sessionItem) (sessionItem, bool) {
	if last.snap == nil || v.snap == nil {
		return last, false
	}
	a, b := last.snap, v.snap
	m := &sessionSnap{s: b.s, pending: b.pending, now: b.now, lostEntries: a.lostEntries || b.lostEntries, turns: a.turns,
		settled: a.settled}
	if len(b.settled) > 0 {
		m.settled = maps.Clone(a.settled)
		if m.settled == nil {
			m.settled = map[uuid.UUID]turns.CommittedTranscript{}
		}
		maps.Copy(m.settled, b.settled)
	}
	if len(b.turns) > 0 {
		m.turns = nil
		for _, t := range a.turns {
			if t.Number < b.turns[0].Number {
				m.turns = append(m.turns, t)
			}
		}
		m.turns = append(m.turns, b.turns...)
	}
	return sessionItem{snap: m}, true
}

// sessionHub reads one session for all its watchers in this process.
type sessionHub struct {
	r     *Resolver
	sid   int64
	ready chan struct{} // closed once the first read is done
	err   error         // the first read's error, set before ready closes

	sub    *ledger.Sub
	cancel context.CancelFunc

	mu       sync.Mutex
	watchers map[*sessionWatcher]struct{}
	last     *sessionSnap // the newest read: what a new watcher starts from
	stopped  bool
	endErr   error // why it stopped, when it failed

	// The reader's own (start, then run): where the next read's turns
	// start, and the newest turn whose settled transcript was read (or
	// that was settled at the first read).
	read1   bool
	newest  int
	settled int
}

// sessionWatcher is one subscriber's membership of a hub.
type sessionWatcher struct {
	hub *sessionHub
	box *box[sessionItem] // nil when the session was final when it joined
	w   *sessionWatch
}

// watchSession joins the reader of session sid, starting one when there is
// none, and returns the watcher with its first update (the session as the
// reader last read it).
func (r *Resolver) watchSession(ctx context.Context, sid int64) (*sessionWatcher, *model.SessionUpdate, error) {
	hs := &r.live
	for {
		hs.mu.Lock()
		if hs.sessions == nil {
			hs.sessions = map[int64]*sessionHub{}
		}
		h := hs.sessions[sid]
		start := h == nil
		if start {
			h = &sessionHub{r: r, sid: sid, ready: make(chan struct{}), watchers: map[*sessionWatcher]struct{}{}}
			hs.sessions[sid] = h
		}
		hs.mu.Unlock()
		if start {
			h.start(ctx)
		}
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if h.err != nil {
			if ctx.Err() == nil && (errors.Is(h.err, context.Canceled) || errors.Is(h.err, context.DeadlineExceeded)) {
				continue // the subscriber that started it went away: start another
			}
			return nil, nil, h.err
		}
		sw, first, err := h.join()
		if sw != nil || err != nil {
			return sw, first, err
		}
		h.forget() // it stopped meanwhile: start another
	}
}

// start subscribes to the session's notes, then reads it (so a change
// committed in between is both in the read and in a note, never in
// neither), and runs the reader unless the session is final.
func (h *sessionHub) start(ctx context.Context) {
	defer close(h.ready)
	key := session.SIDKey(h.sid)
	h.sub = h.r.Feed.Subscribe(ledger.Topic{Channel: session.SessionsChannel, Key: key}, ledger.Topic{Channel: turns.TranscriptChannel, Key: key})
	snap, err := h.read(ctx)
	if err != nil {
		h.err = err
	} else {
		h.last = snap
	}
	if err != nil || snap.final() {
		h.stopped = true
		h.sub.Close()
		h.forget()
		return
	}
	rctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go h.run(rctx)
}

// join adds a watcher, with its first update: the session as last read.
// It returns no watcher when the reader stopped before the session was
// final (the caller starts another), and errShuttingDown when it stopped
// because the process is stopping.
func (h *sessionHub) join() (*sessionWatcher, *model.SessionUpdate, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	final := h.last.final()
	switch {
	case h.stopped && !final && errors.Is(h.endErr, ledger.ErrFeedClosed):
		return nil, nil, errShuttingDown
	case h.stopped && !final:
		return nil, nil, nil
	}
	w, first := newSessionWatch(h.sid, h.last)
	sw := &sessionWatcher{hub: h, w: w}
	if !final {
		sw.box = newBox(h.r.Feed.Buffer(), mergeSession, &h.r.live.merged)
		h.watchers[sw] = struct{}{}
	}
	return sw, first, nil
}

// leave ends a watcher's membership; the last one gone, the reader stops.
func (sw *sessionWatcher) leave() {
	h := sw.hub
	if sw.box == nil {
		return
	}
	h.mu.Lock()
	delete(h.watchers, sw)
	stop := len(h.watchers) == 0 && !h.stopped
	if stop {
		h.stopped = true
	}
	h.mu.Unlock()
	if stop {
		h.cancel()
		h.forget()
	}
}

// forget takes the hub out of the resolver's, if it is still there.
func (h *sessionHub) forget() {
	hs := &h.r.live
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.sessions[h.sid] == h {
		delete(hs.sessions, h.sid)
	}
}

// run reads the session after each note and hands the reads and entries
// to the watchers, until they are all gone (ctx ends), the session is
// final, a read fails or the feed closes.
func (h *sessionHub) run(ctx context.Context) {
	defer h.sub.Close()
	for {
		var n ledger.Note
		var ok bool
		select {
		case <-ctx.Done():
			return
		case n, ok = <-h.sub.C():
		}
		if !ok {
			h.stop(ledger.ErrFeedClosed)
			return
		}
		lost := h.sub.Lost()
		lostEntries := slices.Contains(lost, turns.TranscriptChannel)
		var items []sessionItem
		if lostEntries || n.Resync || n.Channel == session.SessionsChannel || slices.Contains(lost, session.SessionsChannel) {
			snap, err := h.read(ctx)
			if err != nil {
				if ctx.Err() == nil {
					h.stop(err)
				}
				return
			}
			snap.lostEntries = lostEntries
			items = append(items, sessionItem{snap: snap})
		}
		if n.Channel == turns.TranscriptChannel {
			sid, e, err := turns.ParseLive(n.Payload)
			if err != nil {
				h.stop(err)
				return
			}
			if sid == h.sid {
				items = append(items, sessionItem{entry: &e})
			}
		}
		if h.deliver(items) {
			h.cancel()
			h.forget()
			return
		}
	}
}

// deliver puts items in every watcher's box; a watcher whose box cannot
// take an entry is ended with SUBSCRIPTION_LAGGED. It reports whether the
// session is now final: then every box is closed after the last read.
func (h *sessionHub) deliver(items []sessionItem) (final bool) {
	if len(items) == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		if it.snap != nil {
			h.last = it.snap
		}
		for sw := range h.watchers {
			if !sw.box.put(it, it.snap != nil) {
				sw.box.close(lagged("transcript entries of a running turn were missed while it was not reading (the committed transcript of the turn's execution has them all once it ends)"))
				h.r.live.lagged.Add(1)
				delete(h.watchers, sw)
			}
		}
	}
	if !h.last.final() {
		return false
	}
	h.stopped = true
	for sw := range h.watchers {
		sw.box.close(nil)
	}
	return true
}

// stop ends every watcher with err.
func (h *sessionHub) stop(err error) {
	h.mu.Lock()
	h.stopped, h.endErr = true, err
	for sw := range h.watchers {
		sw.box.close(err)
	}
	h.mu.Unlock()
	h.cancel()
	h.forget()
}

// read reads the session and its turns from the newest one read before
// (the first read: the newest turn only), in one snapshot.
func (h *sessionHub) read(ctx context.Context) (*sessionSnap, error) {
	h.r.live.reads.Add(1)
	var s *session.Session
	var pending int
	var ts []turns.Turn
	var settled map[uuid.UUID]turns.CommittedTranscript
	err := h.r.SessionStore.ReadConsistent(ctx, func(q ledger.Querier) error {
		var err error
		if s, pending, err = session.Watch(ctx, q, h.sid); err != nil || s == nil || s.TurnCount == 0 {
			return err
		}
		from := s.TurnCount
		if h.read1 {
			from = max(h.newest, 1)
		}
		if ts, err = turns.TurnsFrom(ctx, q, h.sid, from); err != nil {
			return err
		}
		var execs []uuid.UUID
		for _, t := range ts {
			if h.read1 && t.Number > h.settled && t.Status != turns.TurnRunning {
				execs = append(execs, t.ExecutionID)
			}
		}
		if len(execs) > 0 {
			settled, err = turns.CommittedTranscripts(ctx, q, execs)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fault.New(fault.NotFound, "id", "the session no longer exists")
	}
	h.read1 = true
	if n := len(ts); n > 0 {
		h.newest = ts[n-1].Number
	}
	for _, t := range ts {
		if t.Status != turns.TurnRunning {
			h.settled = max(h.settled, t.Number)
		}
	}
	return &sessionSnap{s: s, pending: pending, turns: ts, settled: settled, now: h.r.Clock.Now()}, nil
}

// liveKey names one attempt of one execution.
type liveKey struct {
	exec    uuid.UUID
	attempt int
}

// sessionWatch is one sessionUpdates subscriber's view of its session: what
// it last reported, so it reports each change once and each turn that
// changed, and the transcript sequence of each attempt it follows, so a
// missed entry ends the subscription rather than going unnoticed.
type sessionWatch struct {
	sid int64

	sess       *session.Session
	pending    int
	print      string
	turn       *turns.Turn // the newest turn read
	firstTurn  int         // the newest turn when subscribing
	liveTurn   int         // the turn whose entries live tracks
	live       map[liveKey]int
	closedDone bool
}

// newSessionWatch starts a view from read last and returns its first
// update: the session with its newest turn.
func newSessionWatch(sid int64, last *sessionSnap) (*sessionWatch, *model.SessionUpdate) {
	var newest *turns.Turn
	if n := len(last.turns); n > 0 {
		newest = &last.turns[n-1]
	}
	w := &sessionWatch{sid: sid, sess: last.s, pending: last.pending, print: sessionPrint(last.s, last.pending, last.now),
		turn: newest, live: map[liveKey]int{}, closedDone: last.final()}
	if newest != nil {
		w.firstTurn = newest.Number
	}
	return w, &model.SessionUpdate{Kind: model.SessionUpdateKindSession, Session: last.s, PendingInputs: last.pending, Turn: newest}
}

// done reports that the session is closed and its last turn settled:
// nothing will change any more.
func (w *sessionWatch) done() bool { return w.closedDone }

func (w *sessionWatch) turnNumber() int {
	if w.turn == nil {
		return 0
	}
	return w.turn.Number
}

// apply returns the updates a read makes: one per turn that changed since
// the view's last, oldest first, or one for a change of the session alone,
// or none. After lost transcript notes it ends the subscription instead,
// unless no turn ran before or since: the entries a running turn wrote
// are in no table until it commits, so a missed one cannot be read back.
func (w *sessionWatch) apply(snap *sessionSnap) ([]*model.SessionUpdate, error) {
	before, wasRunning := w.turnNumber(), w.turn != nil && w.turn.Status == "RUNNING"
	s, pending := snap.s, snap.pending
	var changed []turns.Turn
	newest := w.turn
	for i := range snap.turns {
		t := snap.turns[i]
		if w.turn != nil && t.Number < w.turn.Number {
			continue // reported before
		}
		if w.turn == nil || t.Number > w.turn.Number || turnPrint(t) != turnPrint(*w.turn) {
			changed = append(changed, t)
		}
		newest = &snap.turns[i]
	}
	print := sessionPrint(s, pending, snap.now)
	var ups []*model.SessionUpdate
	switch {
	case len(changed) > 0:
		for i := range changed {
			ups = append(ups, w.settledEntries(snap, &changed[i])...)
			ups = append(ups, &model.SessionUpdate{Kind: model.SessionUpdateKindSession, Session: s, PendingInputs: pending, Turn: &changed[i]})
		}
	case print != w.print:
		ups = append(ups, &model.SessionUpdate{Kind: model.SessionUpdateKindSession, Session: s, PendingInputs: pending, Turn: newest})
	}
	w.sess, w.pending, w.print, w.turn = s, pending, print, newest
	w.closedDone = s.Status.Final() && (newest == nil || newest.Status != "RUNNING")
	if snap.lostEntries && (wasRunning || w.turnNumber() != before || (w.turn != nil && w.turn.Status == "RUNNING")) {
		return nil, lagged("transcript entries of a running turn were missed (the committed transcript of the turn's execution has them all once it ends)")
	}
	return ups, nil
}

// settledEntries returns TRANSCRIPT updates for the entries of t, a turn
// that settled, that the watcher has not had live: all of them for a turn
// too short to stream (liveGate), the rest of them otherwise. The session
// is the watcher's view before the read, as a live entry's would be.
func (w *sessionWatch) settledEntries(snap *sessionSnap, t *turns.Turn) []*model.SessionUpdate {
	c, ok := snap.settled[t.ExecutionID]
	if !ok || t.Number < w.firstTurn {
		return nil
	}
	if t.Number != w.liveTurn {
		w.liveTurn, w.live = t.Number, map[liveKey]int{}
	}
	k := liveKey{t.ExecutionID, c.Attempt}
	var ups []*model.SessionUpdate
	for i := range c.Entries {
		e := c.Entries[i]
		if e.Seq <= w.live[k] {
			continue
		}
		w.live[k] = e.Seq
		turn, attempt := t.Number, c.Attempt
		ups = append(ups, &model.SessionUpdate{Kind: model.SessionUpdateKindTranscript, Session: w.sess, PendingInputs: w.pending,
			TranscriptEntry: &e, TurnNumber: &turn, Attempt: &attempt, Turn: t})
	}
	return ups
}

// sessionPrint is what a SESSION update shows of the session itself.
func sessionPrint(s *session.Session, pending int, now time.Time) string {
	return fmt.Sprintf("%s|%s|%s|%d|%d|%d|%t|%v|%v|%d", s.Status, derefStr(s.Reason), s.State, s.TurnCount, pending, s.Version,
		s.Running(now), s.EndsAt, s.StartedAt, s.UpdatedAt.UnixMicro())
}

func turnPrint(t turns.Turn) string {
	return fmt.Sprintf("%s|%v|%s|%s", t.Status, t.FinishedAt, derefStr(t.CheckpointStatus), t.CheckpointState)
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// entry turns a live transcript entry into a TRANSCRIPT update. Within an
// attempt the sequence numbers go up by one; an attempt that begins after
// the subscription (a turn newer than the one running when it started)
// begins at 1. An entry that breaks either rule means entries were lost on
// the way, and the subscription ends.
func (w *sessionWatch) entry(e *turns.LiveEntry) ([]*model.SessionUpdate, error) {
	if e.Turn != w.liveTurn {
		w.liveTurn, w.live = e.Turn, map[liveKey]int{}
	}
	k := liveKey{e.ExecutionID, e.Attempt}
	last, seen := w.live[k]
	switch {
	case seen && e.Seq != last+1:
		return nil, lagged("transcript entries %d-%d of turn %d were missed", last+1, e.Seq-1, e.Turn)
	case !seen && e.Seq != 1 && (e.Turn > w.firstTurn || len(w.live) > 0):
		return nil, lagged("transcript entries 1-%d of turn %d were missed", e.Seq-1, e.Turn)
	}
	w.live[k] = e.Seq
	entry := e.Entry
	if len(entry.Data) == 0 {
		entry.Data = jsonvalue.Value("null")
	}
	turn, attempt := e.Turn, e.Attempt
	u := &model.SessionUpdate{Kind: model.SessionUpdateKindTranscript, Session: w.sess, PendingInputs: w.pending,
		TranscriptEntry: &entry, TurnNumber: &turn, Attempt: &attempt}
	if w.turn != nil && w.turn.Number == e.Turn {
		u.Turn = w.turn
	}
	return []*model.SessionUpdate{u}, nil
}

package graph

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// inboxUpdates (issue 12). One reader per process (inboxRun) follows the
// inbox notes of the change feed and, for each, reads once what the
// note's transaction may have changed (session.Store.InboxNoteChanges:
// the interrupts it raised, and those of its sessions the reader holds as
// pending), with the items' actions, whoever may read them; every
// subscriber then keeps, in memory, what its filter covers
// (session.InboxFilter.Covers, the SQL filter of the inbox query: the
// actions its principal may READ, its kind and action). So an interrupt
// raised or answered costs one read however many consoles are open.
//
// Why no change is missed or reported twice: the reader holds the ids of
// every pending interrupt (read when it starts, after subscribing; then
// each pending row it reads added, each settled one dropped), so the read
// of the note that answers or closes an interrupt returns it, unless an
// earlier read already returned it settled. A subscriber joins the reader
// before its own first read (InboxPending), so it gets every read made
// after that; it reports RAISED for an interrupt the note's transaction
// raised that its first read did not see, and ANSWERED or CLOSED for one
// it holds as pending that a read returns settled.

// inboxUpdates streams the count of the inbox the caller may read, then
// each interrupt raised, answered or closed in it, exactly once each. A
// subscriber whose box fills, or a reader that missed notes, ends with
// SUBSCRIPTION_LAGGED: an interrupt raised and answered while it was not
// looking could not be reported.
func (r *Resolver) inboxUpdates(ctx context.Context, kind *model.InterruptKind, actionID *uuid.UUID) (<-chan *model.InboxUpdate, error) {
	if r.Feed == nil {
		return nil, errNoFeed
	}
	p, _ := auth.From(ctx)
	if p.Session != nil {
		return nil, auth.Forbidden()
	}
	iw, err := r.watchInbox(ctx, inboxFilter(p, kind, actionID))
	if err != nil {
		return nil, err
	}
	if iw.known, iw.snap, err = r.SessionStore.InboxPending(ctx, iw.f); err != nil {
		iw.leave()
		return nil, err
	}
	return stream(ctx, r, func(ctx context.Context, send func(*model.InboxUpdate) bool) error {
		defer iw.leave()
		if !send(&model.InboxUpdate{Kind: model.InboxUpdateKindCurrent, Pending: len(iw.known)}) {
			return nil
		}
		for {
			results, done, err := iw.box.take(ctx)
			if done {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for _, res := range results {
				for _, u := range iw.apply(res) {
					if !send(u) {
						return nil
					}
				}
			}
		}
	}), nil
}

// inboxResult is one read of the reader, shared by the subscribers.
type inboxResult struct {
	note  session.Note
	items []session.InboxChange
}

// inboxRun is the process's inbox reader while anyone subscribes.
type inboxRun struct {
	r     *Resolver
	ready chan struct{} // closed once the pending interrupts are read
	err   error         // that read's error, set before ready closes

	sub    *ledger.Sub
	cancel context.CancelFunc

	mu       sync.Mutex
	watchers map[*inboxWatcher]struct{}
	stopped  bool
	endErr   error

	pending map[int64]map[uuid.UUID]bool // by session: the reader's own, after start
}

// inboxWatcher is one subscriber: its filter, the pending interrupts it
// covers and the snapshot of its first read.
type inboxWatcher struct {
	run   *inboxRun
	box   *box[*inboxResult]
	f     session.InboxFilter
	known map[uuid.UUID]int64
	snap  ledger.Snapshot
}

// watchInbox joins the inbox reader, starting it when none runs.
func (r *Resolver) watchInbox(ctx context.Context, f session.InboxFilter) (*inboxWatcher, error) {
	hs := &r.live
	for {
		hs.mu.Lock()
		run := hs.inbox
		start := run == nil
		if start {
			run = &inboxRun{r: r, ready: make(chan struct{}), watchers: map[*inboxWatcher]struct{}{}}
			hs.inbox = run
		}
		hs.mu.Unlock()
		if start {
			run.start(ctx)
		}
		select {
		case <-run.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if run.err != nil {
			if ctx.Err() == nil && (errors.Is(run.err, context.Canceled) || errors.Is(run.err, context.DeadlineExceeded)) {
				continue // the subscriber that started it went away: start another
			}
			return nil, run.err
		}
		iw := &inboxWatcher{run: run, f: f, box: newBox[*inboxResult](r.Feed.Buffer(), nil, nil)}
		run.mu.Lock()
		stopped, why := run.stopped, run.endErr
		if !stopped {
			run.watchers[iw] = struct{}{}
		}
		run.mu.Unlock()
		switch {
		case !stopped:
			return iw, nil
		case errors.Is(why, ledger.ErrFeedClosed):
			return nil, errShuttingDown
		}
		run.forget() // it stopped meanwhile: start another
	}
}

// start subscribes to the inbox notes, then reads every pending interrupt,
// and runs the reader.
func (run *inboxRun) start(ctx context.Context) {
	defer close(run.ready)
	run.sub = run.r.Feed.Subscribe(ledger.Topic{Channel: session.InboxChannel})
	all, _, err := run.r.SessionStore.InboxPending(ctx, session.InboxFilter{AllActions: true})
	run.r.live.reads.Add(1)
	if err != nil {
		run.err, run.stopped = err, true
		run.sub.Close()
		run.forget()
		return
	}
	run.pending = map[int64]map[uuid.UUID]bool{}
	for id, sid := range all {
		run.hold(sid, id)
	}
	rctx, cancel := context.WithCancel(context.Background())
	run.cancel = cancel
	go run.loop(rctx)
}

func (run *inboxRun) hold(sid int64, id uuid.UUID) {
	m := run.pending[sid]
	if m == nil {
		m = map[uuid.UUID]bool{}
		run.pending[sid] = m
	}
	m[id] = true
}

func (run *inboxRun) settle(sid int64, id uuid.UUID) {
	if m := run.pending[sid]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(run.pending, sid)
		}
	}
}

// pendingIn returns the pending interrupts the reader holds in the
// sessions of note.
func (run *inboxRun) pendingIn(note session.Note) []uuid.UUID {
	var ids []uuid.UUID
	add := func(m map[uuid.UUID]bool) {
		for id := range m {
			ids = append(ids, id)
		}
	}
	if note.All {
		for _, m := range run.pending {
			add(m)
		}
		return ids
	}
	for _, sid := range note.SIDs {
		add(run.pending[sid])
	}
	return ids
}

// loop reads what each note's transaction changed and hands it to every
// subscriber, until they are all gone (ctx ends), a read fails, notes were
// missed or the feed closes.
func (run *inboxRun) loop(ctx context.Context) {
	defer run.sub.Close()
	for {
		var n ledger.Note
		var ok bool
		select {
		case <-ctx.Done():
			return
		case n, ok = <-run.sub.C():
		}
		if !ok {
			run.stop(ledger.ErrFeedClosed)
			return
		}
		if n.Resync || len(run.sub.Lost()) > 0 {
			run.stop(lagged("inbox changes were missed (the server's change feed reconnected or fell behind)"))
			return
		}
		note, err := session.ParseNote(n.Payload)
		if err != nil {
			run.stop(err)
			return
		}
		changes, err := run.r.SessionStore.InboxNoteChanges(ctx, note, run.pendingIn(note))
		run.r.live.reads.Add(1)
		if err != nil {
			if ctx.Err() == nil {
				run.stop(err)
			}
			return
		}
		if len(changes) == 0 {
			continue
		}
		ids := make([]uuid.UUID, 0, len(changes))
		for i := range changes {
			c := &changes[i]
			if c.Status == session.InterruptPending {
				run.hold(c.SID, c.ID)
			} else {
				run.settle(c.SID, c.ID)
			}
			ids = append(ids, c.Session.ActionID)
		}
		// The items' actions, once for all (a console shows them); when
		// this fails, each subscriber's resolver reads its own.
		if acts, err := run.r.ActionStore.GetMany(ctx, ids); err == nil {
			for i := range changes {
				changes[i].Action = acts[changes[i].Session.ActionID]
			}
		}
		run.deliver(&inboxResult{note: note, items: changes})
	}
}

// deliver puts res in every subscriber's box; one whose box is full is
// ended with SUBSCRIPTION_LAGGED.
func (run *inboxRun) deliver(res *inboxResult) {
	run.mu.Lock()
	defer run.mu.Unlock()
	for iw := range run.watchers {
		if !iw.box.put(res, false) {
			iw.box.close(lagged("inbox changes were missed while it was not reading"))
			run.r.live.lagged.Add(1)
			delete(run.watchers, iw)
		}
	}
}

// stop ends every subscriber with err.
func (run *inboxRun) stop(err error) {
	run.mu.Lock()
	run.stopped, run.endErr = true, err
	for iw := range run.watchers {
		iw.box.close(err)
	}
	run.mu.Unlock()
	run.cancel()
	run.forget()
}

// leave ends a subscriber's membership; the last one gone, the reader
// stops.
func (iw *inboxWatcher) leave() {
	run := iw.run
	run.mu.Lock()
	delete(run.watchers, iw)
	stop := len(run.watchers) == 0 && !run.stopped
	if stop {
		run.stopped = true
	}
	run.mu.Unlock()
	if stop {
		run.cancel()
		run.forget()
	}
}

// forget takes the reader out of the resolver's, if it is still there.
func (run *inboxRun) forget() {
	hs := &run.r.live
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.inbox == run {
		hs.inbox = nil
	}
}

// apply returns the updates a read makes for this subscriber: RAISED for
// each interrupt it covers that the note's transaction raised and its
// first read did not see, ANSWERED or CLOSED for each it holds as pending
// that is no longer.
func (iw *inboxWatcher) apply(res *inboxResult) []*model.InboxUpdate {
	var ups []*model.InboxUpdate
	for i := range res.items {
		c := &res.items[i]
		it := &c.InboxItem
		if !iw.f.Covers(it) {
			continue
		}
		_, held := iw.known[it.ID]
		if !held && c.Raised && !iw.snap.Saw(res.note.XID) {
			iw.known[it.ID] = it.SID
			held = true
			ups = append(ups, &model.InboxUpdate{Kind: model.InboxUpdateKindRaised, Item: it, Pending: len(iw.known)})
		}
		if !held || it.Status == session.InterruptPending {
			continue
		}
		delete(iw.known, it.ID)
		k := model.InboxUpdateKindAnswered
		if it.Status == session.InterruptClosed {
			k = model.InboxUpdateKindClosed
		}
		ups = append(ups, &model.InboxUpdate{Kind: k, Item: it, Pending: len(iw.known)})
	}
	return ups
}

package graph

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Subscriptions (issue 12). Each runs one goroutine that reads what changed
// from the database when the process's change feed (ledger.Feed) says
// something did, and sends updates down an unbuffered channel that gqlgen's
// transport drains: a client that reads slowly holds its goroutine back,
// and the feed notes it misses meanwhile are caught up from the database
// or, when that cannot be done, end the subscription with
// SUBSCRIPTION_LAGGED. docs/subscriptions.md tells the whole story.

// streamEnd is why a subscription ended, for Streams to report.
type streamEnd struct {
	mu   sync.Mutex
	err  error
	sent bool
}

type streamEndKey struct{}

// Streams is a gqlgen extension that ends a subscription whose resolver
// stopped with an error with one last response carrying that error (through
// the error presenter, so it has extensions.code and, when retrying helps,
// extensions.retryable), on every transport. Without it the stream would
// just end, and the client could not tell a lagged subscriber from a
// finished one.
type Streams struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
	graphql.ResponseInterceptor
} = Streams{}

// ExtensionName names the extension.
func (Streams) ExtensionName() string { return "Streams" }

// Validate accepts any schema.
func (Streams) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation gives a subscription a place for its end reason.
func (Streams) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if oc := graphql.GetOperationContext(ctx); oc != nil && oc.Operation != nil && oc.Operation.Operation == ast.Subscription {
		ctx = context.WithValue(ctx, streamEndKey{}, &streamEnd{})
	}
	return next(ctx)
}

// InterceptResponse adds the end reason once the stream has ended.
func (Streams) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	end, _ := ctx.Value(streamEndKey{}).(*streamEnd)
	if resp != nil || end == nil {
		return resp
	}
	end.mu.Lock()
	defer end.mu.Unlock()
	if end.err == nil || end.sent {
		return nil
	}
	end.sent = true
	graphql.AddError(ctx, end.err)
	return &graphql.Response{Errors: graphql.GetErrors(ctx)}
}

// endStream records why the subscription of ctx ends.
func endStream(ctx context.Context, err error) {
	if end, _ := ctx.Value(streamEndKey{}).(*streamEnd); end != nil {
		end.mu.Lock()
		end.err = err
		end.mu.Unlock()
	}
}

// Why a subscription ends early.
var (
	errShuttingDown = fault.New(fault.Unavailable, "", "the server is shutting down; subscribe again")
	errNoFeed       = fault.New(fault.NotImplemented, "", "this process does not serve subscriptions")
)

func lagged(format string, args ...any) error {
	return fault.New(fault.SubscriptionLagged, "", "the subscription fell behind: "+format+"; subscribe again", args...)
}

type credentialKey struct{}

// WithCredential marks ctx as a stream's whose credential is watched:
// cred ends, with the reason as its cause (context.Cause), when the
// credential the stream was opened with is no longer good (a revoked
// token, changed policies). Each subscription of the stream then ends with
// that reason as its last response.
func WithCredential(ctx, cred context.Context) context.Context {
	return context.WithValue(ctx, credentialKey{}, cred)
}

// stream runs produce in a goroutine of its own, which ends the channel it
// returns when produce returns: on ctx's end quietly, on an error with the
// error as the stream's last response (Streams). produce's context also
// ends when the stream's credential does (WithCredential), and the stream
// then ends with the credential's reason. send blocks until the transport
// takes the value and reports false once produce's context has ended. A
// panic ends the stream with INTERNAL, never the process.
func stream[T any](ctx context.Context, r *Resolver, produce func(ctx context.Context, send func(T) bool) error) <-chan T {
	out := make(chan T)
	pctx, cancel := context.WithCancelCause(ctx)
	if cred, ok := ctx.Value(credentialKey{}).(context.Context); ok {
		stop := context.AfterFunc(cred, func() { cancel(context.Cause(cred)) })
		context.AfterFunc(pctx, func() { stop() })
	}
	go func() {
		defer close(out)
		defer cancel(nil)
		defer func() {
			if v := recover(); v != nil {
				r.Log.Error("panic in subscription", "panic", v, "stack", string(debug.Stack()))
				endStream(ctx, &fault.Error{Code: fault.Internal, Message: "internal error"})
			}
		}()
		send := func(v T) bool {
			select {
			case out <- v:
				return true
			case <-pctx.Done():
				return false
			}
		}
		err := produce(pctx, send)
		switch {
		case ctx.Err() != nil:
		case pctx.Err() != nil:
			endStream(ctx, context.Cause(pctx))
		case errors.Is(err, ledger.ErrFeedClosed):
			endStream(ctx, errShuttingDown)
		case err != nil:
			endStream(ctx, err)
		}
	}()
	return out
}

// ledgerEvents streams committed events after a position: replayed from the
// database, then followed live through the Tail, which reads by position,
// so no event is skipped however the commits interleave.
func (r *Resolver) ledgerEvents(ctx context.Context, after, typ *string) (<-chan *ledger.Event, error) {
	if r.Tail == nil {
		return nil, errNoFeed
	}
	pos := int64(-1)
	if after != nil && *after != "" {
		var err error
		if pos, err = positionCursor(*after); err != nil {
			return nil, err
		}
	}
	head, err := r.Tail.Acquire(ctx)
	if errors.Is(err, ledger.ErrFeedClosed) {
		return nil, errShuttingDown
	}
	if err != nil {
		return nil, err
	}
	if pos < 0 {
		pos = head
	}
	t := deref(typ)
	return stream(ctx, r, func(ctx context.Context, send func(*ledger.Event) bool) error {
		defer r.Tail.Release()
		for {
			evs, seen, err := r.Tail.Next(ctx, pos, t, DefaultPage)
			if err != nil {
				return err
			}
			for i := range evs {
				if !send(&evs[i]) {
					return nil
				}
			}
			pos = seen
		}
	}), nil
}

// positionCursor reads a ledger position given as Event.position (decimal)
// or as an events page's endCursor.
func positionCursor(s string) (int64, error) {
	v := s
	if raw, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		if p, ok := strings.CutPrefix(string(raw), "position:"); ok {
			v = p
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fault.New(fault.BadInput, "after", "after is a position (Event.position) or an events page's endCursor")
	}
	return n, nil
}

// sessionUpdates streams a session's changes and its running turn's
// transcript entries (see sessionWatch).
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
		return nil, fault.New(fault.NotFound, "id", "this action has no session with this id")
	}
	key := session.SIDKey(s.SID)
	// Subscribe first, read second: a change committed in between is both
	// in the read and in a note, never in neither.
	sub := r.Feed.Subscribe(ledger.Topic{Channel: session.SessionsChannel, Key: key}, ledger.Topic{Channel: turns.TranscriptChannel, Key: key})
	w := &sessionWatch{r: r, sid: s.SID, live: map[liveKey]int{}}
	first, err := w.read(ctx)
	if err != nil {
		sub.Close()
		return nil, err
	}
	return stream(ctx, r, func(ctx context.Context, send func(*model.SessionUpdate) bool) error {
		defer sub.Close()
		for _, u := range first {
			if !send(u) {
				return nil
			}
		}
		for !w.done() {
			var n ledger.Note
			var ok bool
			select {
			case <-ctx.Done():
				return nil
			case n, ok = <-sub.C():
			}
			if !ok {
				return ledger.ErrFeedClosed
			}
			ups, err := w.note(ctx, n, sub.Lost())
			if err != nil {
				return err
			}
			for _, u := range ups {
				if !send(u) {
					return nil
				}
			}
		}
		return nil
	}), nil
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
	r   *Resolver
	sid int64

	read1      bool
	sess       *session.Session
	pending    int
	print      string
	turn       *turns.Turn // the newest turn read
	firstTurn  int         // the newest turn when subscribing
	liveTurn   int         // the turn whose entries live tracks
	live       map[liveKey]int
	closedDone bool
}

// done reports that the session is closed and its last turn settled:
// nothing will change any more.
func (w *sessionWatch) done() bool { return w.closedDone }

// note handles one feed note; lost are the channels of which notes were
// dropped before it.
func (w *sessionWatch) note(ctx context.Context, n ledger.Note, lost []string) ([]*model.SessionUpdate, error) {
	var ups []*model.SessionUpdate
	var err error
	switch {
	case slices.Contains(lost, turns.TranscriptChannel):
		// The entries a running turn wrote are in no table until it
		// commits: a missed one cannot be read back. Only when no turn ran
		// before or since can nothing have been missed.
		before, wasRunning := w.turnNumber(), w.turn != nil && w.turn.Status == "RUNNING"
		if ups, err = w.read(ctx); err != nil {
			return nil, err
		}
		if wasRunning || w.turnNumber() != before || (w.turn != nil && w.turn.Status == "RUNNING") {
			return nil, lagged("transcript entries of a running turn were missed (the committed transcript of the turn's execution has them all once it ends)")
		}
	case n.Resync || n.Channel == session.SessionsChannel || slices.Contains(lost, session.SessionsChannel):
		if ups, err = w.read(ctx); err != nil {
			return nil, err
		}
	}
	if n.Channel == turns.TranscriptChannel {
		more, err := w.entry(n.Payload)
		if err != nil {
			return nil, err
		}
		ups = append(ups, more...)
	}
	return ups, nil
}

func (w *sessionWatch) turnNumber() int {
	if w.turn == nil {
		return 0
	}
	return w.turn.Number
}

// read reads the session and the turns that changed since the last read
// and returns the updates to send: one per changed turn, oldest first, or
// one for a change of the session alone, or none.
func (w *sessionWatch) read(ctx context.Context) ([]*model.SessionUpdate, error) {
	var s *session.Session
	var pending int
	var ts []turns.Turn
	err := w.r.SessionStore.ReadConsistent(ctx, func(q ledger.Querier) error {
		var err error
		if s, pending, err = session.Watch(ctx, q, w.sid); err != nil || s == nil || s.TurnCount == 0 {
			return err
		}
		from := s.TurnCount // the first read shows the newest turn only
		if w.read1 {
			from = 1
			if w.turn != nil {
				from = w.turn.Number
			}
		}
		ts, err = turns.TurnsFrom(ctx, q, w.sid, from)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fault.New(fault.NotFound, "id", "the session no longer exists")
	}
	var changed []turns.Turn
	newest := w.turn
	for i := range ts {
		t := ts[i]
		if w.turn == nil || t.Number > w.turn.Number || (t.Number == w.turn.Number && turnPrint(t) != turnPrint(*w.turn)) {
			changed = append(changed, t)
		}
		newest = &ts[i]
	}
	print := sessionPrint(s, pending, w.r.Clock.Now())
	first := !w.read1
	if first {
		w.read1 = true
		if newest != nil {
			w.firstTurn = newest.Number
		}
	}
	var ups []*model.SessionUpdate
	switch {
	case len(changed) > 0 && !first:
		for i := range changed {
			ups = append(ups, &model.SessionUpdate{Kind: model.SessionUpdateKindSession, Session: s, PendingInputs: pending, Turn: &changed[i]})
		}
	case first || print != w.print:
		ups = append(ups, &model.SessionUpdate{Kind: model.SessionUpdateKindSession, Session: s, PendingInputs: pending, Turn: newest})
	}
	w.sess, w.pending, w.print, w.turn = s, pending, print, newest
	w.closedDone = s.Status.Final() && (newest == nil || newest.Status != "RUNNING")
	return ups, nil
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

// entry turns a live transcript note into a TRANSCRIPT update. Within an
// attempt the sequence numbers go up by one; an attempt that begins after
// the subscription (a turn newer than the one running when it started)
// begins at 1. A note that breaks either rule means entries were lost on
// the way, and the subscription ends.
func (w *sessionWatch) entry(payload string) ([]*model.SessionUpdate, error) {
	sid, e, err := turns.ParseLive(payload)
	if err != nil {
		return nil, err
	}
	if sid != w.sid {
		return nil, nil
	}
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

// inboxUpdates streams the count of the inbox the caller may read, then
// each interrupt raised, answered or closed in it, exactly once each (see
// session.Store.InboxChanges). The subscriber holds the ids of the
// pending interrupts it covers and skips the notes of transactions its
// first read already saw. A missed note ends it with SUBSCRIPTION_LAGGED:
// an interrupt raised and answered while it was not looking could not be
// reported.
func (r *Resolver) inboxUpdates(ctx context.Context, kind *model.InterruptKind, actionID *uuid.UUID) (<-chan *model.InboxUpdate, error) {
	if r.Feed == nil {
		return nil, errNoFeed
	}
	p, _ := auth.From(ctx)
	if p.Session != nil {
		return nil, auth.Forbidden()
	}
	f := inboxFilter(p, kind, actionID)
	sub := r.Feed.Subscribe(ledger.Topic{Channel: session.InboxChannel})
	known, snap, err := r.SessionStore.InboxPending(ctx, f)
	if err != nil {
		sub.Close()
		return nil, err
	}
	return stream(ctx, r, func(ctx context.Context, send func(*model.InboxUpdate) bool) error {
		defer sub.Close()
		if !send(&model.InboxUpdate{Kind: model.InboxUpdateKindCurrent, Pending: len(known)}) {
			return nil
		}
		for {
			var n ledger.Note
			var ok bool
			select {
			case <-ctx.Done():
				return nil
			case n, ok = <-sub.C():
			}
			if !ok {
				return ledger.ErrFeedClosed
			}
			if n.Resync || len(sub.Lost()) > 0 {
				return lagged("inbox changes were missed while it was not reading")
			}
			note, err := session.ParseNote(n.Payload)
			if err != nil {
				return err
			}
			if snap.Saw(note.XID) {
				continue // already in the first read
			}
			ids := make([]uuid.UUID, 0, len(known))
			for id := range known {
				ids = append(ids, id)
			}
			items, err := r.SessionStore.InboxChanges(ctx, f, note, ids)
			if err != nil {
				return err
			}
			for i := range items {
				it := &items[i]
				if _, ok := known[it.ID]; !ok {
					known[it.ID] = it.SID
					if !send(&model.InboxUpdate{Kind: model.InboxUpdateKindRaised, Item: it, Pending: len(known)}) {
						return nil
					}
				}
				if it.Status == session.InterruptPending {
					continue
				}
				delete(known, it.ID)
				k := model.InboxUpdateKindAnswered
				if it.Status == session.InterruptClosed {
					k = model.InboxUpdateKindClosed
				}
				if !send(&model.InboxUpdate{Kind: k, Item: it, Pending: len(known)}) {
					return nil
				}
			}
		}
	}), nil
}

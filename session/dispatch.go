package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/pgplan"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/schedule"
)

// DefaultBatch is how many events one dispatch transaction handles.
const DefaultBatch = 500

// Dispatcher matches every committed event against the active triggers
// exactly once, in commit order (S2-S6). Its cursor advances in the same
// transaction as the inputs, sessions and intake records an event produces,
// so a crash neither loses nor repeats a delivery. Several dispatchers
// (processes) may run: the cursor row lock lets one batch run at a time.
type Dispatcher struct {
	pool    *pgxpool.Pool
	actions *action.Store
	clock   clock.Clock
	log     *slog.Logger
	Batch   int
	// Authorities, when set, keeps each action version to the events of
	// the ledger namespaces its authority may read (issue 11): an event of
	// any other namespace is not even evaluated against its triggers.
	Authorities *auth.Authorities
	// Executions queues the executions of actions without a session block
	// in the dispatch transaction (issue 15; turns.QueueMatches). A
	// batch with such a match fails without it.
	Executions QueueFunc
	// Metrics, when set, counts dispatch batches; Tracer, when set,
	// records a span per batch that dispatched events, the root of a
	// trace of its own (issue 12).
	Metrics *observe.Metrics
	Tracer  trace.Tracer
	// Notifier announces what a batch changed once it committed (issue
	// 14); NewDispatcher gives one of its own, the process shares one.
	Notifier *ledger.Notifier

	// alive is when Run last finished a round (UnixNano, real time).
	alive atomic.Int64

	// backfilling: a backfill was judging events when the index was
	// last built (issue 15); Run looks for backfill work only then.
	backfilling atomic.Bool

	epoch     int64 // actions epoch the index was built at; -1: never
	authEpoch int64 // policy epoch the index's authorities were read at
	index     *triggerIndex
}

// NewDispatcher returns a Dispatcher.
func NewDispatcher(pool *pgxpool.Pool, actions *action.Store, c clock.Clock, log *slog.Logger) *Dispatcher {
	return &Dispatcher{pool: pool, actions: actions, clock: c, log: log, Batch: DefaultBatch, epoch: -1,
		Notifier: ledger.NewNotifier(pool)}
}

// Run dispatches until ctx ends, waking on wake (ledger notifications) and
// at least every poll.
func (d *Dispatcher) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		for {
			n, err := d.DispatchOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d.log.Error("dispatch failed", "err", err)
				break
			}
			d.alive.Store(time.Now().UnixNano())
			if n < d.Batch {
				break
			}
		}
		// Live events first; then one batch of a backfill, and round
		// again at once while a backfill has work (issue 15).
		if d.backfilling.Load() {
			n, err := d.BackfillOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.log.Error("backfill failed", "err", err)
			}
			if err == nil && n > 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-t.C:
		}
	}
}

// Alive returns when Run last completed a round without error, whether it
// dispatched events, found none or found the cursor held by another
// dispatcher (real time; zero before the first). /readyz reads it (issue 12).
func (d *Dispatcher) Alive() time.Time {
	ns := d.alive.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// DispatchOnce handles one batch of events after the cursor and returns how
// many it handled (0 when caught up or when another dispatcher holds the cursor).
func (d *Dispatcher) DispatchOnce(ctx context.Context) (n int, err error) {
	began := time.Now()
	var span trace.Span
	defer func() {
		if span != nil {
			observe.End(span, err)
		}
		if err == nil && n > 0 {
			d.Metrics.DispatchBatch(n, time.Since(began))
		}
	}()
	var b *batch // the batch with events, once made
	// A connection of its own, not pool.Begin: a batch sends its COMMIT
	// itself (batch.commit), and a pooled transaction gives its connection
	// back only on a Commit or Rollback of its own, one more round trip.
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	// One round trip begins the transaction, locks the cursor, reads the
	// policy epoch and the events after the cursor (issue 14: the
	// dispatcher is the pipeline's one serial step, and a round trip less
	// is a batch sooner). The events are read after the cursor the lock
	// read (lockedCursor); none are read when another dispatcher holds it.
	var (
		cursor, epoch, authEpoch int64
		ok                       bool
		events                   []ledger.Event
	)
	first := &pgx.Batch{}
	first.BeginTx(pgx.TxOptions{})
	queueLockCursor(first, &cursor, &epoch, &ok)
	if d.Authorities.Enforced() {
		auth.QueueEpoch(first, &authEpoch)
	}
	ledger.QueueReadAfter(first, lockedCursor, d.Batch, &events) // none unless locked here
	br := conn.SendBatch(ctx, first)
	tx := br.Tx()
	if err := br.Close(); err != nil {
		_ = tx.Rollback(ctx)
		return 0, fmt.Errorf("dispatch: %w", err)
	}
	err = func() error {
		// The batch commits without waiting for its WAL to reach disk
		// (synchronous_commit off for this transaction alone): a crash can
		// lose only the newest such commits, each whole, cursor included, and
		// the next dispatcher does them again from the ledger, to the same
		// result. Nothing is acknowledged on the strength of a dispatch, and
		// every transaction that acknowledges what builds on one (a turn's
		// commit; a claim that appends firings or ends a session, while
		// other claims commit as this does) commits synchronously, which
		// makes the WAL before it durable too.
		// It keeps the batch from waiting for, and adding, one disk flush
		// per batch beside the writers' (issue 14).
		if !ok {
			return nil // another dispatcher is working
		}
		if len(events) > 0 && events[0].Position <= cursor {
			return fmt.Errorf("dispatch: read position %d at or before the cursor %d", events[0].Position, cursor)
		}
		if epoch != d.epoch || authEpoch != d.authEpoch || d.index == nil {
			active, err := d.actions.Active(ctx, tx)
			if err != nil {
				return err
			}
			ix := buildIndex(active)
			if err := ix.authorize(ctx, tx, d.Authorities); err != nil {
				return err
			}
			// Whether Run need look for backfill work: a backfill starts
			// and joins live dispatch with a move of the epoch.
			var backfilling bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM action_backfills WHERE joined_position IS NULL)`).Scan(&backfilling); err != nil {
				return err
			}
			d.backfilling.Store(backfilling)
			d.index, d.epoch, d.authEpoch = ix, epoch, authEpoch
		}
		if len(events) == 0 {
			return nil
		}
		// A batch with events is traced from when it began; polls that
		// find nothing are not.
		ctx, span = d.tracer().Start(ctx, "dispatch.batch", trace.WithNewRoot(), trace.WithTimestamp(began),
			trace.WithAttributes(observe.Events.Int(len(events)), observe.FromPosition.Int64(events[0].Position),
				observe.ToPosition.Int64(events[len(events)-1].Position)))
		b = &batch{d: d, index: d.index, tx: tx, commit: true, now: d.clock.Now(), diags: map[diagKey]*diagEntry{}}
		for _, ev := range events {
			if err := b.event(ctx, ev); err != nil {
				return fmt.Errorf("dispatch: event %d: %w", ev.Position, err)
			}
		}
		if err := b.flush(ctx, events[len(events)-1].Position); err != nil {
			return err
		}
		n = len(events)
		return nil
	}()
	switch {
	case err != nil:
		_ = tx.Rollback(ctx)
	case b == nil:
		// Nothing dispatched (caught up, or another dispatcher holds the
		// cursor): the transaction read only. A batch committed itself.
		err = tx.Commit(ctx)
	}
	if err == nil && b != nil {
		b.notice.Post(d.Notifier, b.xid) // committed: tell the others
	}
	return n, err
}

// lockCursorSQL locks the dispatch cursor row for a batch, with the
// batch's settings (synchronous_commit off, pgplan.KeyJoins: its
// deliveries join its keys to sessions and inputs by nested loops, one
// index probe per key), and reads the cursor and the actions epoch; no row
// when another transaction holds it. Live and backfill batches both take
// it, so they never run at once.
//
// The settings are made on the row the lock returns, outside the locking
// query: a select list beside FOR UPDATE is computed before the row is
// locked, even for a row then skipped.
const lockCursorSQL = `WITH c AS (SELECT position, actions_epoch FROM dispatch_state FOR UPDATE SKIP LOCKED)
	SELECT position, actions_epoch, set_config('synchronous_commit', 'off', true) IS NOT NULL,
		` + pgplan.KeyJoinsExpr + `, set_config('` + cursorSetting + `', position::text, true)
	FROM c`

// cursorSetting holds, for the rest of a transaction that locked the
// cursor (lockCursorSQL), its position; lockedCursor reads it, and is null
// in a transaction that did not lock it.
const (
	cursorSetting = "actionsledger.cursor"
	lockedCursor  = `nullif(current_setting('` + cursorSetting + `', true), '')::bigint`
)

// lockCursor runs lockCursorSQL in tx: ok false when another transaction
// holds the cursor.
func lockCursor(ctx context.Context, tx pgx.Tx) (cursor, epoch int64, ok bool, err error) {
	err = tx.QueryRow(ctx, lockCursorSQL).Scan(&cursor, &epoch, nil, nil, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("dispatch: lock cursor: %w", err)
	}
	return cursor, epoch, true, nil
}

// queueLockCursor queues lockCursorSQL in b: ok says whether it locked the
// cursor (and cursor and epoch were read).
func queueLockCursor(b *pgx.Batch, cursor, epoch *int64, ok *bool) {
	b.Queue(lockCursorSQL).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(cursor, epoch, nil, nil, nil); err != nil {
				return fmt.Errorf("dispatch: lock cursor: %w", err)
			}
			*ok = true
		}
		return rows.Err()
	})
}

// versionIndex is the trigger index of one version alone, covering every
// event after after (a backfill's or a dry run's), with its authority.
func (d *Dispatcher) versionIndex(ctx context.Context, tx pgx.Tx, comp *action.Compiled, after int64) (*triggerIndex, error) {
	cp := *comp
	cp.FromPosition, cp.ToPosition, cp.PinnedToPosition = after, 0, 0
	ix := buildIndex([]*action.Compiled{&cp})
	if err := ix.authorize(ctx, tx, d.Authorities); err != nil {
		return nil, err
	}
	return ix, nil
}

// readRange reads up to limit events after after and up to bound.
func readRange(ctx context.Context, tx pgx.Tx, after, bound int64, limit int) ([]ledger.Event, error) {
	if after >= bound {
		return nil, nil
	}
	events, err := ledger.ReadAfter(ctx, tx, after, limit, "")
	if err != nil {
		return nil, err
	}
	for i, ev := range events {
		if ev.Position > bound {
			return events[:i], nil
		}
	}
	return events, nil
}

func (d *Dispatcher) tracer() trace.Tracer {
	if d.Tracer == nil {
		return observe.Tracer(nil)
	}
	return d.Tracer
}

// triggerIndex finds candidate triggers for an event by its type, so the
// cost per event does not grow with the number of actions whose predicates
// pin other types. Triggers whose predicate pins no type are always candidates.
type triggerIndex struct {
	byType   map[string][]ref
	unpinned []ref
	// authority of each version in the index; nil: no filtering.
	authority map[*action.Compiled]*auth.Authority
}

// authorize resolves the authority of every version in the index (none
// needed when authorities are not enforced: every version may read all).
func (ix *triggerIndex) authorize(ctx context.Context, q auth.Querier, r *auth.Authorities) error {
	if !r.Enforced() {
		return nil
	}
	ix.authority = map[*action.Compiled]*auth.Authority{}
	add := func(rs []ref) error {
		for _, x := range rs {
			if _, ok := ix.authority[x.action]; ok {
				continue
			}
			a, err := r.For(ctx, q, x.action.Author, x.action.Grants)
			if err != nil {
				return err
			}
			ix.authority[x.action] = a
		}
		return nil
	}
	if err := add(ix.unpinned); err != nil {
		return err
	}
	for _, rs := range ix.byType {
		if err := add(rs); err != nil {
			return err
		}
	}
	return nil
}

// mayRead reports whether version c may see an event of namespace ns.
func (ix *triggerIndex) mayRead(c *action.Compiled, ns string) bool {
	return ix.authority == nil || ix.authority[c].MayRead(ns)
}

type ref struct {
	action  *action.Compiled
	trigger *action.CompiledTrigger
}

func buildIndex(active []*action.Compiled) *triggerIndex {
	ix := &triggerIndex{byType: map[string][]ref{}}
	for _, a := range active {
		if a.Session == nil && !a.Sessionless() {
			continue // a tool alone: no trigger
		}
		for _, t := range a.Triggers {
			r := ref{a, t}
			if t.EventTypes == nil {
				ix.unpinned = append(ix.unpinned, r)
				continue
			}
			for _, typ := range t.EventTypes {
				ix.byType[typ] = append(ix.byType[typ], r)
			}
		}
	}
	return ix
}

// candidates returns the triggers that may match ev, grouped by action
// version in trigger order (A2). A version whose positions cover the event
// (Compiled.Covers) offers all its triggers as covering; an older version
// still in the index for its open sessions offers its triggers for them
// alone (Compiled.CoversPinned), covers false; any other is skipped
// (created after the event, or its action disabled before it).
func (ix *triggerIndex) candidates(ev ledger.Event) []actionRefs {
	var out []actionRefs
	at := map[*action.Compiled]int{}
	ns := auth.EventNamespace(ev.Type)
	offer := func(r ref) bool { return r.trigger.Schedule == nil && ix.mayRead(r.action, ns) }
	if ev.Type == schedule.FiredType {
		// A firing goes to the schedule trigger that fired (A4), which
		// needs no grant to see it, and to no other trigger; a session
		// clock's firing (C3) goes to none.
		id, name, ok := action.FiredBy(ev)
		if !ok {
			return nil
		}
		offer = func(r ref) bool {
			return r.trigger.Schedule != nil && r.action.ActionID == id && r.trigger.Name == name
		}
	}
	add := func(rs []ref) {
		for _, r := range rs {
			if !r.action.CoversPinned(ev.Position) || !offer(r) {
				continue
			}
			i, ok := at[r.action]
			if !ok {
				i = len(out)
				at[r.action] = i
				out = append(out, actionRefs{action: r.action, covers: r.action.Covers(ev.Position)})
			}
			out[i].triggers = append(out[i].triggers, r.trigger)
		}
	}
	add(ix.byType[ev.Type])
	if ev.Type != schedule.FiredType {
		add(ix.unpinned)
	}
	for i := range out {
		sortTriggers(out[i].triggers)
	}
	return out
}

// actionRefs are one action version's candidate triggers for an event.
type actionRefs struct {
	action *action.Compiled
	// covers: the version was current when the event committed (A2); else
	// its triggers reach only the open sessions pinned to it.
	covers   bool
	triggers []*action.CompiledTrigger
}

func sortTriggers(ts []*action.CompiledTrigger) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Index < ts[j-1].Index; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

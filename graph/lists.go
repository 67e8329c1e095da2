package graph

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/vikstrous/dataloadgen"

	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Per-parent lists (issue 14): a turn's inputs, a page of an execution's
// transcript and of its children. Each has a loader, so the siblings of a
// list read theirs in one statement, and pages are keyed by their
// arguments: the limit is first+1 (paginate reads one more to tell whether
// there is a next page).

// transcriptKey names a page of an execution's transcript.
type transcriptKey struct {
	exec     uuid.UUID
	afterSeq int
	limit    int
}

// childrenKey names a page of an execution's children.
type childrenKey struct {
	parent  uuid.UUID
	afterID uuid.UUID
	limit   int
}

// read queues reads on one batch and sends it: one round trip, one
// snapshot. An empty batch sends nothing.
func (r *Resolver) read(ctx context.Context, queue func(b *pgx.Batch)) error {
	b := &pgx.Batch{}
	queue(b)
	if b.Len() == 0 {
		return nil
	}
	return r.DB.SendBatch(ctx, b).Close()
}

// turnInputs returns the inputs a turn took, in the order it had them.
func (r *Resolver) turnInputs(ctx context.Context, sid int64, number int) ([]session.Input, error) {
	l := loadersFrom(ctx)
	if l == nil {
		return r.SessionStore.TurnInputs(ctx, sid, number)
	}
	return lazyTurnInputs(r, l).Load(ctx, session.TurnRef{SID: sid, Turn: number})
}

// transcriptPage returns up to limit entries of an execution's transcript
// after sequence afterSeq.
func (r *Resolver) transcriptPage(ctx context.Context, k transcriptKey) ([]turns.Entry, error) {
	l := loadersFrom(ctx)
	if l == nil {
		return r.TurnStore.Transcript(ctx, k.exec, k.afterSeq, k.limit)
	}
	return lazyTranscripts(r, l).Load(ctx, k)
}

// childrenPage returns up to limit children of an execution with ids above afterID.
func (r *Resolver) childrenPage(ctx context.Context, k childrenKey) ([]turns.Execution, error) {
	l := loadersFrom(ctx)
	if l == nil {
		return r.TurnStore.Children(ctx, k.parent, k.afterID, k.limit)
	}
	return lazyChildren(r, l).Load(ctx, k)
}

func lazyTurnInputs(r *Resolver, l *loaders) *dataloadgen.Loader[session.TurnRef, []session.Input] {
	return lazy(l, &l.turnInputs, func(ctx context.Context, keys []session.TurnRef) (map[session.TurnRef][]session.Input, error) {
		into := make(map[session.TurnRef][]session.Input, len(keys))
		return into, r.read(ctx, func(b *pgx.Batch) { session.QueueTurnInputs(b, keys, into) })
	})
}

func lazyTranscripts(r *Resolver, l *loaders) *dataloadgen.Loader[transcriptKey, []turns.Entry] {
	type page struct{ afterSeq, limit int }
	return lazy(l, &l.transcripts, pages(r, func(k transcriptKey) (uuid.UUID, page) { return k.exec, page{k.afterSeq, k.limit} },
		func(b *pgx.Batch, ids []uuid.UUID, p page, into map[uuid.UUID][]turns.Entry) {
			turns.QueueTranscripts(b, ids, p.afterSeq, p.limit, into)
		}))
}

func lazyChildren(r *Resolver, l *loaders) *dataloadgen.Loader[childrenKey, []turns.Execution] {
	type page struct {
		afterID uuid.UUID
		limit   int
	}
	return lazy(l, &l.children, pages(r, func(k childrenKey) (uuid.UUID, page) { return k.parent, page{k.afterID, k.limit} },
		func(b *pgx.Batch, ids []uuid.UUID, p page, into map[uuid.UUID][]turns.Execution) {
			turns.QueueChildren(b, ids, p.afterID, p.limit, into)
		}))
}

// pages makes a loader's batch read of pages of a per-parent list from
// queue, which reads the same page (cursor and limit P) of many parents'
// lists: keys asking for different pages take one statement per page, all
// sent in one batch. split tells a key's parent and page.
func pages[K, P comparable, V any](r *Resolver, split func(K) (uuid.UUID, P),
	queue func(b *pgx.Batch, parents []uuid.UUID, p P, into map[uuid.UUID][]V)) func(context.Context, []K) (map[K][]V, error) {
	return func(ctx context.Context, keys []K) (map[K][]V, error) {
		parents := map[P][]uuid.UUID{}
		for _, k := range keys {
			id, p := split(k)
			parents[p] = append(parents[p], id)
		}
		got := make(map[P]map[uuid.UUID][]V, len(parents))
		err := r.read(ctx, func(b *pgx.Batch) {
			for p, ids := range parents {
				got[p] = map[uuid.UUID][]V{}
				queue(b, ids, p, got[p])
			}
		})
		out := make(map[K][]V, len(keys))
		for _, k := range keys {
			id, p := split(k)
			out[k] = got[p][id]
		}
		return out, err
	}
}

package graph

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/vikstrous/dataloadgen"

	"github.com/actionsledger/actionsledger/ledger"
)

type loadersKey struct{}

// loaders batch the lookups a deep query repeats (events by id) per request.
type loaders struct {
	events *dataloadgen.Loader[uuid.UUID, *ledger.Event]
}

// WithLoaders returns middleware that gives each request fresh loaders.
func WithLoaders(store *ledger.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := &loaders{events: dataloadgen.NewLoader(func(ctx context.Context, ids []uuid.UUID) ([]*ledger.Event, []error) {
			found, err := store.EventsByID(ctx, ids)
			out := make([]*ledger.Event, len(ids))
			errs := make([]error, len(ids))
			for i, id := range ids {
				if err != nil {
					errs[i] = err
					continue
				}
				if ev, ok := found[id]; ok {
					out[i] = &ev
				}
			}
			return out, errs
		}, dataloadgen.WithWait(time.Millisecond), dataloadgen.WithBatchCapacity(500))}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loadersKey{}, l)))
	})
}

// event loads one event, batched with its siblings when loaders are installed.
func (r *Resolver) event(ctx context.Context, id uuid.UUID) (*ledger.Event, error) {
	if l, ok := ctx.Value(loadersKey{}).(*loaders); ok {
		return l.events.Load(ctx, id)
	}
	m, err := r.LedgerStore.EventsByID(ctx, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	if ev, ok := m[id]; ok {
		return &ev, nil
	}
	return nil, nil
}

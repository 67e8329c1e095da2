package graph

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vikstrous/dataloadgen"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

type loadersKey struct{}

// loaders batch the lookups a deep query repeats per parent (events,
// actions, action versions, executions and turns by id; a turn's inputs,
// an execution's transcript and children), so a list of N items costs one
// query per kind of lookup, not N. Each loader is made on first use: a
// subscription's update that needs none costs none. A connection's
// resolver may fill them ahead (prefetch.go).
type loaders struct {
	r          *Resolver
	mu         sync.Mutex
	events     *dataloadgen.Loader[uuid.UUID, *ledger.Event]
	actions    *dataloadgen.Loader[uuid.UUID, *action.Action]
	versions   *dataloadgen.Loader[action.VersionKey, *action.Version]
	executions *dataloadgen.Loader[uuid.UUID, *turns.Execution]
	turns      *dataloadgen.Loader[turns.TurnKey, *turns.Turn]
	reached    *dataloadgen.Loader[uuid.UUID, []session.Session]
	// per-parent lists (lists.go)
	turnInputs  *dataloadgen.Loader[session.TurnRef, []session.Input]
	transcripts *dataloadgen.Loader[transcriptKey, []turns.Entry]
	children    *dataloadgen.Loader[childrenKey, []turns.Execution]
	calls       *dataloadgen.Loader[uuid.UUID, int]
	tokens      *dataloadgen.Loader[string, []auth.TokenInfo]
}

// byKey adapts a store's batch lookup (a map of what it found) to a
// dataloader's batch function; missing keys load as nil.
func byKey[K comparable, V any](fetch func(context.Context, []K) (map[K]V, error)) func(context.Context, []K) ([]V, []error) {
	return func(ctx context.Context, keys []K) ([]V, []error) {
		found, err := fetch(ctx, keys)
		out := make([]V, len(keys))
		errs := make([]error, len(keys))
		for i, k := range keys {
			if err != nil {
				errs[i] = err
				continue
			}
			out[i] = found[k]
		}
		return out, errs
	}
}

// lazy returns *l, making it with fetch on first use.
func lazy[K comparable, V any](ls *loaders, l **dataloadgen.Loader[K, V], fetch func(context.Context, []K) (map[K]V, error)) *dataloadgen.Loader[K, V] {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if *l == nil {
		*l = dataloadgen.NewLoader(byKey(fetch), dataloadgen.WithWait(time.Millisecond), dataloadgen.WithBatchCapacity(500))
	}
	return *l
}

func (r *Resolver) newLoaders() *loaders { return &loaders{r: r} }

func (l *loaders) eventLoader() *dataloadgen.Loader[uuid.UUID, *ledger.Event] {
	return lazy(l, &l.events, func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*ledger.Event, error) {
		found, err := l.r.LedgerStore.EventsByID(ctx, ids)
		out := make(map[uuid.UUID]*ledger.Event, len(found))
		for id, ev := range found {
			out[id] = &ev
		}
		return out, err
	})
}

// WithLoaders returns middleware that gives each request fresh loaders.
func (r *Resolver) WithLoaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), loadersKey{}, r.newLoaders())))
	})
}

// Loaders is a gqlgen extension that gives every response without loaders
// fresh ones: each update of a subscription (issue 12), whose connection
// outlives any one response, so no update reads another's cached rows.
type Loaders struct{ Resolver *Resolver }

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = Loaders{}

// ExtensionName names the extension.
func (Loaders) ExtensionName() string { return "Loaders" }

// Validate accepts any schema.
func (Loaders) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse installs fresh loaders when ctx has none.
func (l Loaders) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if _, ok := ctx.Value(loadersKey{}).(*loaders); !ok {
		ctx = context.WithValue(ctx, loadersKey{}, l.Resolver.newLoaders())
	}
	return next(ctx)
}

func loadersFrom(ctx context.Context) *loaders {
	l, _ := ctx.Value(loadersKey{}).(*loaders)
	return l
}

// event loads one event, batched with its siblings when loaders are installed.
func (r *Resolver) event(ctx context.Context, id uuid.UUID) (*ledger.Event, error) {
	if l := loadersFrom(ctx); l != nil {
		return l.eventLoader().Load(ctx, id)
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

// action loads one action's summary (nil when missing), batched.
func (r *Resolver) action(ctx context.Context, id uuid.UUID) (*action.Action, error) {
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.actions, r.ActionStore.GetMany).Load(ctx, id)
	}
	return r.ActionStore.Get(ctx, id)
}

// version loads one action version (nil when missing), batched.
func (r *Resolver) version(ctx context.Context, id uuid.UUID, number int) (*action.Version, error) {
	k := action.VersionKey{ActionID: id, Version: number}
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.versions, r.ActionStore.VersionsByKey).Load(ctx, k)
	}
	m, err := r.ActionStore.VersionsByKey(ctx, []action.VersionKey{k})
	if err != nil {
		return nil, err
	}
	return m[k], nil
}

// execution loads one execution (nil when missing), batched.
func (r *Resolver) execution(ctx context.Context, id uuid.UUID) (*turns.Execution, error) {
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.executions, r.TurnStore.Executions).Load(ctx, id)
	}
	return r.TurnStore.Execution(ctx, id)
}

// reached loads the sessions an event reached (Event.sessions), batched.
func (r *Resolver) reached(ctx context.Context, event uuid.UUID) ([]session.Session, error) {
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.reached, r.SessionStore.ReachedBy).Load(ctx, event)
	}
	m, err := r.SessionStore.ReachedBy(ctx, []uuid.UUID{event})
	return m[event], err
}

// turn loads one turn of a session (nil when missing), batched.
func (r *Resolver) turn(ctx context.Context, sid int64, number int) (*turns.Turn, error) {
	k := turns.TurnKey{SID: sid, Number: number}
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.turns, r.TurnStore.TurnsByKey).Load(ctx, k)
	}
	return r.TurnStore.Turn(ctx, sid, number)
}

// calls loads how many tool calls an execution made (issue 17), batched.
func (r *Resolver) calls(ctx context.Context, id uuid.UUID) (int, error) {
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.calls, r.TurnStore.CallCounts).Load(ctx, id)
	}
	m, err := r.TurnStore.CallCounts(ctx, []uuid.UUID{id})
	return m[id], err
}

// tokensOf loads a principal's tokens, revoked ones included, batched.
func (r *Resolver) tokensOf(ctx context.Context, principal string) ([]auth.TokenInfo, error) {
	if l := loadersFrom(ctx); l != nil {
		return lazy(l, &l.tokens, r.AuthStore.TokensOf).Load(ctx, principal)
	}
	m, err := r.AuthStore.TokensOf(ctx, []string{principal})
	return m[principal], err
}

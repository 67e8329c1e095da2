// Package graph is the GraphQL layer: resolvers translate between the API
// and the domain packages and hold no business rules of their own.
package graph

//go:generate go run ../graph/gen

import (
	"context"
	"log/slog"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/tools"
	"github.com/actionsledger/actionsledger/turns"
)

// Resolver is the root resolver; it holds the domain stores.
type Resolver struct {
	LedgerStore  *ledger.Store
	ActionStore  *action.Store
	SessionStore *session.Store
	TurnStore    *turns.Store
	Tools        *tools.Service
	AuthStore    *auth.Store
	Clock        clock.Clock
	Log          *slog.Logger
	// Replayer runs replayExecution (turns.Executor.Replay); nil: refused.
	Replayer func(ctx context.Context, actionID, id uuid.UUID, provider, by string) (*turns.Execution, error)
	// DryRunner runs dryRun (session.Dispatcher.DryRun); nil: refused.
	DryRunner func(ctx context.Context, comp *action.Compiled, author string, from, to int64, limit, turns int) (*session.DryRun, error)
	// Feed and Tail serve subscriptions (issue 12); without them a
	// subscription is refused with NOT_IMPLEMENTED.
	Feed *ledger.Feed
	Tail *ledger.Tail
	// DB sends the batched reads of per-parent lists (dataloaders and
	// prefetches, issue 14); the service's pool.
	DB ledger.Batcher

	// live are the shared readers of sessionUpdates and inboxUpdates.
	live liveHubs
}

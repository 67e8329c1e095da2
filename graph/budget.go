package graph

import (
	"context"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// sessionBudget is ActionSession.budget (G8): the session's frozen cap and
// its spend.
func sessionBudget(s *session.Session) *model.SessionBudget {
	b := &model.SessionBudget{MaxUsd: s.MaxUSD, SpentUsd: s.Spent.CostUSD}
	if s.MaxUSD != nil {
		left := math.Max(0, *s.MaxUSD-s.Spent.CostUSD)
		b.RemainingUsd = &left
		b.Exhausted = s.Spent.CostUSD >= *s.MaxUSD
	}
	return b
}

// turnUsage is ActionSessionTurn.usage: its execution's (G8).
func (r *Resolver) turnUsage(ctx context.Context, t *turns.Turn) (*session.Usage, error) {
	x, err := r.execution(ctx, t.ExecutionID)
	if err != nil {
		return nil, err
	}
	if x == nil {
		return nil, fmt.Errorf("execution %s of turn %d is missing", t.ExecutionID, t.Number)
	}
	return &x.Usage, nil
}

// gqlInt is a count as a GraphQL Int (32-bit), saturating.
func gqlInt(v int64) int {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < 0:
		return 0
	}
	return int(v)
}

// startSession is Mutation.actions.startSession (G7): a session of the
// action's current version, started by hand.
func (r *Resolver) startSession(ctx context.Context, actionID uuid.UUID, input jsonvalue.Value) (*model.SessionStart, error) {
	a, err := r.ActionStore.Get(ctx, actionID)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fault.New(fault.NotFound, "actionId", "no action with this id")
	}
	if a.Status != action.StatusActive {
		return nil, fault.New(fault.InvalidAction, "actionId", "the action is %s: enable it to start sessions", a.Status)
	}
	comp, err := r.ActionStore.Compiled(ctx, actionID, a.CurrentVersion)
	if err != nil {
		return nil, err
	}
	s, created, err := r.SessionStore.Start(ctx, comp, input, senderOf(ctx).ID)
	if err != nil {
		return nil, err
	}
	return &model.SessionStart{Session: s, Created: created}, nil
}

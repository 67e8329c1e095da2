package graph

import (
	"context"

	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// currentPark is the session's PARKED park, nil when it is not parked (G4).
func (r *Resolver) currentPark(ctx context.Context, s *session.Session) (*session.Park, error) {
	ps, err := r.SessionStore.Parks(ctx, s.SID)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Status == session.ParkParked {
			return &ps[i], nil
		}
	}
	return nil, nil
}

// failureScope derives a FAILED turn's scope from its checkpoint (G10): a
// turn that failed only itself left its session WAITING.
func failureScope(t *turns.Turn) *model.FailureScope {
	if t.Status != turns.TurnFailed {
		return nil
	}
	sc := model.FailureScopeSession
	if t.CheckpointStatus != nil && *t.CheckpointStatus == string(session.Waiting) {
		sc = model.FailureScopeTurn
	}
	return &sc
}

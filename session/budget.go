package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// Usage is the model use of an execution or a session (G8): model calls,
// tokens, and their cost in US dollars. CostUSD counts priced calls only;
// Unpriced counts the calls of models the price table (MODEL_PRICES) does
// not list.
type Usage struct {
	ModelCalls   int64
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	Unpriced     int64
}

// Add adds u2 to u.
func (u *Usage) Add(u2 Usage) {
	u.ModelCalls += u2.ModelCalls
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CostUSD += u2.CostUSD
	u.Unpriced += u2.Unpriced
}

// Zero reports whether u counts nothing.
func (u Usage) Zero() bool { return u == Usage{} }

// capOf is the spend cap a new session of cs gets (G8): a copy of
// session.maxPerSessionUsd, frozen into the session row; nil: none.
func capOf(cs *action.CompiledSession) *float64 {
	if cs == nil || cs.MaxUSD == nil {
		return nil
	}
	v := *cs.MaxUSD
	return &v
}

// SetBudget sets the spend cap of the session addressed by action id and
// session id to maxUSD US dollars (nil: no cap) and returns the session
// (G8). A session's cap is frozen from its version at creation; this is
// the one way to change it. A turn held for its budget (BUDGET) stays
// held: answer the hold with RETRY to run it under the new cap. Errors:
// BAD_INPUT (field maxUsd: above 0, at most action.MaxSessionUSD; or a
// cap the session's handler could never spend against, the rule
// action.Store.BudgetCheck applies to session.maxPerSessionUsd), NOT_FOUND,
// SESSION_CLOSED (a final session spends nothing more).
func (st *Store) SetBudget(ctx context.Context, actionID uuid.UUID, id string, maxUSD *float64) (*Session, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	if maxUSD != nil && !(*maxUSD > 0 && *maxUSD <= action.MaxSessionUSD) {
		return nil, fault.New(fault.BadInput, "maxUsd", "maxUsd is a number of US dollars above 0 and at most %d, or null for no cap", action.MaxSessionUSD)
	}
	var s *Session
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var err error
		s, err = scanSession(tx.QueryRow(ctx, `UPDATE sessions SET max_usd = $3, updated_at = $4
			WHERE action_id = $1 AND id = $2 AND status NOT IN ($5, $6, $7) RETURNING `+sessionColumns,
			actionID, id, maxUSD, st.clock.Now(), Completed, Failed, Cancelled))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, gerr := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2`, actionID, id))
			if errors.Is(gerr, pgx.ErrNoRows) {
				return st.missing(ctx, tx, actionID)
			}
			if gerr != nil {
				return fmt.Errorf("session: set budget: %w", gerr)
			}
			return fault.New(fault.SessionClosed, "id", "session %q is %s: its spend is final", id, cur.Status)
		}
		if err != nil {
			return fmt.Errorf("session: set budget: %w", err)
		}
		if err := st.capAllowed(ctx, s, maxUSD); err != nil {
			return err // rolls the update back
		}
		return Notice{SIDs: []int64{s.SID}}.Send(ctx, tx)
	})
	return s, err
}

// capAllowed refuses a cap on s that its version's handler could never
// spend against (not an agent, or an unpriced model): BAD_INPUT on
// maxUsd. Removing a cap is always allowed (G8).
func (st *Store) capAllowed(ctx context.Context, s *Session, maxUSD *float64) error {
	if maxUSD == nil || st.Actions == nil || st.Actions.BudgetCheck == nil {
		return nil
	}
	comp, err := st.Actions.Compiled(ctx, s.ActionID, s.Version)
	if err != nil {
		return err
	}
	if err := st.Actions.BudgetCheck(comp.Def.Kind, comp.Def.Config); err != nil {
		return fault.New(fault.BadInput, "maxUsd", "this session cannot have a spend cap: %v", err)
	}
	return nil
}

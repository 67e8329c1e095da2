package session

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/ledger"
)

// ExecutionsChannel is the NOTIFY channel that wakes the executor for
// executions of actions without a session block (issue 15): some were
// queued, retried, or left a concurrency group with room.
const ExecutionsChannel = "actionsledger_executions"

// Match is an event that matched one or more triggers of an action version
// without a session block (issue 15). It runs one execution of the
// version's handler, however many triggers matched; the dispatcher queues it
// in the transaction that moves its cursor past the event (QueueFunc), so
// a crash neither loses nor repeats it.
type Match struct {
	Action *action.Compiled
	Event  ledger.Event
	// Triggers are the names of the triggers that matched, in definition order.
	Triggers []string
	// Key is the execution's concurrency group when the version has a
	// concurrency block: the key expression's value, "" without one; nil
	// when the key could not be evaluated (KeyErr says why) or the version
	// has no concurrency block.
	Key    *string
	KeyErr string
}

// QueueFunc queues in b, a batch the dispatcher sends in its transaction,
// one execution per match (idempotent per action and event). Package turns,
// which owns executions, provides it (turns.QueueMatches).
type QueueFunc func(b *pgx.Batch, now time.Time, ms []Match)

// MaxKeyLen is the longest concurrency key, in bytes.
const MaxKeyLen = 512

// sessionless matches ev against the triggers of a version without a
// session block (issue 15) and, when any matches, keeps one Match for the
// batch's end. Only the version that covers the event runs executions for
// it (A2). A predicate that fails to evaluate is a non-match recorded as a
// diagnostic, as for any trigger.
func (b *batch) sessionless(ctx context.Context, ev ledger.Event, evVars *expr.Event, ar actionRefs) {
	if !ar.covers {
		return
	}
	a := scope{ar.action, true}
	vars := expr.Vars{Event: evVars}
	var names []string
	for _, t := range ar.triggers {
		if b.predicate(ctx, a, t, t.Predicate, ev, vars) {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	m := Match{Action: ar.action, Event: ev, Triggers: names}
	if cc := ar.action.Concurrency; cc != nil {
		key, err := concurrencyKey(ctx, cc, vars)
		if err != nil {
			m.KeyErr = text.Store(err.Error(), 1000)
		} else {
			m.Key = &key
		}
	}
	b.matches = append(b.matches, m)
}

// concurrencyKey evaluates a version's concurrency key for an event: ""
// without a key expression.
func concurrencyKey(ctx context.Context, cc *action.CompiledConcurrency, vars expr.Vars) (string, error) {
	if cc.Key == nil {
		return "", nil
	}
	k, err := cc.Key.EvalString(ctx, vars)
	switch {
	case err != nil:
		return "", err
	case len(k) > MaxKeyLen:
		return "", fmt.Errorf("the key is longer than %d bytes", MaxKeyLen)
	}
	return text.Store(k, MaxKeyLen), nil
}

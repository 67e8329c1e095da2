package session

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/observe"
)

// ClosedCountTTL is how long Gauges reuses its count of closed sessions
// (COMPLETED, FAILED, CANCELLED): that count grows with every session ever
// run and changes slowly, so it is read at most once per ClosedCountTTL,
// while the other gauges are read at every scrape.
const ClosedCountTTL = time.Minute

// Gauges reads what /metrics reports of the database (issue 12,
// observe.Database) in one statement of index lookups and index-only
// scans whose work is proportional to what is live (open and waiting
// sessions, pending inputs and interrupts, due timers), plus the count of
// closed sessions every ClosedCountTTL.
type Gauges struct {
	pool  *pgxpool.Pool
	clock clock.Clock

	mu     sync.Mutex
	closed map[string]int64
	at     time.Time // real time of the closed count
}

// NewGauges returns Gauges over pool; c dates due timers and dispatch lag.
func NewGauges(pool *pgxpool.Pool, c clock.Clock) *Gauges {
	return &Gauges{pool: pool, clock: c}
}

// Read returns the gauges now. Errors: the database's.
func (g *Gauges) Read(ctx context.Context) (observe.Database, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	countClosed := g.closed == nil || time.Since(g.at) >= ClosedCountTTL
	var db observe.Database
	var oldestEvent, oldestTimer *time.Time
	var sessions, interrupts []byte
	// Two statements rather than a flag, so that each keeps a plan that
	// reads only the index entries it counts.
	which := `WHERE status IN ('OPEN', 'WAITING')`
	if countClosed {
		which = ""
	}
	err := g.pool.QueryRow(ctx, `
		SELECT (SELECT position FROM ledger_head),
		       (SELECT position FROM dispatch_state),
		       (SELECT commit_time FROM events WHERE position = (SELECT position FROM dispatch_state) + 1),
		       (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (
		           SELECT status, count(*) AS n FROM sessions `+which+` GROUP BY status) s),
		       (SELECT count(*) FROM session_inputs WHERE status = 'PENDING'),
		       (SELECT coalesce(jsonb_object_agg(kind, n), '{}') FROM (
		           SELECT kind, count(*) AS n FROM session_interrupts WHERE status = 'PENDING' GROUP BY kind) i),
		       (SELECT count(*) FROM session_timers WHERE due_at <= $1),
		       (SELECT min(due_at) FROM session_timers)`, now).
		Scan(&db.Head, &db.DispatchPosition, &oldestEvent, &sessions, &db.PendingInputs, &interrupts, &db.TimersDue, &oldestTimer)
	if err != nil {
		return db, fmt.Errorf("session: gauges: %w", err)
	}
	if oldestEvent != nil {
		db.DispatchLag = max(now.Sub(*oldestEvent), 0)
	}
	if oldestTimer != nil && db.TimersDue > 0 {
		db.OldestTimerDue = max(now.Sub(*oldestTimer), 0)
	}
	db.Sessions = map[string]int64{string(Open): 0, string(Waiting): 0}
	if err := json.Unmarshal(sessions, &db.Sessions); err != nil {
		return db, fmt.Errorf("session: gauges: %w", err)
	}
	if countClosed {
		g.closed, g.at = map[string]int64{string(Completed): 0, string(Failed): 0, string(Cancelled): 0}, time.Now()
		for st, n := range db.Sessions {
			if st != string(Open) && st != string(Waiting) {
				g.closed[st] = n
			}
		}
	}
	for st, n := range g.closed {
		db.Sessions[st] = n
	}
	db.OpenInterrupts = map[string]int64{string(InterruptApproval): 0, string(InterruptHold): 0}
	if err := json.Unmarshal(interrupts, &db.OpenInterrupts); err != nil {
		return db, fmt.Errorf("session: gauges: %w", err)
	}
	return db, nil
}

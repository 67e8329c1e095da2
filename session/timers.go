package session

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/due"
	"github.com/actionsledger/actionsledger/internal/observe"
)

// TimersChannel is the NOTIFY channel that wakes the timer loop when a
// timer is set (it may be due sooner than the loop sleeps for).
const TimersChannel = "actionsledger_timers"

// DefaultTimerBatch is how many due timers one transaction handles.
const DefaultTimerBatch = 500

// Timers runs the durable session timers (E3, C2, C4, T4). Each session of
// a version with an end, a turn window or a clock entry that starts turns
// has at most one row in session_timers, due at the next instant the session
// must be looked at. A due timer makes the session runnable (next_turn_at),
// so the turn executor applies the end or takes the firing, and then moves
// to the session's next such instant or goes away.
//
// Firings themselves are not stored: which are due is computed from the
// session's startedAt, its end and the last firing each entry had taken
// (see Clock), so a timer that fires late, twice or after a restart changes
// nothing. Entries whose firings do not start turns need no timer at all:
// the next turn picks up their latest firing.
//
// Several processes may run Timers: due rows are claimed with FOR UPDATE
// SKIP LOCKED together with their session row, so they never wait on each
// other, on the dispatcher or on a claiming executor.
type Timers struct {
	pool    *pgxpool.Pool
	actions *action.Store
	clock   clock.Clock
	log     *slog.Logger
	Batch   int
	// Metrics, when set, counts firings and how late they were (issue 12).
	Metrics *observe.Metrics
}

// NewTimers returns a Timers.
func NewTimers(pool *pgxpool.Pool, actions *action.Store, c clock.Clock, log *slog.Logger) *Timers {
	return &Timers{pool: pool, actions: actions, clock: c, log: log, Batch: DefaultTimerBatch}
}

// Run fires due timers until ctx ends. Between rounds it sleeps until the
// earliest timer is due, at most poll (which also bounds how late a timer
// set by another process without a notification is seen), or until wake.
func (t *Timers) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) error {
	return due.Loop{Name: "session timers", Once: t.FireOnce, Batch: t.Batch, Next: t.NextDue, Clock: t.clock, Log: t.log}.Run(ctx, wake, poll)
}

// NextDue returns when the earliest timer is due; zero when there is none.
func (t *Timers) NextDue(ctx context.Context) (time.Time, error) {
	var next *time.Time
	if err := t.pool.QueryRow(ctx, `SELECT min(due_at) FROM session_timers`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("session timers: %w", err)
	}
	if next == nil {
		return time.Time{}, nil
	}
	return next.UTC(), nil
}

// timed is a session whose timer is due.
type timed struct {
	sid       int64
	actionID  uuid.UUID
	version   int
	status    Status
	clock     Clock
	nextTurn  *time.Time
	wakeAt    time.Time // set: make the session runnable from then
	dueAt     time.Time // set: the timer's next due time; zero: remove it
	notifying bool
	late      time.Duration // how late the timer fired after it was due
}

// FireOnce handles up to Batch due timers in one transaction and returns
// how many. Timers whose session another transaction holds are left for
// the next round.
func (t *Timers) FireOnce(ctx context.Context) (int, error) {
	var fired []*timed
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		now := t.clock.Now()
		rows, err := tx.Query(ctx, `
			SELECT s.sid, s.action_id, s.version, s.status, s.started_at, s.ends_at, s.next_turn_at, t.due_at
			  FROM session_timers t JOIN sessions s ON s.sid = t.sid
			 WHERE t.due_at <= $1
			 ORDER BY t.due_at LIMIT $2
			   FOR UPDATE SKIP LOCKED`, now, t.Batch)
		if err != nil {
			return fmt.Errorf("session timers: claim: %w", err)
		}
		due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*timed, error) {
			var s timed
			var due time.Time
			err := r.Scan(&s.sid, &s.actionID, &s.version, &s.status, &s.clock.StartedAt, &s.clock.EndsAt, &s.nextTurn, &due)
			s.late = now.Sub(due)
			return &s, err
		})
		if err != nil || len(due) == 0 {
			return err
		}
		sids := make([]int64, len(due))
		for i, s := range due {
			sids[i] = s.sid
		}
		taken, err := TakenFirings(ctx, tx, sids)
		if err != nil {
			return err
		}
		for _, s := range due {
			s.clock.Taken = taken[s.sid]
			if err := t.decide(ctx, s, now); err != nil {
				return err
			}
		}
		fired = due
		return t.apply(ctx, tx, due)
	})
	if err != nil {
		return 0, err
	}
	for _, s := range fired {
		t.Metrics.Firing(s.late)
	}
	return len(fired), nil
}

// decide works out what a due timer does: whether the session becomes
// runnable now, and when the timer is next due.
func (t *Timers) decide(ctx context.Context, s *timed, now time.Time) error {
	if s.status.Final() {
		return nil // nothing more happens to it: drop the timer
	}
	comp, err := t.actions.Compiled(ctx, s.actionID, s.version)
	if err != nil {
		return err
	}
	cs := comp.Session
	if cs == nil {
		return nil
	}
	if s.clock.Ended(now) {
		// E3/E5: the end applies now; a WAITING session stays WAITING and
		// its next turn is final (E6). No firing comes after the end.
		s.wakeAt = *s.clock.EndsAt
		return nil
	}
	for _, f := range s.clock.Due(cs, now) {
		if f.StartsTurn && (s.wakeAt.IsZero() || f.At.Before(s.wakeAt)) {
			s.wakeAt = f.At // C4: a firing never waits for a window
		}
	}
	s.dueAt = s.clock.WakeAfter(cs, now, false)
	switch {
	case s.nextTurn == nil:
	case !s.nextTurn.After(now):
		s.notifying = true // a window ended (T4)
	case s.dueAt.IsZero() || s.nextTurn.Before(s.dueAt):
		s.dueAt = *s.nextTurn // a window still running
	}
	return nil
}

// apply writes the decisions of one round.
func (t *Timers) apply(ctx context.Context, tx pgx.Tx, due []*timed) error {
	var wakeSIDs, moveSIDs, dropSIDs []int64
	var wakeAt, moveAt []time.Time
	notify := false
	for _, s := range due {
		if !s.wakeAt.IsZero() {
			wakeSIDs, wakeAt = append(wakeSIDs, s.sid), append(wakeAt, s.wakeAt)
		}
		notify = notify || s.notifying || !s.wakeAt.IsZero()
		if s.dueAt.IsZero() {
			dropSIDs = append(dropSIDs, s.sid)
		} else {
			moveSIDs, moveAt = append(moveSIDs, s.sid), append(moveAt, s.dueAt)
		}
	}
	if len(wakeSIDs) > 0 {
		// A WAITING session is not runnable: the answer that opens it makes
		// it runnable at once, and its turn sees the end and due firings.
		// One waiting after a failed turn (G10) is woken, as by an input.
		if _, err := tx.Exec(ctx, `UPDATE sessions s SET next_turn_at = least(coalesce(s.next_turn_at, u.at), u.at),
				status = 'OPEN', reason = CASE WHEN s.wait IS NULL THEN s.reason END, wait = NULL, wake_on = NULL
			FROM unnest($1::bigint[], $2::timestamptz[]) AS u (sid, at) WHERE s.sid = u.sid AND (s.status = $3 OR s.wait = 'INPUT')`, wakeSIDs, wakeAt, Open); err != nil {
			return fmt.Errorf("session timers: wake: %w", err)
		}
	}
	if len(moveSIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE session_timers t SET due_at = u.at
			FROM unnest($1::bigint[], $2::timestamptz[]) AS u (sid, at) WHERE t.sid = u.sid`, moveSIDs, moveAt); err != nil {
			return fmt.Errorf("session timers: move: %w", err)
		}
	}
	if len(dropSIDs) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM session_timers WHERE sid = ANY($1)`, dropSIDs); err != nil {
			return fmt.Errorf("session timers: drop: %w", err)
		}
	}
	if notify {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, TurnsChannel); err != nil {
			return err
		}
	}
	return nil
}

// DropTimer removes a session's timer in tx (its session has closed). The
// session row must already be locked by tx.
func DropTimer(ctx context.Context, tx pgx.Tx, sid int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM session_timers WHERE sid = $1`, sid); err != nil {
		return fmt.Errorf("session: drop timer: %w", err)
	}
	return nil
}

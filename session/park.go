package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/due"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/text"
)

// Wait says what wakes a WAITING session whose last turn failed with
// scope TURN (G10); sessions waiting on interrupts have none.
type Wait string

const (
	// WaitInput: any new input (an event delivered, a message, an answer,
	// a call) or an operator's resume wakes the session.
	WaitInput Wait = "INPUT"
	// WaitPark: only the park's resume condition does (G4).
	WaitPark Wait = "PARK"
)

// TurnFailure is the outcome of a turn that failed without failing its
// session (G10): the turn is FAILED, nothing it did commits, its inputs
// stay pending and the session waits WAITING with Reason. With Park set
// the session is parked (G4).
type TurnFailure struct {
	Reason string
	Park   *Park
}

// ParkStatus is where a park stands (G4).
type ParkStatus string

const (
	ParkParked    ParkStatus = "PARKED"
	ParkResumed   ParkStatus = "RESUMED"
	ParkExpired   ParkStatus = "EXPIRED"
	ParkCancelled ParkStatus = "CANCELLED"
)

// Park resolutions: what resumed a park.
const (
	ResolvedByOperator = "operator"
	ResolvedByTime     = "time"
	ResolvedByEvent    = "event"
)

// Park is a pause of a session whose turn ran out of retries on a
// transient cause (G4): the session waits WAITING until an operator
// resumes it, ResumeAt passes, or one of the ResumeOn triggers delivers an
// event to it; at ExpiresAt, unresumed, the session fails.
type Park struct {
	ID          uuid.UUID
	SID         int64
	Turn        int
	ExecutionID uuid.UUID
	// Cause is the error code of the last attempt (timeout or transient).
	Cause      string
	Reason     string
	ParkedAt   time.Time
	ExpiresAt  time.Time
	ResumeAt   *time.Time
	ResumeOn   []string
	Status     ParkStatus
	Resolution *string // operator, time or event
	ResolvedBy *string // the operator's principal, or the event id
	ResolvedAt *time.Time
}

const parkColumns = `id, sid, turn, execution_id, cause, reason, parked_at, expires_at, resume_at, resume_on, status,
	resolution, resolved_by, resolved_at`

func scanPark(row pgx.CollectableRow) (Park, error) {
	var p Park
	err := row.Scan(&p.ID, &p.SID, &p.Turn, &p.ExecutionID, &p.Cause, &p.Reason, &p.ParkedAt, &p.ExpiresAt, &p.ResumeAt,
		&p.ResumeOn, &p.Status, &p.Resolution, &p.ResolvedBy, &p.ResolvedAt)
	p.ParkedAt, p.ExpiresAt = p.ParkedAt.UTC(), p.ExpiresAt.UTC()
	utcp(p.ResumeAt)
	utcp(p.ResolvedAt)
	return p, err
}

func utcp(t *time.Time) {
	if t != nil {
		*t = t.UTC()
	}
}

// queueTurnFailed queues, for turns that failed with scope TURN (G10),
// what wakes their sessions and their parks (G4), fenced by the lease
// token like the rest of the settlement.
func queueTurnFailed(b *pgx.Batch, now time.Time, ss []Settlement) {
	if len(ss) == 0 {
		return
	}
	var sids, tokens []int64
	var waits []Wait
	var wakeOn []string // JSON arrays: unnest cannot take an array per row
	var parks []*Park
	for _, s := range ss {
		sids, tokens = append(sids, s.SID), append(tokens, s.Token)
		switch p := s.TurnFailed.Park; p {
		case nil:
			waits, wakeOn = append(waits, WaitInput), append(wakeOn, "[]")
		default:
			waits, wakeOn = append(waits, WaitPark), append(wakeOn, jsonStrings(p.ResumeOn))
			parks = append(parks, p)
		}
	}
	b.Queue(`UPDATE sessions s SET wait = u.wait, wake_on = ARRAY(SELECT jsonb_array_elements_text(u.wake_on::jsonb))
		  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u (sid, token, wait, wake_on)
		 WHERE s.sid = u.sid AND s.lease_token = u.token`, sids, tokens, waits, wakeOn)
	for _, p := range parks {
		b.Queue(`INSERT INTO session_parks (id, sid, turn, execution_id, cause, reason, parked_at, expires_at, resume_at, resume_on, status)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
			p.ID, p.SID, p.Turn, p.ExecutionID, p.Cause, p.Reason, now, p.ExpiresAt, p.ResumeAt, orEmpty(p.ResumeOn), ParkParked)
	}
}

// queueEndParks queues the end of the parks of sessions that became final
// otherwise (closed, completed, failed): CANCELLED.
func queueEndParks(b *pgx.Batch, now time.Time, sids []int64) {
	if len(sids) > 0 {
		b.Queue(`UPDATE session_parks SET status = $2, resolved_at = $3 WHERE sid = ANY($1) AND status = 'PARKED'`, sids, ParkCancelled, now)
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func jsonStrings(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%q", x) // trigger names: letters, digits, _ and -
	}
	return out + "]"
}

// Parks reads a session's parks, oldest first.
func (st *Store) Parks(ctx context.Context, sid int64) ([]Park, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+parkColumns+` FROM session_parks WHERE sid = $1 ORDER BY parked_at, id`, sid)
	if err != nil {
		return nil, fmt.Errorf("session: parks: %w", err)
	}
	return pgx.CollectRows(rows, scanPark)
}

// Resume wakes a session waiting after a turn that failed with scope TURN
// (G10), or parked (G4; its park ends RESUMED, resolution operator, by
// principal): the session is OPEN again and its pending inputs get a turn
// at once. It returns the session as resumed. Errors: fault.BadInput (id),
// fault.NotFound (actionId, id), fault.SessionClosed, fault.NotResumable
// (the session does not wait after a failed turn).
func (st *Store) Resume(ctx context.Context, actionID uuid.UUID, id, principal string) (*Session, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	var s *Session
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		now := st.clock.Now()
		cur, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE action_id = $1 AND id = $2 FOR UPDATE`, actionID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: resume: %w", err)
		}
		if err := resumeTx(ctx, tx, cur, principal, now); err != nil {
			return err
		}
		s, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = $1`, cur.SID))
		return err
	})
	if err != nil {
		return nil, err
	}
	if st.Log != nil {
		st.Log.Info("session resumed", "action", actionID, "session", id, "by", principal)
	}
	return s, nil
}

// resumeTx resumes s (whose row tx holds) for principal: see Resume.
func resumeTx(ctx context.Context, tx pgx.Tx, s *Session, principal string, now time.Time) error {
	if s.Status.Final() {
		return fault.New(fault.SessionClosed, "id", "the session is %s", s.Status)
	}
	if s.Wait == nil {
		return fault.New(fault.NotResumable, "id", "the session is %s and does not wait after a failed turn: nothing to resume", s.Status)
	}
	if _, err := tx.Exec(ctx, `UPDATE session_parks SET status = $2, resolution = $3, resolved_by = $4, resolved_at = $5
		WHERE sid = $1 AND status = 'PARKED'`, s.SID, ParkResumed, ResolvedByOperator, principal, now); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET `+wakeSet+`, next_turn_at = $2, updated_at = $2 WHERE sid = $1`, s.SID, now); err != nil {
		return fmt.Errorf("session: resume: %w", err)
	}
	return Notice{SIDs: []int64{s.SID}, Turns: true}.Send(ctx, tx)
}

// wakeSet is the assignment that wakes a WAITING session after a failed
// turn (G10) or a park (G4): OPEN, no reason, nothing to wait for.
const wakeSet = `status = 'OPEN', reason = NULL, wait = NULL, wake_on = NULL`

// WakeOnInput is the SET list of a single-row UPDATE of sessions that
// delivers one more input at the timestamp parameter now (such as "$2"):
// an OPEN session becomes runnable at once, and a session WAITING after a
// turn that failed with scope TURN (G10) is woken (OPEN, runnable); a
// session waiting on interrupts (P3) or parked (G4) keeps the input
// pending. An archived session is shown again (G6). Every path that delivers an input outside the dispatcher uses
// it.
func WakeOnInput(now string) string {
	return `input_count = input_count + 1, updated_at = ` + now + `,
		next_turn_at = CASE WHEN status = 'OPEN' OR wait = 'INPUT' THEN least(coalesce(next_turn_at, ` + now + `), ` + now + `) ELSE next_turn_at END,
		status = CASE WHEN wait = 'INPUT' THEN 'OPEN' ELSE status END,
		reason = CASE WHEN wait = 'INPUT' THEN NULL ELSE reason END,
		wake_on = CASE WHEN wait = 'INPUT' THEN NULL ELSE wake_on END,
		wait = CASE WHEN wait = 'INPUT' THEN NULL ELSE wait END,
		archived_at = NULL`
}

// DefaultParkBatch is how many due parks one transaction handles.
const DefaultParkBatch = 200

// ParkLoop resumes parks whose resume time has come and expires parks
// whose TTL has passed, failing their sessions (G4). Several processes may
// run it: due parks are claimed with their session rows, FOR UPDATE SKIP
// LOCKED.
type ParkLoop struct {
	pool    *pgxpool.Pool
	clock   clock.Clock
	log     *slog.Logger
	Batch   int
	Metrics *observe.Metrics
}

// NewParkLoop returns a ParkLoop.
func NewParkLoop(pool *pgxpool.Pool, c clock.Clock, log *slog.Logger) *ParkLoop {
	return &ParkLoop{pool: pool, clock: c, log: log, Batch: DefaultParkBatch}
}

// Run handles due parks until ctx ends, sleeping until the next is due or
// at most poll: a park is due no sooner than a second after it is made
// (ttl and resumeAfter are at least 1s), so it needs no notification; poll
// bounds how late one made by another process is seen.
func (l *ParkLoop) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) error {
	return due.Loop{Name: "parks", Once: l.Once, Batch: l.Batch, Next: l.NextDue, Clock: l.clock, Log: l.log}.Run(ctx, wake, poll)
}

// NextDue returns when the earliest park is due; zero when none is.
func (l *ParkLoop) NextDue(ctx context.Context) (time.Time, error) {
	var next *time.Time
	if err := l.pool.QueryRow(ctx, `SELECT min(least(coalesce(resume_at, expires_at), expires_at)) FROM session_parks WHERE status = 'PARKED'`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("parks: %w", err)
	}
	if next == nil {
		return time.Time{}, nil
	}
	return next.UTC(), nil
}

// Once handles up to Batch due parks in one transaction and returns how
// many: a park whose resume time came first resumes (resolution time), one
// whose TTL passed first expires and fails its session.
func (l *ParkLoop) Once(ctx context.Context) (int, error) {
	n := 0
	var resumed, expired int
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		now := l.clock.Now()
		type duePark struct {
			id       uuid.UUID
			sid      int64
			turn     int
			reason   string
			expires  time.Time
			resuming bool
		}
		var ds []duePark
		rows, err := tx.Query(ctx, `
			SELECT p.id, p.sid, p.turn, p.reason, p.expires_at, p.resume_at IS NOT NULL AND p.resume_at < p.expires_at AND p.resume_at <= $1
			  FROM session_parks p JOIN sessions s ON s.sid = p.sid
			 WHERE p.status = 'PARKED' AND least(coalesce(p.resume_at, p.expires_at), p.expires_at) <= $1
			 ORDER BY least(coalesce(p.resume_at, p.expires_at), p.expires_at) LIMIT $2
			   FOR UPDATE SKIP LOCKED`, now, l.Batch)
		if err != nil {
			return fmt.Errorf("parks: claim: %w", err)
		}
		var d duePark
		if _, err := pgx.ForEachRow(rows, []any{&d.id, &d.sid, &d.turn, &d.reason, &d.expires, &d.resuming}, func() error {
			ds = append(ds, d)
			return nil
		}); err != nil {
			return fmt.Errorf("parks: claim: %w", err)
		}
		var wake, fail []int64
		var wakeIDs, failIDs []uuid.UUID
		var failReasons []string
		for _, d := range ds {
			if d.resuming {
				wake, wakeIDs = append(wake, d.sid), append(wakeIDs, d.id)
				continue
			}
			fail, failIDs = append(fail, d.sid), append(failIDs, d.id)
			failReasons = append(failReasons, reasonText(fmt.Sprintf("turn %d failed and the session stayed parked until %s without a resume: %s",
				d.turn, d.expires.UTC().Format(time.RFC3339), d.reason)))
		}
		if len(wake) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE session_parks SET status = $2, resolution = $3, resolved_at = $4 WHERE id = ANY($1)`,
				wakeIDs, ParkResumed, ResolvedByTime, now); err != nil {
				return fmt.Errorf("parks: resume: %w", err)
			}
			if _, err := tx.Exec(ctx, `UPDATE sessions SET `+wakeSet+`, next_turn_at = $2, updated_at = $2
				WHERE sid = ANY($1) AND status = 'WAITING' AND wait = 'PARK'`, wake, now); err != nil {
				return fmt.Errorf("parks: resume: %w", err)
			}
		}
		if len(fail) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE session_parks SET status = $2, resolved_at = $3 WHERE id = ANY($1)`,
				failIDs, ParkExpired, now); err != nil {
				return fmt.Errorf("parks: expire: %w", err)
			}
			if err := failSessions(ctx, tx, now, fail, failReasons); err != nil {
				return fmt.Errorf("parks: expire: %w", err)
			}
		}
		n, resumed, expired = len(ds), len(wake), len(fail)
		if n == 0 {
			return nil
		}
		return Notice{SIDs: append(wake, fail...), Turns: len(wake) > 0, Interrupts: len(fail) > 0}.Send(ctx, tx)
	})
	if err != nil {
		return 0, err
	}
	if resumed+expired > 0 && l.log != nil {
		l.log.Info("parks due", "resumed", resumed, "expired", expired)
	}
	return n, nil
}

// failSessions fails WAITING sessions that are not final, each with its
// reason: closed now, their interrupts closed, their timers dropped.
func failSessions(ctx context.Context, tx pgx.Tx, now time.Time, sids []int64, reasons []string) error {
	if _, err := tx.Exec(ctx, `UPDATE sessions s SET status = 'FAILED', reason = u.reason, closed_at = $2, updated_at = $2,
			next_turn_at = NULL, resume = NULL, wait = NULL, wake_on = NULL
		  FROM unnest($1::bigint[], $3::text[]) AS u (sid, reason)
		 WHERE s.sid = u.sid AND s.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')`, sids, now, reasons); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE session_interrupts SET status = $2 WHERE sid = ANY($1) AND status = 'PENDING'`, sids, InterruptClosed); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM session_timers WHERE sid = ANY($1)`, sids)
	return err
}

func reasonText(s string) string { return text.Store(s, MaxReasonLen) }

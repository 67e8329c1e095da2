package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/due"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
)

// slotOf is the singleton slot a new session of cs with input takes (G7):
// nil when the action is no singleton, "" for its one slot, else its
// concurrencyKey's value.
func slotOf(ctx context.Context, cs *action.CompiledSession, input any) (*string, error) {
	if !cs.Singleton {
		return nil, nil
	}
	slot := ""
	if cs.SlotKey != nil {
		var err error
		if slot, err = evalID(ctx, cs.SlotKey, expr.Vars{Session: &expr.Session{Input: input}}); err != nil {
			return nil, err
		}
	}
	return &slot, nil
}

// slotHolder is the id of the live session that holds an action's slot,
// locked in q's transaction; "" when it is free, or when the session id
// that would take it exists already (a start for it goes on as a start of
// an existing session).
func slotHolder(ctx context.Context, q ledger.Querier, actionID uuid.UUID, id, slot string) (string, error) {
	var holder string
	err := q.QueryRow(ctx, `SELECT s.id FROM sessions s WHERE s.action_id = $1 AND s.slot = $2 AND s.status IN ('OPEN', 'WAITING')
		AND NOT EXISTS (SELECT 1 FROM sessions x WHERE x.action_id = $1 AND x.id = $3) FOR UPDATE`, actionID, slot, id).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("session: slot: %w", err)
	}
	return holder, nil
}

// SlotTakenMessage says which live session holds a singleton's slot (G7):
// the intake record's message.
func SlotTakenMessage(holder string) string {
	return fmt.Sprintf("the action is a singleton (session.concurrency 1) and session %q holds its slot until it is final", holder)
}

// titleOf renders a new session's display title (G8): session.displayTitle
// over its input, cut to action.MaxTitleLen characters with an ellipsis;
// nil when there is none or it failed (a title never stops a start).
func titleOf(ctx context.Context, cs *action.CompiledSession, input any) *string {
	if cs == nil || cs.Title == nil {
		return nil
	}
	v, err := cs.Title.Eval(ctx, expr.Vars{Session: &expr.Session{Input: input}})
	if err != nil {
		return nil
	}
	t, ok := v.(string)
	if !ok {
		return nil
	}
	t = strings.Join(strings.Fields(strings.ToValidUTF8(strings.ReplaceAll(t, "\x00", ""), "")), " ")
	if t == "" {
		return nil
	}
	if utf8.RuneCountInString(t) > action.MaxTitleLen {
		t = string([]rune(t)[:action.MaxTitleLen-1]) + "…"
	}
	return &t
}

// Archive hides a session from lists (G6): archivedAt is set, nothing
// else changes (status, turns, singleton slot). Unarchive shows it again.
// Archiving an archived session changes nothing. Errors: fault.BadInput
// (id), fault.NotFound (actionId, id).
func (st *Store) Archive(ctx context.Context, actionID uuid.UUID, id string, archive bool) (*Session, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fault.New(fault.BadInput, "id", "a session id is 1-%d bytes", MaxIDLen)
	}
	var s *Session
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var at *time.Time
		if archive {
			now := st.clock.Now()
			at = &now
		}
		var err error
		s, err = scanSession(tx.QueryRow(ctx, `UPDATE sessions SET archived_at = CASE WHEN $3::timestamptz IS NULL THEN NULL
				ELSE coalesce(archived_at, $3) END
			WHERE action_id = $1 AND id = $2 RETURNING `+sessionColumns, actionID, id, at))
		if errors.Is(err, pgx.ErrNoRows) {
			return st.missing(ctx, tx, actionID)
		}
		if err != nil {
			return fmt.Errorf("session: archive: %w", err)
		}
		return Notice{SIDs: []int64{s.SID}}.Send(ctx, tx)
	})
	return s, err
}

// Archiver archives sessions left inactive for their version's
// session.archiveAfterInactive (G6): OPEN or WAITING, nothing pending, no
// turn running, not updated for that long. It never touches a session
// with work pending or a turn running, nor its slot.
type Archiver struct {
	pool  *pgxpool.Pool
	clock clock.Clock
	log   *slog.Logger
}

// NewArchiver returns an Archiver.
func NewArchiver(pool *pgxpool.Pool, c clock.Clock, log *slog.Logger) *Archiver {
	return &Archiver{pool: pool, clock: c, log: log}
}

// Run archives every poll until ctx ends.
func (a *Archiver) Run(ctx context.Context, poll time.Duration) error {
	return due.Loop{Name: "archiver", Once: a.Once, Batch: math.MaxInt, Next: func(context.Context) (time.Time, error) { return time.Time{}, nil },
		Clock: a.clock, Log: a.log}.Run(ctx, nil, poll)
}

// Once archives what is due and returns how many sessions it archived.
func (a *Archiver) Once(ctx context.Context) (int, error) {
	rows, err := a.pool.Query(ctx, `SELECT action_id, version, definition->'session'->>'archiveAfterInactive' FROM action_versions
		WHERE definition->'session' ? 'archiveAfterInactive'`)
	if err != nil {
		return 0, fmt.Errorf("archiver: %w", err)
	}
	type rule struct {
		action  uuid.UUID
		version int
		after   string
	}
	rules, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rule, error) {
		var x rule
		return x, r.Scan(&x.action, &x.version, &x.after)
	})
	if err != nil {
		return 0, fmt.Errorf("archiver: %w", err)
	}
	now := a.clock.Now()
	n := 0
	for _, r := range rules {
		d, err := time.ParseDuration(r.after)
		if err != nil || d <= 0 {
			continue // checked when stored
		}
		tag, err := a.pool.Exec(ctx, `UPDATE sessions s SET archived_at = $4
			WHERE s.action_id = $1 AND s.version = $2 AND s.archived_at IS NULL AND s.status IN ('OPEN', 'WAITING')
			  AND s.updated_at <= $3 AND (s.lease_expires_at IS NULL OR s.lease_expires_at <= $4)
			  AND NOT EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'PENDING')`,
			r.action, r.version, now.Add(-d), now)
		if err != nil {
			return n, fmt.Errorf("archiver: %w", err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// SetAmbient writes the ambient status (G8) a running turn reported, fenced
// by its lease: nothing is written once the lease is gone or was taken
// over. Subscribers of the session hear of it. line must be cleaned (one
// line, bounded) by the caller.
func SetAmbient(ctx context.Context, pool *pgxpool.Pool, l Lease, line string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE sessions SET ambient_status = $3
			WHERE sid = $1 AND lease_token = $2 AND lease_expires_at IS NOT NULL AND ambient_status IS DISTINCT FROM $3`,
			l.SID, l.Token, line)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return Notice{SIDs: []int64{l.SID}}.Send(ctx, tx)
	})
}

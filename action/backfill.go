package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Backfill statuses.
const (
	BackfillRunning   = "RUNNING"
	BackfillDone      = "DONE"
	BackfillCancelled = "CANCELLED"
)

// Backfill makes one action version's triggers judge past events (issue
// 15): every event after FromPosition, in commit order, with a cursor of
// its own, until that cursor reaches the dispatcher's; then the version
// joins live dispatch, which leaves it out until then. So the version
// judges each event once, in order, exactly as if it had existed before
// FromPosition. The dispatcher works through it in batches, holding the
// dispatch cursor (session.Dispatcher.BackfillOnce).
type Backfill struct {
	ActionID uuid.UUID
	Version  int
	// FromPosition: the backfill judges the events after it. ToPosition is
	// the ledger head when the version was made: the events up to it are
	// the past the backfill goes back over (cancelling skips the rest of
	// them).
	FromPosition, ToPosition int64
	// Cursor is the last position judged (FromPosition before the first
	// batch).
	Cursor int64
	// Joined is the dispatch cursor when the version joined live
	// dispatch; nil while the backfill judges events.
	Joined *int64
	// Events counts the events read so far.
	Events int64
	// Status is BackfillRunning, BackfillDone (joined) or BackfillCancelled.
	Status      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  *time.Time
	CancelledBy *string
	// ActionStatus and StatusPosition are the action's status and where
	// it last changed (NextBackfill sets them).
	ActionStatus   string
	StatusPosition int64
}

// From is the options of CreateFrom and UpdateFrom: Position, when not
// nil, is the first ledger position whose event the new version's triggers
// judge (a backfill from there to the head; issue 15).
type From struct {
	Position *int64
}

// errFrom is the refusal of a from position that is not one.
func errFrom(format string, args ...any) error {
	return fault.New(fault.BadInput, "from", format, args...)
}

// startBackfill records, in tx, the backfill of version v of action id
// from position from (inclusive) to head, the version's from_position.
// Nothing is recorded when from is after head (there is nothing to judge
// that live dispatch does not). Errors: fault.BadInput (field from) for a
// position under 1 or beyond head + 1.
func startBackfill(ctx context.Context, tx pgx.Tx, id uuid.UUID, v int, from *int64, head int64, now time.Time) error {
	if from == nil {
		return nil
	}
	switch {
	case *from < 1:
		return errFrom("from is a ledger position, at least 1 (the first event)")
	case *from > head+1:
		return errFrom("from is %d, after the ledger head (%d): there is nothing to go back to", *from, head)
	case *from == head+1:
		return nil // the live triggers judge everything from there
	}
	_, err := tx.Exec(ctx, `INSERT INTO action_backfills (action_id, version, from_position, to_position, cursor, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $3, 'RUNNING', $5, $5)`, id, v, *from-1, head, now)
	if err != nil {
		return fmt.Errorf("action: backfill: %w", err)
	}
	return nil
}

// Progress is how far the backfill is, 0 to 1: its cursor's way from
// FromPosition to head (the ledger head now); 1 once joined.
func (b Backfill) Progress(head int64) float64 {
	if b.Joined != nil || head <= b.FromPosition {
		return 1
	}
	return min(float64(b.Cursor-b.FromPosition)/float64(head-b.FromPosition), 1)
}

// Backfill returns the backfill of version v of action id; nil when it
// has none.
func (s *Store) Backfill(ctx context.Context, id uuid.UUID, v int) (*Backfill, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+backfillColumns+` FROM action_backfills WHERE action_id = $1 AND version = $2`, id, v)
	if err != nil {
		return nil, fmt.Errorf("action: backfill: %w", err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBackfill)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("action: backfill: %w", err)
	}
	return &b, nil
}

const backfillColumns = `action_id, version, from_position, to_position, cursor, joined_position, events, status, created_at, updated_at, finished_at, cancelled_by`

func scanBackfill(r pgx.CollectableRow) (Backfill, error) { return scanBackfillWith(r) }

// scanBackfillWith scans backfillColumns, then extra.
func scanBackfillWith(r pgx.CollectableRow, extra ...any) (Backfill, error) {
	var b Backfill
	err := r.Scan(append([]any{&b.ActionID, &b.Version, &b.FromPosition, &b.ToPosition, &b.Cursor, &b.Joined, &b.Events, &b.Status,
		&b.CreatedAt, &b.UpdatedAt, &b.FinishedAt, &b.CancelledBy}, extra...)...)
	b.CreatedAt, b.UpdatedAt, b.FinishedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC(), utcPtr(b.FinishedAt)
	return b, err
}

// CancelBackfill stops backfill of version v of action id from going
// further back: it skips the rest of the events before the version was
// made (what it judged stays judged), judges the events since, and joins
// live dispatch. A backfill already joined or cancelled is returned as it
// is. by is the principal who cancels. Errors: fault.NotFound (field
// version) when the version has no backfill.
func (s *Store) CancelBackfill(ctx context.Context, id uuid.UUID, v int, by string) (*Backfill, error) {
	now := s.clock.Now()
	rows, err := s.pool.Query(ctx, `WITH c AS (
			UPDATE action_backfills SET status = 'CANCELLED', cancelled_by = $3, finished_at = $4, updated_at = $4
			WHERE action_id = $1 AND version = $2 AND status = 'RUNNING' RETURNING `+backfillColumns+`)
		SELECT * FROM c UNION ALL
		SELECT `+backfillColumns+` FROM action_backfills WHERE action_id = $1 AND version = $2 AND NOT EXISTS (SELECT 1 FROM c)`,
		id, v, by, now)
	if err != nil {
		return nil, fmt.Errorf("action: cancel backfill: %w", err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBackfill)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fault.New(fault.NotFound, "version", "version %d of this action has no backfill", v)
	}
	if err != nil {
		return nil, fmt.Errorf("action: cancel backfill: %w", err)
	}
	return &b, nil
}

// NextBackfill locks, in tx, the oldest backfill still judging events
// (not joined) that no other transaction holds, with its action's status;
// nil when there is none. The caller holds the dispatch cursor.
func NextBackfill(ctx context.Context, tx pgx.Tx) (*Backfill, error) {
	rows, err := tx.Query(ctx, `SELECT b.`+strings.ReplaceAll(backfillColumns, ", ", ", b.")+`, a.status, a.status_position FROM action_backfills b
		JOIN actions a ON a.id = b.action_id
		WHERE b.joined_position IS NULL ORDER BY b.created_at, b.action_id, b.version LIMIT 1 FOR UPDATE OF b SKIP LOCKED`)
	if err != nil {
		return nil, fmt.Errorf("action: next backfill: %w", err)
	}
	var status string
	var statusPosition int64
	b, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (Backfill, error) {
		return scanBackfillWith(r, &status, &statusPosition)
	})
	b.ActionStatus, b.StatusPosition = status, statusPosition
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("action: next backfill: %w", err)
	}
	return &b, nil
}

// QueueBackfillProgress queues in q the move of backfill b's cursor to
// cursor, having read events more events. With join set (the cursor has
// reached live, the dispatch cursor), the version joins live dispatch at
// join: the backfill is done (or stays cancelled) and the actions epoch
// moves, so every dispatcher reloads its triggers. scan reads the
// statement's one column, xid (the caller's select-list expression).
func QueueBackfillProgress(q *pgx.Batch, b *Backfill, cursor, events int64, join *int64, now time.Time, xid string, scan func(pgx.Row) error) {
	if join != nil {
		q.Queue(`UPDATE dispatch_state SET actions_epoch = actions_epoch + 1`)
	}
	q.Queue(`UPDATE action_backfills SET cursor = $3::bigint, events = events + $4::bigint, updated_at = $5::timestamptz,
			joined_position = $6::bigint,
			status = CASE WHEN $6::bigint IS NOT NULL AND status = 'RUNNING' THEN 'DONE' ELSE status END,
			finished_at = CASE WHEN $6::bigint IS NOT NULL THEN coalesce(finished_at, $5::timestamptz) END
		WHERE action_id = $1 AND version = $2 RETURNING `+xid, b.ActionID, b.Version, cursor, events, now, join).QueryRow(scan)
}

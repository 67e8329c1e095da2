package session

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
)

// BackfillOnce works one batch of the oldest backfill still judging
// events (issue 15; action.Backfill) and returns how many events it read:
// 0 when there is none to work, or when another dispatcher holds the
// cursor.
//
// The batch runs as a live dispatch batch does, with the backfilled
// version alone in its trigger index, covering every event: its start
// triggers create sessions (the same ones a live event would: the id comes
// from the input), its resume triggers deliver to the sessions of its
// version, it leaves intake records and queues executions. It holds the
// dispatch cursor row for the whole transaction, so it never runs beside
// a live batch, and it judges events only up to the dispatch cursor. When
// it reaches it, the version joins live dispatch in the same transaction:
// every event is judged by the version once, in commit order, as if the
// version had existed before the backfill's start. The backfill's cursor
// moves in the same transaction as everything its events produce, so a
// crash neither loses nor repeats a delivery.
//
// A cancelled backfill skips the events before the version was made. While
// the action is not ACTIVE, a backfill judges the events up to where its
// status changed, then joins (live dispatch leaves a disabled action out).
func (d *Dispatcher) BackfillOnce(ctx context.Context) (n int, err error) {
	var b *batch
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		live, _, ok, err := lockCursor(ctx, tx)
		if err != nil || !ok {
			return err // !ok: a live batch runs; it goes first
		}
		bf, err := action.NextBackfill(ctx, tx)
		if err != nil || bf == nil {
			return err
		}
		comp, err := d.actions.Compiled(ctx, bf.ActionID, bf.Version)
		if err != nil {
			return err
		}
		from, bound := bf.Cursor, live
		if bf.Status == action.BackfillCancelled {
			from = max(from, bf.ToPosition)
		}
		if bf.ActionStatus != action.StatusActive {
			bound = min(bound, bf.StatusPosition)
		}
		ix, err := d.versionIndex(ctx, tx, comp, from)
		if err != nil {
			return err
		}
		events, err := readRange(ctx, tx, from, bound, d.Batch)
		if err != nil {
			return err
		}
		// Positions have no gaps: fewer than a full batch in range means
		// every event up to bound has been read. The version joins live
		// dispatch only once the dispatch cursor has passed its own start
		// (live dispatch judges it from there): until then the backfill
		// waits for live dispatch to catch up.
		reached, join := max(from, bound), &live
		if len(events) == d.Batch && events[len(events)-1].Position < bound {
			reached, join = events[len(events)-1].Position, nil
		} else if live < bf.ToPosition {
			join = nil
		}
		if len(events) == 0 && join == nil {
			return nil // nothing to do until live dispatch moves on
		}
		b = &batch{d: d, index: ix, tx: tx, now: d.clock.Now(), diags: map[diagKey]*diagEntry{}, backfill: bf, join: join}
		for _, ev := range events {
			if err := b.event(ctx, ev); err != nil {
				return fmt.Errorf("backfill %s v%d: event %d: %w", bf.ActionID, bf.Version, ev.Position, err)
			}
		}
		if err := b.flush(ctx, reached); err != nil {
			return err
		}
		n = max(len(events), 1) // 1: it joined with no event left to read
		return nil
	})
	if err == nil && b != nil {
		b.notice.Post(d.Notifier, b.xid)
	}
	return n, err
}

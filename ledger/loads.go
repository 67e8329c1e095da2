package ledger

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Batcher sends a pgx.Batch: its statements travel in one round trip and,
// outside a transaction, run in one implicit transaction, so they read one
// snapshot. A *pgxpool.Pool, *pgx.Conn and pgx.Tx are Batchers.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// QueueEventsByID queues on b the read of the events with the given ids;
// when b's results are read, each found event is stored in into under its
// id (missing ids stay absent). It is a dataloader's batch read (issue 14).
func QueueEventsByID(b *pgx.Batch, ids []uuid.UUID, into map[uuid.UUID]Event) {
	b.Queue(`SELECT `+eventColumns+` FROM events WHERE id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
		return eachEvent(rows, func(e Event) { into[e.ID] = e })
	})
}

package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Writer writes records inside a longer transaction (a turn, a tool call)
// and defers the events those writes append until Flush, just before the
// transaction commits. Record rows are written at once, so reads in the
// transaction see them; the ledger head is taken only by Flush, so a slow
// handler never holds up other appenders. Not safe for concurrent use.
//
// The transaction begins on first use (a handler that never touches the
// ledger holds no transaction while it runs).
type Writer struct {
	pool    *pgxpool.Pool
	tx      pgx.Tx
	now     func() time.Time
	pending []NewEvent
	calls   int
	marks   int
	// OnBegin, when set, runs in the transaction as it begins (a replay
	// writes the row its tool calls name there).
	OnBegin func(ctx context.Context, tx pgx.Tx) error
}

// NewWriter returns a Writer whose transaction begins on pool when first
// needed; now reads the injected clock.
func NewWriter(pool *pgxpool.Pool, now func() time.Time) *Writer {
	return &Writer{pool: pool, now: now}
}

// Tx returns the writer's transaction, beginning it if needed.
func (w *Writer) Tx(ctx context.Context) (pgx.Tx, error) {
	if w.tx == nil {
		tx, err := w.pool.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("ledger: begin: %w", err)
		}
		if w.OnBegin != nil {
			if err := w.OnBegin(ctx, tx); err != nil {
				_ = tx.Rollback(context.WithoutCancel(ctx))
				return nil, err
			}
		}
		w.tx = tx
	}
	return w.tx, nil
}

// Now reads the writer's clock.
func (w *Writer) Now() time.Time { return w.now() }

// NextCall numbers the calls made in this transaction, from 1 (X5).
func (w *Writer) NextCall() int {
	w.calls++
	return w.calls
}

// Commit flushes the queued events and commits; a writer that never began
// commits nothing.
func (w *Writer) Commit(ctx context.Context) error {
	if w.tx == nil {
		return nil
	}
	if _, err := w.Flush(ctx); err != nil {
		return err
	}
	err := w.tx.Commit(ctx)
	w.tx = nil
	return err
}

// Rollback abandons the transaction and everything queued. Safe to call
// more than once and after Commit.
func (w *Writer) Rollback(ctx context.Context) {
	if w.tx != nil {
		_ = w.tx.Rollback(ctx)
		w.tx = nil
	}
	w.pending, w.calls = nil, 0
}

// Get reads a record as this transaction sees it (its own writes included).
func (w *Writer) Get(ctx context.Context, ns, key string) (jsonvalue.Value, bool, error) {
	tx, err := w.Tx(ctx)
	if err != nil {
		return nil, false, err
	}
	var v []byte
	err = tx.QueryRow(ctx, `SELECT value FROM kv_values WHERE namespace = $1 AND key = $2`, ns, key).Scan(&v)
	if err == pgx.ErrNoRows {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledger: read record: %w", err)
	}
	return v, true, nil
}

// Put writes a record and queues its event (L2); it returns the record's
// new version. Validation as for Store.PutValue; errors are *fault.Error.
func (w *Writer) Put(ctx context.Context, ns, key string, value jsonvalue.Value) (int64, error) {
	if err := ValidateNamespace(ns, "namespace"); err != nil {
		return 0, err
	}
	if err := ValidateKey(key, "key"); err != nil {
		return 0, err
	}
	if err := jsonvalue.Check(value, "value"); err != nil {
		return 0, err
	}
	tx, err := w.Tx(ctx)
	if err != nil {
		return 0, err
	}
	ev, version, _, err := putRecord(ctx, tx, w.now(), ns, key, value)
	if err != nil {
		return 0, err
	}
	w.pending = append(w.pending, ev)
	return version, nil
}

// Mark is a point in the writer's transaction that RollbackTo returns to.
type Mark struct {
	name    string
	pending int
}

// Mark sets a savepoint in the transaction (beginning it if needed) and
// remembers the queued events, so a failed step (a tool call) can be undone
// without abandoning the transaction.
func (w *Writer) Mark(ctx context.Context) (Mark, error) {
	tx, err := w.Tx(ctx)
	if err != nil {
		return Mark{}, err
	}
	w.marks++
	m := Mark{name: fmt.Sprintf("mark_%d", w.marks), pending: len(w.pending)}
	if _, err := tx.Exec(ctx, "SAVEPOINT "+m.name); err != nil {
		return Mark{}, fmt.Errorf("ledger: savepoint: %w", err)
	}
	return m, nil
}

// RollbackTo undoes everything written and queued since m.
func (w *Writer) RollbackTo(ctx context.Context, m Mark) error {
	if w.tx == nil {
		return fmt.Errorf("ledger: rollback to %s: no transaction", m.name)
	}
	if _, err := w.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+m.name); err != nil {
		return fmt.Errorf("ledger: rollback to savepoint: %w", err)
	}
	if m.pending < len(w.pending) {
		w.pending = w.pending[:m.pending]
	}
	return nil
}

// Append queues an event with no record.
func (w *Writer) Append(ev NewEvent) { w.pending = append(w.pending, ev) }

// Flush appends the queued events (taking the ledger head) and returns
// them. Call it as the last write before commit.
func (w *Writer) Flush(ctx context.Context) ([]Event, error) {
	if len(w.pending) == 0 {
		return nil, nil
	}
	tx, err := w.Tx(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := Append(ctx, tx, w.now(), w.pending...)
	if err != nil {
		return nil, err
	}
	w.pending = nil
	return evs, nil
}

// putRecord writes the record row and returns the event to append for it.
func putRecord(ctx context.Context, tx pgx.Tx, now time.Time, ns, key string, value jsonvalue.Value) (NewEvent, int64, time.Time, error) {
	eventID := NewID()
	var version int64
	var inserted bool
	var created time.Time
	// The event is appended later (the head is taken last); kv_values.event_id
	// is a deferred foreign key, checked at commit.
	err := tx.QueryRow(ctx, `
		INSERT INTO kv_values AS k (namespace, key, value, version, event_id, created_at, updated_at)
		VALUES ($1, $2, $3, 1, $4, $5, $5)
		ON CONFLICT (namespace, key) DO UPDATE
		   SET value = EXCLUDED.value, version = k.version + 1, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at
		RETURNING version, (xmax = 0), created_at`, ns, key, []byte(value), eventID, now).Scan(&version, &inserted, &created)
	if err != nil {
		return NewEvent{}, 0, time.Time{}, fmt.Errorf("ledger: write record: %w", err)
	}
	typ := ns + ".updated"
	if inserted {
		typ = ns + ".inserted"
	}
	return NewEvent{ID: eventID, Type: typ, Data: value, Record: &RecordRef{Namespace: ns, Key: key, Version: version}}, version, created.UTC(), nil
}

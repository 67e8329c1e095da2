package turns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Turn is one recorded turn of a session (T9).
type Turn struct {
	SID              int64
	Number           int
	Status           TurnStatus
	ExecutionID      uuid.UUID
	Final            bool
	EndsAt           *time.Time
	StartedAt        time.Time
	FinishedAt       *time.Time
	CheckpointState  jsonvalue.Value
	CheckpointStatus *string
	CheckpointReason *string
	// Resumed reports whether the turn resumed from approval responses
	// (P5): such a turn, once held, cannot be skipped (H4).
	Resumed bool
}

// Execution is one run of a handler: a turn's, or a tool call's (a child).
type Execution struct {
	ID         uuid.UUID
	ActionID   uuid.UUID
	Version    int
	SID        *int64
	Turn       *int
	ParentID   *uuid.UUID
	Status     ExecStatus
	Attempts   int
	Input      jsonvalue.Value
	Output     jsonvalue.Value
	Error      *string
	StartedAt  time.Time
	FinishedAt *time.Time
	// Approvals are the interrupts the execution left its session waiting
	// on when it ended WAITING (P1, P2), in order; HoldID is the hold of a
	// held execution (H2).
	Approvals []uuid.UUID
	HoldID    *uuid.UUID
	// TraceID is the OpenTelemetry trace (32 hex digits) of the run that
	// wrote the execution, nil when it was not traced (issue 12).
	TraceID *string

	// Set for an execution of an action without a session block (issue
	// 15): the event it runs for (and its position), the triggers that
	// matched, its concurrency group (nil when the key failed), when it
	// was queued, and the operator retries it has had.
	EventID        *uuid.UUID
	EventPosition  *int64
	Triggers       []string
	ConcurrencyKey *string
	QueuedAt       *time.Time
	Retries        int
	RetriedBy      *string
	RetriedAt      *time.Time

	// ReplayOf is the execution this one replays (T9); Replay its record
	// ({outcome, original, diff, by, provider}, see ReplayRecord); nil for
	// any other execution.
	ReplayOf *uuid.UUID
	Replay   jsonvalue.Value

	// Usage is the model use of all its attempts (G8).
	Usage Usage
}

// Store reads turns, executions and transcripts.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a Store.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const turnColumns = `sid, number, status, execution_id, final, ends_at, started_at, finished_at, checkpoint_state, checkpoint_status, checkpoint_reason, resume IS NOT NULL`

func scanTurn(r pgx.CollectableRow) (Turn, error) {
	var t Turn
	err := r.Scan(&t.SID, &t.Number, &t.Status, &t.ExecutionID, &t.Final, &t.EndsAt, &t.StartedAt, &t.FinishedAt,
		&t.CheckpointState, &t.CheckpointStatus, &t.CheckpointReason, &t.Resumed)
	t.StartedAt = t.StartedAt.UTC()
	if t.EndsAt != nil {
		u := t.EndsAt.UTC()
		t.EndsAt = &u
	}
	return t, err
}

// Turns pages a session's turns newest first, below number before (0: from the newest).
func (s *Store) Turns(ctx context.Context, sid int64, before, first int) ([]Turn, error) {
	if before <= 0 {
		before = 1<<31 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM session_turns WHERE sid = $1 AND number < $2 ORDER BY number DESC LIMIT $3`, sid, before, first)
	if err != nil {
		return nil, fmt.Errorf("turns: list: %w", err)
	}
	return pgx.CollectRows(rows, scanTurn)
}

// Turn returns one turn, or nil.
func (s *Store) Turn(ctx context.Context, sid int64, number int) (*Turn, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM session_turns WHERE sid = $1 AND number = $2`, sid, number)
	if err != nil {
		return nil, fmt.Errorf("turns: get: %w", err)
	}
	t, err := pgx.CollectOneRow(rows, scanTurn)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &t, err
}

const executionColumns = `id, action_id, version, sid, turn, parent_id, status, attempts, input, output, error, started_at, finished_at,
	approvals, hold_id, trace_id, event_id, event_position, triggers, concurrency_key, queued_at, retries, retried_by, retried_at,
	replay_of, replay, model_calls, input_tokens, output_tokens, cost_usd::float8, unpriced_calls`

func scanExecution(r pgx.CollectableRow) (Execution, error) {
	var x Execution
	err := r.Scan(&x.ID, &x.ActionID, &x.Version, &x.SID, &x.Turn, &x.ParentID, &x.Status, &x.Attempts, &x.Input, &x.Output, &x.Error, &x.StartedAt, &x.FinishedAt,
		&x.Approvals, &x.HoldID, &x.TraceID, &x.EventID, &x.EventPosition, &x.Triggers, &x.ConcurrencyKey, &x.QueuedAt,
		&x.Retries, &x.RetriedBy, &x.RetriedAt, &x.ReplayOf, &x.Replay,
		&x.Usage.ModelCalls, &x.Usage.InputTokens, &x.Usage.OutputTokens, &x.Usage.CostUSD, &x.Usage.Unpriced)
	x.StartedAt = x.StartedAt.UTC()
	for _, t := range []**time.Time{&x.FinishedAt, &x.QueuedAt, &x.RetriedAt} {
		if *t != nil {
			u := (**t).UTC()
			*t = &u
		}
	}
	return x, err
}

// Replays returns the replays of execution id (T9), oldest first.
func (s *Store) Replays(ctx context.Context, id uuid.UUID) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions WHERE replay_of = $1 ORDER BY started_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("turns: replays: %w", err)
	}
	return pgx.CollectRows(rows, scanExecution)
}

// Execution returns one execution, or nil.
func (s *Store) Execution(ctx context.Context, id uuid.UUID) (*Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("turns: execution: %w", err)
	}
	x, err := pgx.CollectOneRow(rows, scanExecution)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &x, err
}

// Executions returns the executions with the given ids, keyed by id;
// missing ids are absent (a dataloader's batch, issue 12).
func (s *Store) Executions(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("turns: executions: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanExecution)
	if err != nil {
		return nil, fmt.Errorf("turns: executions: %w", err)
	}
	out := make(map[uuid.UUID]*Execution, len(list))
	for i := range list {
		out[list[i].ID] = &list[i]
	}
	return out, nil
}

// TurnKey names one turn of a session.
type TurnKey struct {
	SID    int64
	Number int
}

// TurnsByKey returns the turns named by keys, keyed the same way; missing
// ones are absent (a dataloader's batch, issue 12).
func (s *Store) TurnsByKey(ctx context.Context, keys []TurnKey) (map[TurnKey]*Turn, error) {
	out := make(map[TurnKey]*Turn, len(keys))
	b := &pgx.Batch{}
	QueueTurns(b, keys, out)
	return out, s.pool.SendBatch(ctx, b).Close()
}

// TurnsFrom reads through q a session's turns numbered from on, oldest
// first (a subscriber catching up with the turns that changed, issue 12).
func TurnsFrom(ctx context.Context, q ledger.Querier, sid int64, from int) ([]Turn, error) {
	rows, err := q.Query(ctx, `SELECT `+turnColumns+` FROM session_turns WHERE sid = $1 AND number >= $2 ORDER BY number`, sid, from)
	if err != nil {
		return nil, fmt.Errorf("turns: list: %w", err)
	}
	return pgx.CollectRows(rows, scanTurn)
}

// Children pages the executions started by parent, oldest first, after the given start time/id cursor.
func (s *Store) Children(ctx context.Context, parent uuid.UUID, afterID uuid.UUID, first int) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions WHERE parent_id = $1 AND id > $2 ORDER BY id LIMIT $3`, parent, afterID, first)
	if err != nil {
		return nil, fmt.Errorf("turns: children: %w", err)
	}
	return pgx.CollectRows(rows, scanExecution)
}

// Transcript pages an execution's entries in order after sequence afterSeq.
func (s *Store) Transcript(ctx context.Context, execID uuid.UUID, afterSeq, first int) ([]Entry, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, data, at FROM transcript_entries WHERE execution_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, execID, afterSeq, first)
	if err != nil {
		return nil, fmt.Errorf("turns: transcript: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.Seq, &e.Kind, &e.Data, &e.At)
		e.At = e.At.UTC()
		return e, err
	})
}

// CallExecution is a tool call's execution (X4), a child of the execution
// that made the call, if any.
type CallExecution struct {
	ID        uuid.UUID
	ActionID  uuid.UUID
	Version   int
	SID       *int64 // its tool session, if it has one
	ParentID  *uuid.UUID
	Input     jsonvalue.Value
	StartedAt time.Time
	TraceID   *string
}

// StartCall records x as RUNNING in tx, the call's transaction.
func StartCall(ctx context.Context, tx pgx.Tx, x CallExecution) error {
	_, err := tx.Exec(ctx, `INSERT INTO executions (id, action_id, version, sid, parent_id, status, attempts, input, started_at, trace_id)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9)`, x.ID, x.ActionID, x.Version, x.SID, x.ParentID, ExecRunning,
		[]byte(x.Input), x.StartedAt, x.TraceID)
	if err != nil {
		return fmt.Errorf("turns: call execution: %w", err)
	}
	return nil
}

// FinishCall records the call execution id SUCCEEDED with output at now in tx.
func FinishCall(ctx context.Context, tx pgx.Tx, id uuid.UUID, output jsonvalue.Value, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE executions SET status = $2, output = $3, finished_at = $4 WHERE id = $1`, id, ExecSucceeded, []byte(output), now)
	if err != nil {
		return fmt.Errorf("turns: call execution: %w", err)
	}
	return nil
}

// ActionExecutions pages the executions of an action without a session
// block (issue 15), newest event first: those whose event position is
// below before (0: from the newest), with the given status when status is
// not nil. first is at most what the caller allows.
func (s *Store) ActionExecutions(ctx context.Context, actionID uuid.UUID, before int64, first int, status *ExecStatus) ([]Execution, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions
		WHERE action_id = $1 AND event_id IS NOT NULL AND event_position < $2 AND ($3::text IS NULL OR status = $3)
		ORDER BY event_position DESC LIMIT $4`, actionID, before, status, first)
	if err != nil {
		return nil, fmt.Errorf("turns: executions: %w", err)
	}
	return pgx.CollectRows(rows, scanExecution)
}

// RetryExecution queues again the FAILED execution id of action actionID,
// an execution of an action without a session block (issue 15), on behalf
// of the operator by, at now: it runs at its version with its event, as
// before, with the executor's full number of attempts; its transcript
// keeps the earlier runs' entries, and its error the last failure until
// it settles again. Errors: fault.NotFound (no such execution of this
// action, or one of a turn or a tool call), fault.NotRetryable (it is not
// FAILED, or its concurrency key failed to evaluate, which a retry would
// repeat).
func (s *Store) RetryExecution(ctx context.Context, actionID, id uuid.UUID, by string, now time.Time) (*Execution, error) {
	var out *Execution
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+executionColumns+`, concurrency_limit IS NOT NULL AND concurrency_key IS NULL
			FROM executions WHERE id = $1 AND action_id = $2 AND event_id IS NOT NULL FOR UPDATE`, id, actionID)
		if err != nil {
			return err
		}
		var keyFailed bool
		x, err := pgx.CollectOneRow(rows, func(r pgx.CollectableRow) (Execution, error) {
			return scanExecution(extraScan{r, []any{&keyFailed}})
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fault.New(fault.NotFound, "id", "no execution with this id among the action's executions (an execution of a turn or a tool call is not retried this way)")
		case err != nil:
			return err
		case x.Status != ExecFailed:
			return fault.New(fault.NotRetryable, "id", "the execution is %s: only a FAILED execution is retried", x.Status)
		case keyFailed:
			return fault.New(fault.NotRetryable, "id", "the execution's concurrency key could not be evaluated for its event: a retry would fail the same way")
		}
		rows, err = tx.Query(ctx, `UPDATE executions SET status = $3, available_at = $4, finished_at = NULL,
				attempts_base = attempts, retries = retries + 1, retried_by = $5, retried_at = $4
			WHERE id = $1 AND action_id = $2
			RETURNING `+executionColumns+`, (SELECT pg_notify($6, ''))`, id, actionID, ExecQueued, now, nonEmpty(by), session.ExecutionsChannel)
		if err != nil {
			return err
		}
		x, err = pgx.CollectOneRow(rows, func(r pgx.CollectableRow) (Execution, error) {
			var skip any
			return scanExecution(extraScan{r, []any{&skip}})
		})
		out = &x
		return err
	})
	if fault.As(err) != nil {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("turns: retry execution: %w", err)
	}
	return out, nil
}

// extraScan scans trailing columns into extra, after the ones asked for.
type extraScan struct {
	pgx.CollectableRow
	extra []any
}

func (r extraScan) Scan(dest ...any) error { return r.CollectableRow.Scan(append(dest, r.extra...)...) }

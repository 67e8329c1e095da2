package turns

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/ledger"
)

// The Queue functions below are dataloaders' batch reads (issue 14): each
// queues one statement on a pgx.Batch that reads a per-parent list for any
// number of parents, and fills its map when the batch's results are read.

// QueueExecutions queues the read of the executions with the given ids;
// into gets each one found under its id (missing ids stay absent).
func QueueExecutions(b *pgx.Batch, ids []uuid.UUID, into map[uuid.UUID]*Execution) {
	b.Queue(`SELECT `+executionColumns+` FROM executions WHERE id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			x, err := scanExecution(rows)
			if err != nil {
				return fmt.Errorf("turns: executions: %w", err)
			}
			into[x.ID] = &x
		}
		return rows.Err()
	})
}

// QueueTranscripts queues the read of a page of each execution's
// transcript: its first `first` entries after sequence afterSeq, in order,
// as Transcript pages one. into gets each execution's page; executions
// with none are absent.
func QueueTranscripts(b *pgx.Batch, ids []uuid.UUID, afterSeq, first int, into map[uuid.UUID][]Entry) {
	b.Queue(`SELECT k.id, e.seq, e.kind, e.data, e.at FROM unnest($1::uuid[]) AS k (id)
		CROSS JOIN LATERAL (SELECT seq, kind, data, at FROM transcript_entries
			WHERE execution_id = k.id AND seq > $2 ORDER BY seq LIMIT $3) e
		ORDER BY k.id, e.seq`, ids, afterSeq, first).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var e Entry
			if err := rows.Scan(&id, &e.Seq, &e.Kind, &e.Data, &e.At); err != nil {
				return fmt.Errorf("turns: transcript: %w", err)
			}
			e.At = e.At.UTC()
			into[id] = append(into[id], e)
		}
		return rows.Err()
	})
}

// QueueChildren queues the read of a page of each parent's children (the
// executions it started, by tool calls): its first `first` children with
// ids above afterID, by id, as Children pages one. into gets each parent's
// page; parents without children are absent.
func QueueChildren(b *pgx.Batch, parents []uuid.UUID, afterID uuid.UUID, first int, into map[uuid.UUID][]Execution) {
	b.Queue(`SELECT x.* FROM unnest($1::uuid[]) AS k (id)
		CROSS JOIN LATERAL (SELECT `+executionColumns+` FROM executions
			WHERE parent_id = k.id AND id > $2 ORDER BY id LIMIT $3) x
		ORDER BY x.parent_id, x.id`, parents, afterID, first).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			x, err := scanExecution(rows)
			if err != nil {
				return fmt.Errorf("turns: children: %w", err)
			}
			into[*x.ParentID] = append(into[*x.ParentID], x)
		}
		return rows.Err()
	})
}

// QueueTurns queues the read of the turns with the given keys; into gets
// each one found under its key.
func QueueTurns(b *pgx.Batch, keys []TurnKey, into map[TurnKey]*Turn) {
	sids := make([]int64, len(keys))
	nums := make([]int32, len(keys))
	for i, k := range keys {
		sids[i], nums[i] = k.SID, int32(k.Number)
	}
	b.Queue(`SELECT `+turnColumns+` FROM session_turns
		JOIN unnest($1::bigint[], $2::int[]) AS k (sid, number) USING (sid, number)`, sids, nums).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, scanTurn)
		if err != nil {
			return fmt.Errorf("turns: get: %w", err)
		}
		for i := range list {
			into[TurnKey{list[i].SID, list[i].Number}] = &list[i]
		}
		return nil
	})
}

// CommittedTranscript is the transcript an execution committed: its entries, and
// the attempt that wrote them (the execution's last).
type CommittedTranscript struct {
	Attempt int
	Entries []Entry
}

// MaxCommittedEntries bounds the entries CommittedTranscripts reads of one
// execution.
const MaxCommittedEntries = 1000

// CommittedTranscripts reads through q the committed transcripts of the
// executions ids (at most MaxCommittedEntries entries each, in order), with
// their attempts: what a sessionUpdates subscriber is sent of a turn that
// settled without streaming its entries (issue 14, liveGate). Executions
// not found are absent.
func CommittedTranscripts(ctx context.Context, q ledger.Querier, ids []uuid.UUID) (map[uuid.UUID]CommittedTranscript, error) {
	rows, err := q.Query(ctx, `SELECT x.id, x.attempts, e.seq, e.kind, e.data, e.at FROM unnest($1::uuid[]) AS k (id)
		JOIN LATERAL (SELECT id, attempts FROM executions WHERE id = k.id LIMIT 1) x ON true
		LEFT JOIN LATERAL (SELECT seq, kind, data, at FROM transcript_entries
			WHERE execution_id = k.id ORDER BY seq LIMIT $2) e ON true
		ORDER BY x.id, e.seq`, ids, MaxCommittedEntries)
	if err != nil {
		return nil, fmt.Errorf("turns: transcripts: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]CommittedTranscript, len(ids))
	for rows.Next() {
		var id uuid.UUID
		var attempts int
		var seq *int
		var kind *string
		var data []byte
		var at *time.Time
		if err := rows.Scan(&id, &attempts, &seq, &kind, &data, &at); err != nil {
			return nil, fmt.Errorf("turns: transcripts: %w", err)
		}
		c := out[id]
		c.Attempt = attempts
		if seq != nil {
			c.Entries = append(c.Entries, Entry{Seq: *seq, Kind: *kind, Data: data, At: at.UTC()})
		}
		out[id] = c
	}
	return out, rows.Err()
}

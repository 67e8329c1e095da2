package session

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ReachedBy returns, per event id, the sessions each event reached (issue
// 13): those it was delivered to as an input and those whose origin it is
// (S2, S3), each once, ordered by action id and session id. Events that
// reached none are absent.
func (st *Store) ReachedBy(ctx context.Context, events []uuid.UUID) (map[uuid.UUID][]Session, error) {
	out := make(map[uuid.UUID][]Session, len(events))
	if len(events) == 0 {
		return out, nil
	}
	rows, err := st.pool.Query(ctx, `SELECT r.event_id, `+prefixed("s", sessionColumns)+`
		FROM (SELECT event_id, sid FROM session_inputs WHERE event_id = ANY($1)
		      UNION
		      SELECT origin_event_id, sid FROM sessions WHERE origin_event_id = ANY($1)) r
		JOIN sessions s ON s.sid = r.sid
		ORDER BY r.event_id, s.action_id, s.id`, events)
	if err != nil {
		return nil, fmt.Errorf("session: sessions reached: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev uuid.UUID
		s, err := scanSession(withFirst{rows, &ev})
		if err != nil {
			return nil, fmt.Errorf("session: sessions reached: %w", err)
		}
		out[ev] = append(out[ev], *s)
	}
	return out, rows.Err()
}

// withFirst scans a row's first column into first and the rest into the
// destinations Scan is given.
type withFirst struct {
	row   pgx.Row
	first any
}

func (w withFirst) Scan(dest ...any) error { return w.row.Scan(append([]any{w.first}, dest...)...) }

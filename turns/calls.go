package turns

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// CallCounts returns, for each of the executions ids, how many committed
// tool calls it made (its child executions; issue 17, I4: an input's
// `calls`). Executions that made none are absent. One query.
func (s *Store) CallCounts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT parent_id, count(*) FROM executions WHERE parent_id = ANY($1) GROUP BY parent_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("turns: call counts: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("turns: call counts: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}

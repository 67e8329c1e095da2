package action

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// QueueActions queues on b the read of the actions with the given ids (a
// dataloader's batch read, issue 14); when b's results are read, into gets
// each one found under its id. With current non-nil the same statement
// reads each action's current version too, stored in current under its
// VersionKey.
func QueueActions(b *pgx.Batch, ids []uuid.UUID, into map[uuid.UUID]*Action, current map[VersionKey]*Version) {
	const actionCols = `a.id, a.current_version, a.status, a.created_at, a.updated_at`
	if current == nil {
		b.Queue(`SELECT `+actionCols+` FROM actions a WHERE a.id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				a, err := scanAction(rows)
				if err != nil {
					return err
				}
				into[a.ID] = a
			}
			return rows.Err()
		})
		return
	}
	b.Queue(`SELECT `+actionCols+`, v.action_id, v.version, v.definition, v.from_position, v.created_at, coalesce(v.author, '')
		FROM actions a JOIN action_versions v ON v.action_id = a.id AND v.version = a.current_version
		WHERE a.id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var v Version
			var raw []byte
			a, err := scanAction(withExtra{rows, []any{&v.ActionID, &v.Version, &raw, &v.FromPosition, &v.CreatedAt, &v.Author}})
			if err != nil {
				return err
			}
			if v, err = decodeVersion(v, raw); err != nil {
				return err
			}
			into[a.ID] = a
			current[VersionKey{v.ActionID, v.Version}] = &v
		}
		return rows.Err()
	})
}

func scanAction(row pgx.Row) (*Action, error) {
	var a Action
	if err := row.Scan(&a.ID, &a.CurrentVersion, &a.Status, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, fmt.Errorf("action: get: %w", err)
	}
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return &a, nil
}

// withExtra is a row whose Scan fills extra after the destinations it is
// given, so a scan function of one table reads a row joined with another.
type withExtra struct {
	pgx.Row
	extra []any
}

func (r withExtra) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// QueueVersions queues on b the read of the action versions with the given
// keys (a dataloader's batch read, issue 14); when b's results are read,
// into gets each one found under its key.
func QueueVersions(b *pgx.Batch, keys []VersionKey, into map[VersionKey]*Version) {
	ids := make([]uuid.UUID, len(keys))
	nums := make([]int32, len(keys))
	for i, k := range keys {
		ids[i], nums[i] = k.ActionID, int32(k.Version)
	}
	b.Queue(`SELECT action_id, version, definition, from_position, created_at, coalesce(author, '') FROM action_versions
		JOIN unnest($1::uuid[], $2::int[]) AS k (action_id, version) USING (action_id, version)`, ids, nums).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, scanVersion)
		if err != nil {
			return fmt.Errorf("action: versions: %w", err)
		}
		for i := range list {
			into[VersionKey{list[i].ActionID, list[i].Version}] = &list[i]
		}
		return nil
	})
}

package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TokenInfo is what is listed of a token: never its secret, of which only
// the hash is kept.
type TokenInfo struct {
	ID        uuid.UUID
	Principal string
	CreatedAt time.Time
	// RevokedAt is nil while the token is valid.
	RevokedAt *time.Time
}

// TokensOf returns the tokens of the given principals, revoked ones
// included, newest first, keyed by principal (one statement: a batch of a
// dataloader). Principals without tokens are absent.
func (s *Store) TokensOf(ctx context.Context, principals []string) (map[string][]TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, principal_id, created_at, revoked_at FROM auth_tokens
		WHERE principal_id = ANY($1) ORDER BY principal_id, created_at DESC, id`, principals)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) {
		var t TokenInfo
		err := r.Scan(&t.ID, &t.Principal, &t.CreatedAt, &t.RevokedAt)
		t.CreatedAt = t.CreatedAt.UTC()
		if t.RevokedAt != nil {
			u := t.RevokedAt.UTC()
			t.RevokedAt = &u
		}
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	out := map[string][]TokenInfo{}
	for _, t := range list {
		out[t.Principal] = append(out[t.Principal], t)
	}
	return out, nil
}

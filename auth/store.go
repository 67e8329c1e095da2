package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// TokenPrefix starts every token, so that a leaked one is easy to spot.
const TokenPrefix = "alt_"

// MaxPolicies bounds the policies of one principal.
const MaxPolicies = 100

// Store keeps principals, their policies and their tokens.
type Store struct {
	pool  *pgxpool.Pool
	clock clock.Clock
}

// NewStore returns a store over pool.
func NewStore(pool *pgxpool.Pool, clk clock.Clock) *Store { return &Store{pool: pool, clock: clk} }

// NewToken returns a fresh token: TokenPrefix and 32 random bytes, base64url.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what is stored of a token.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Issued is a token just created; Token is shown this once.
type Issued struct {
	ID        uuid.UUID
	Principal Principal
	Token     string
	CreatedAt time.Time
}

// CreateToken creates principal id if it does not exist, sets its policies
// to policies (replacing those it had) and issues a new token for it. The
// principal's other tokens stay valid (and now carry the new policies).
func (s *Store) CreateToken(ctx context.Context, id string, policies []Policy) (*Issued, error) {
	if id == "" || len(id) > 200 || strings.TrimSpace(id) != id {
		return nil, fault.New(fault.BadInput, "principal", "a principal id is 1-200 characters without leading or trailing spaces")
	}
	if id == DevID {
		return nil, fault.New(fault.BadInput, "principal", "%q is reserved for the principal of dev mode", id)
	}
	if len(policies) > MaxPolicies {
		return nil, fault.New(fault.BadInput, "policies", "at most %d policies", MaxPolicies)
	}
	for i, p := range policies {
		if err := p.Check(fmt.Sprintf("policies[%d]", i)); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	out := &Issued{ID: uuid.New(), Token: NewToken(), CreatedAt: now}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO auth_principals (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM auth_policies WHERE principal_id = $1`, id); err != nil {
			return err
		}
		for _, p := range policies {
			if _, err := tx.Exec(ctx, `INSERT INTO auth_policies (principal_id, action, resource) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				id, p.Action, p.Resource); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auth_tokens (id, principal_id, hash, created_at) VALUES ($1, $2, $3, $4)`,
			out.ID, id, Hash(out.Token), now); err != nil {
			return err
		}
		// The policies may have shrunk: action versions this principal
		// stored run with less from now on (Authorities re-reads them).
		_, err := tx.Exec(ctx, `UPDATE auth_state SET epoch = epoch + 1`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	out.Principal = Principal{ID: id, Policies: dedupe(policies)}
	return out, nil
}

// Revoke revokes a token by its id; it reports whether a valid token was
// revoked (false: no such token, or revoked before).
func (s *Store) Revoke(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE auth_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, s.clock.Now())
	if err != nil {
		return false, fmt.Errorf("revoke token: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ErrUnknownToken: the token is not one the store issued, or it is revoked.
var ErrUnknownToken = errors.New("unknown or revoked token")

// Authenticate returns the principal a valid token belongs to.
func (s *Store) Authenticate(ctx context.Context, token string) (Principal, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT principal_id FROM auth_tokens WHERE hash = $1 AND revoked_at IS NULL`, Hash(token)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnknownToken
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	pols, err := s.policies(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	return Principal{ID: id, Policies: pols}, nil
}

func (s *Store) policies(ctx context.Context, id string) ([]Policy, error) {
	return policiesOf(ctx, s.pool, id)
}

// Principals lists every principal with its policies, by id. Tokens are
// never listed.
func (s *Store) Principals(ctx context.Context) ([]Principal, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, a.action, a.resource FROM auth_principals p
		LEFT JOIN auth_policies a ON a.principal_id = p.id ORDER BY p.id, a.resource, a.action`)
	if err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	defer rows.Close()
	var out []Principal
	for rows.Next() {
		var id string
		var action, resource *string
		if err := rows.Scan(&id, &action, &resource); err != nil {
			return nil, fmt.Errorf("principals: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, Principal{ID: id})
		}
		if action != nil {
			last := &out[len(out)-1]
			last.Policies = append(last.Policies, Policy{Action: *action, Resource: *resource})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	return out, nil
}

func dedupe(ps []Policy) []Policy {
	seen := map[Policy]bool{}
	out := []Policy{}
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].Action < out[j].Action
	})
	return out
}

package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Handler credentials (T10). While a turn runs, its handler holds a bearer
// credential whose principal may read that one session (the session, its
// turns and inputs) and nothing else.
//
// A credential is 32 random bytes behind CredentialPrefix, stored as its
// SHA-256 with the session, the lease token it was minted under, the
// execution and an expiry. It is random and stored rather than signed with a
// server key so that it needs no key to configure or rotate and can be
// checked against the live lease: it is accepted only while its expiry has
// not passed and the session is open and still holds that lease. Committing, failing or
// cancelling the turn releases the lease and a lost lease is bumped or
// expires, so the credential stops working with the turn; the executor also
// deletes it when the turn's run ends.

// CredentialPrefix starts every handler credential.
const CredentialPrefix = "alh_"

// SessionScope is the one session a handler credential may read.
type SessionScope struct {
	ActionID    uuid.UUID
	SessionID   string
	ExecutionID uuid.UUID
}

// ErrUnknownCredential: the credential is unknown, expired or its turn is over.
var ErrUnknownCredential = errors.New("unknown or expired handler credential")

// DB is what minting and revoking need: a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// MintCredential makes a credential for the turn that execID runs in session
// sid under lease leaseToken, good until expiresAt at the latest.
func MintCredential(ctx context.Context, db DB, sid, leaseToken int64, execID uuid.UUID, expiresAt time.Time) (string, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	cred := CredentialPrefix + base64.RawURLEncoding.EncodeToString(b)
	if _, err := db.Exec(ctx, `INSERT INTO handler_credentials (hash, sid, lease_token, execution_id, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, Hash(cred), sid, leaseToken, execID, expiresAt); err != nil {
		return "", fmt.Errorf("mint handler credential: %w", err)
	}
	return cred, nil
}

// RevokeCredentials deletes the credentials of session sid minted under
// leaseToken, and any credential whose expiry has passed.
func RevokeCredentials(ctx context.Context, db DB, sid, leaseToken int64, now time.Time) error {
	if _, err := db.Exec(ctx, `DELETE FROM handler_credentials WHERE (sid = $1 AND lease_token = $2) OR expires_at <= $3`,
		sid, leaseToken, now); err != nil {
		return fmt.Errorf("revoke handler credentials: %w", err)
	}
	return nil
}

// IsCredential reports whether token looks like a handler credential.
func IsCredential(token string) bool { return strings.HasPrefix(token, CredentialPrefix) }

// AuthenticateCredential returns the session principal of a live handler
// credential, or ErrUnknownCredential.
func (s *Store) AuthenticateCredential(ctx context.Context, cred string) (Principal, error) {
	now := s.clock.Now()
	var sc SessionScope
	err := s.pool.QueryRow(ctx, `
		SELECT s.action_id, s.id, c.execution_id
		  FROM handler_credentials c JOIN sessions s ON s.sid = c.sid
		 WHERE c.hash = $1 AND c.expires_at > $2
		   AND s.status = 'OPEN' AND s.lease_token = c.lease_token AND s.lease_expires_at > $2`, Hash(cred), now).
		Scan(&sc.ActionID, &sc.SessionID, &sc.ExecutionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnknownCredential
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate handler credential: %w", err)
	}
	return Principal{ID: "handler:" + sc.ExecutionID.String(), Session: &sc}, nil
}

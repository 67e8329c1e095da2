package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// T10: a handler credential is good only while its expiry has not passed
// and its session is open and holds the lease it was minted under; it
// carries a session scope and no policies.
func TestHandlerCredentialLifetime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	store := auth.NewStore(pool, clk)

	actionID := uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO actions (id, current_version, created_at, updated_at) VALUES ($1, 1, $2, $2)`, actionID, t0)
	require.NoError(t, err)
	var sid int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, created_at, updated_at,
		lease_owner, lease_expires_at, lease_token) VALUES ($1, 'acct', 1, '{}', 'OPEN', $2, $2, $2, 'w', $3, 7) RETURNING sid`,
		actionID, t0, t0.Add(30*time.Second)).Scan(&sid))
	execID := uuid.New()

	cred, err := auth.MintCredential(ctx, pool, sid, 7, execID, t0.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, auth.IsCredential(cred))
	p, err := store.AuthenticateCredential(ctx, cred)
	require.NoError(t, err)
	require.Equal(t, &auth.SessionScope{ActionID: actionID, SessionID: "acct", ExecutionID: execID}, p.Session)
	require.Empty(t, p.Policies)
	require.False(t, p.Allows(auth.Read, auth.ActionResource(actionID)), "no policy grants")

	_, err = store.AuthenticateCredential(ctx, cred+"x")
	require.ErrorIs(t, err, auth.ErrUnknownCredential)

	// The lease expires (lost): refused; renewed by a heartbeat: good again.
	clk.Set(t0.Add(31 * time.Second))
	_, err = store.AuthenticateCredential(ctx, cred)
	require.ErrorIs(t, err, auth.ErrUnknownCredential)
	_, err = pool.Exec(ctx, `UPDATE sessions SET lease_expires_at = $2 WHERE sid = $1`, sid, t0.Add(2*time.Minute))
	require.NoError(t, err)
	_, err = store.AuthenticateCredential(ctx, cred)
	require.NoError(t, err)

	// Its own expiry passes: refused even with the lease held.
	clk.Set(t0.Add(time.Minute))
	_, err = store.AuthenticateCredential(ctx, cred)
	require.ErrorIs(t, err, auth.ErrUnknownCredential)

	// Another worker takes the lease: refused.
	cred2, err := auth.MintCredential(ctx, pool, sid, 7, execID, t0.Add(time.Hour))
	require.NoError(t, err)
	_, err = store.AuthenticateCredential(ctx, cred2)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sessions SET lease_token = 8 WHERE sid = $1`, sid)
	require.NoError(t, err)
	_, err = store.AuthenticateCredential(ctx, cred2)
	require.ErrorIs(t, err, auth.ErrUnknownCredential)

	// Revoking deletes the lease's credentials and expired ones.
	require.NoError(t, auth.RevokeCredentials(ctx, pool, sid, 7, clk.Now()))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM handler_credentials`).Scan(&n))
	require.Zero(t, n)
}

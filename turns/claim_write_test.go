package turns_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// countingAs is a well-behaved handler (countOutcome) by.
func countingAs(by string) runFunc {
	return func(_ context.Context, req *turns.Request) (*turns.Outcome, error) { return countOutcome(req, by) }
}

// runnableSession opens an account of a probe monitor with one entry
// delivered: its session waits for a turn.
func (b *bundle) runnableSession() *session.Session {
	b.t.Helper()
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	return b.session(actionID, acct)
}

// recordSessionWrites records every update of a session row with its
// transaction, the lease token before and after and the turn count after.
func (b *bundle) recordSessionWrites() {
	b.t.Helper()
	_, err := b.app.Pool.Exec(b.ctx, `
		CREATE TABLE session_writes (xid xid8, sid bigint, old_token bigint, new_token bigint, owner text, turn_count int);
		CREATE FUNCTION record_session_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO session_writes VALUES (pg_current_xact_id(), NEW.sid, OLD.lease_token, NEW.lease_token, NEW.lease_owner, NEW.turn_count);
			RETURN NEW;
		END $$;
		CREATE TRIGGER record_session_write AFTER UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION record_session_write();`)
	require.NoError(b.t, err)
}

type sessionWrite struct {
	XID                string
	OldToken, NewToken int64
	Owner              *string
	TurnCount          int
}

func (b *bundle) sessionWrites(sid int64) []sessionWrite {
	b.t.Helper()
	rows, err := b.app.Pool.Query(b.ctx, `SELECT xid::text, old_token, new_token, owner, turn_count FROM session_writes WHERE sid = $1 ORDER BY xid`, sid)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []sessionWrite
	for rows.Next() {
		var w sessionWrite
		require.NoError(b.t, rows.Scan(&w.XID, &w.OldToken, &w.NewToken, &w.Owner, &w.TurnCount))
		out = append(out, w)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// Issue 14, T1, HARD-PARTS 3: a claim that starts a turn writes its
// session's row once, installing the lease (owner and the next token) with
// the turn count; the turn's settle then writes it under that token.
func TestClaimWritesTheSessionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("w"))
	s := b.runnableSession()
	b.recordSessionWrites()

	require.True(t, b.runOnce(b.executor("worker-w", turns.Config{})))

	ws := b.sessionWrites(s.SID)
	require.NotEmpty(t, ws)
	claim := ws[0]
	require.Equal(t, 1, claim.TurnCount, "the claim's write records the turn")
	require.Greater(t, claim.NewToken, claim.OldToken, "and installs the next token")
	require.Equal(t, "worker-w", *claim.Owner)
	perTx := map[string]int{}
	for _, w := range ws {
		perTx[w.XID]++
	}
	require.Equal(t, 1, perTx[claim.XID], "one write of the row in the claim's transaction: %+v", ws)
	for _, w := range ws[1:] {
		require.Equal(t, claim.NewToken, w.OldToken, "later writes are fenced by the claim's token: %+v", ws)
	}
}

// Issue 14, HARD-PARTS 3: a claim that finds nothing to run stands down
// in one write that still moves the token on, so a holder from before the
// claim is fenced out as when the claim wrote the token first.
func TestClaimThatStandsDownMovesTheToken(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("w"))
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.dispatch()
	s := b.session(actionID, acct)
	// Runnable with nothing pending: the claim takes it and stands down.
	_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET next_turn_at = $2 WHERE sid = $1`, s.SID, b.clock.Now())
	require.NoError(t, err)
	b.recordSessionWrites()
	var before int64
	require.NoError(t, b.app.Pool.QueryRow(b.ctx, `SELECT lease_token FROM sessions WHERE sid = $1`, s.SID).Scan(&before))

	require.False(t, b.runOnce(b.executor("worker-w", turns.Config{})), "nothing to run")

	ws := b.sessionWrites(s.SID)
	require.Len(t, ws, 1, "one write: %+v", ws)
	require.Equal(t, before, ws[0].OldToken)
	require.Greater(t, ws[0].NewToken, before)
	require.Nil(t, ws[0].Owner, "no lease is left")
	require.Zero(t, b.count(`SELECT count(*) FROM sessions WHERE sid = $1 AND next_turn_at IS NOT NULL`, s.SID), "nothing keeps it runnable")
}

// HARD-PARTS 3, T7, issue 14: a claim commits without waiting for its WAL,
// so a PostgreSQL crash can lose it whole while its worker runs the turn.
// The next claim must not hand out the lost claim's token again: both
// workers' commits would pass their fences. A claim rolled back after it
// read its token stands in for the lost one.
func TestTokenOfALostClaimIsNotHandedOutAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("w"))
	s := b.runnableSession()

	tx, err := b.app.Pool.Begin(b.ctx)
	require.NoError(t, err)
	var lost []session.Claimed
	batch := &pgx.Batch{}
	session.QueueClaim(batch, b.clock.Now(), 10, &lost)
	require.NoError(t, tx.SendBatch(b.ctx, batch).Close())
	require.NoError(t, tx.Rollback(b.ctx))
	require.Len(t, lost, 1)
	require.Equal(t, s.SID, lost[0].SID)

	require.True(t, b.runOnce(b.executor("worker-w", turns.Config{})))
	var token int64
	require.NoError(t, b.app.Pool.QueryRow(b.ctx, `SELECT lease_token FROM sessions WHERE sid = $1`, s.SID).Scan(&token))
	require.Greater(t, token, lost[0].Token, "the lost claim's token is not installed by the next claim")
}

// Issue 14, T1: claims find runnable sessions through session_runnable,
// which triggers keep equal to sessions.next_turn_at in the writing
// transaction, and no index of sessions names next_turn_at (so the
// updates that make a session runnable or not can be HOT). The session
// row stays the authority: a session_runnable row that says runnable
// when the session is not (as a claim's snapshot can see one) claims
// nothing.
func TestClaimFindsSessionsThroughTheRunnableTable(t *testing.T) {
	t.Parallel()
	b := setup(t, countingAs("w"))
	s := b.runnableSession()
	mirrored := `SELECT count(*) FROM sessions s JOIN session_runnable r USING (sid)
		WHERE s.sid = $1 AND r.at IS NOT DISTINCT FROM s.next_turn_at`
	require.Equal(t, 1, b.count(mirrored, s.SID), "a delivery's runnable time is copied")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM session_runnable WHERE sid = $1 AND at IS NOT NULL`, s.SID))
	require.Zero(t, b.count(`
		SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = 'next_turn_at'
		 WHERE i.indrelid = 'sessions'::regclass
		   AND (a.attnum = ANY (i.indkey::int2[]) OR pg_get_expr(i.indpred, i.indrelid) LIKE '%next_turn_at%')`),
		"no index of sessions names next_turn_at")

	claim := func() []session.Claimed {
		tx, err := b.app.Pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(b.ctx)) }()
		var got []session.Claimed
		batch := &pgx.Batch{}
		session.QueueClaim(batch, b.clock.Now(), 10, &got)
		require.NoError(t, tx.SendBatch(b.ctx, batch).Close())
		return got
	}
	got := claim()
	require.Len(t, got, 1)
	require.Equal(t, s.SID, got[0].SID)

	// Not runnable any more, but a stale runnable row says it is.
	_, err := b.app.Pool.Exec(b.ctx, `UPDATE sessions SET next_turn_at = NULL WHERE sid = $1`, s.SID)
	require.NoError(t, err)
	require.Equal(t, 1, b.count(mirrored, s.SID), "clearing it is copied too")
	_, err = b.app.Pool.Exec(b.ctx, `UPDATE session_runnable SET at = $2 WHERE sid = $1`, s.SID, b.clock.Now())
	require.NoError(t, err)
	require.Empty(t, claim(), "the session row decides")

	// Runnable again: the turn runs and takes its entry.
	_, err = b.app.Pool.Exec(b.ctx, `UPDATE sessions SET next_turn_at = $2 WHERE sid = $1`, s.SID, b.clock.Now())
	require.NoError(t, err)
	require.True(t, b.runOnce(b.executor("worker-w", turns.Config{})))
	require.Equal(t, 1, b.count(mirrored, s.SID), "the settle's write is copied")
}

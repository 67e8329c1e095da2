package session

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actionsledger/actionsledger/ledger"
)

// The turn executor's side of a session (T1-T8, HARD-PARTS 3): leases and
// the writes that settle a turn. Package turns calls these; it writes no
// session row itself.
//
// Most of these functions queue their statements in a pgx.Batch, with the
// callbacks that read the results, instead of running them: the executor
// sends the statements of many sessions, and of its own tables, in one
// round trip. The batch must be sent in a transaction (pgx.Batch.BeginTx or
// a pgx.Tx), and the results are read when the batch is closed.

// Lease is a worker's claim on a session: the fencing token its claim
// installed. Every later claim installs a higher token, so a write fenced
// by the token (WHERE lease_token = Token) fails for a worker that lost the
// lease (HARD-PARTS 3).
type Lease struct {
	SID   int64
	Token int64
}

// Claimed is a session taken by QueueClaim, read while its row is locked
// (its lease columns as they were before the claim).
type Claimed struct {
	Session *Session
	// Lease carries the token the claim's write installs.
	Lease
	// Runnable is since when the session was runnable (next_turn_at).
	Runnable time.Time
	// InputCount is the delivery sequence of its last input: stable until
	// the claiming transaction ends, since the row is locked.
	InputCount int64
}

// QueueClaim queues the claim of up to limit runnable sessions, longest
// runnable first: OPEN, due (next_turn_at at or before now) and leased by
// nobody (or the lease expired at now). Each is appended to out with the
// next fencing token. Rows another transaction holds are skipped, never
// waited for; the claimed rows stay locked until the transaction ends.
// Their sids are left for the statements queued after it (ClaimedSIDs).
//
// Candidates are found through session_runnable (migration 00026), whose
// triggers copy next_turn_at; the conditions are checked again on each
// session row as it is locked, so a stale copy can delay a claim but
// never make a wrong one. The session is read in a LATERAL subquery kept
// apart (OFFSET 0) so that every plan probes it by key from the runnable
// times, in their order: a plain join planned on a grown table never
// analysed read every session and sorted them
// (TestClaimPlanFindsRunnableSessionsByIndex). Its status test is written
// `(status = $3) IS TRUE` so that it is no index condition: planned on an
// empty table, any index of sessions costs the same, and sessions_status
// would read every open session.
//
// The claim writes nothing itself: every claimed session must get exactly
// one of QueueStartTurns, QueueLease, QueueStandDown, QueueHold or
// QueueCompleteAtEnd in the same transaction, which installs the token
// (and the lease, or its end) in the row's one update (issue 14: a row
// version and two foreign-key checks less a turn than a claim that
// updated the row first). Those fence on a token below it (the row is
// locked meanwhile, so nothing else can have moved it) and fail the
// transaction when a row is not written.
//
// The token is the session's last one plus one, or the database's clock
// in microseconds when that is higher. A claim that commits without
// waiting for its WAL can be lost whole in a PostgreSQL crash while its
// worker runs the turn; the next claim then reads the token from before
// the lost one, and plus one alone would hand out the lost claim's token
// again, letting both workers' commits through their fences. The clock
// has moved on since (the restart alone takes longer than a microsecond),
// so the new token is higher.
func QueueClaim(b *pgx.Batch, now time.Time, limit int, out *[]Claimed) {
	b.Queue(`
		WITH c AS (
			SELECT s.* FROM session_runnable r, LATERAL (
				SELECT `+sessionColumns+`, `+nextToken+` AS token, next_turn_at, input_count FROM sessions
				 WHERE sid = r.sid AND next_turn_at <= $1 AND (status = $3) IS TRUE AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
				OFFSET 0) s
			 WHERE r.at <= $1
			 ORDER BY r.at LIMIT $2
			   FOR NO KEY UPDATE OF s SKIP LOCKED)
		SELECT c.* FROM c
		 WHERE (SELECT set_config('`+claimedSetting+`', coalesce(array_agg(sid)::text, '{}'), true) FROM c) IS NOT NULL
		 ORDER BY c.next_turn_at`,
		now, limit, Open).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c Claimed
			var err error
			c.Session, err = scanSession(extraRow{rows, []any{&c.Token, &c.Runnable, &c.InputCount}})
			if err != nil {
				return fmt.Errorf("session: claim: %w", err)
			}
			c.Lease.SID = c.Session.SID
			*out = append(*out, c)
		}
		return rows.Err()
	})
}

// claimedSetting is the transaction-local setting in which QueueClaim
// leaves the sids it locked, for the reads queued behind it in the same
// round trip (ClaimedSIDs).
const claimedSetting = "actionsledger.claimed"

// ClaimedSIDs is an SQL expression (bigint[]) for the sessions QueueClaim
// locked earlier in the transaction: empty before a claim, or when it
// found none. Statements queued behind QueueClaim in the same batch use it
// to read what the claimed sessions' turns are planned from without
// waiting for the claim's answer (one round trip less while the sessions
// are locked, issue 14).
const ClaimedSIDs = `coalesce(nullif(current_setting('` + claimedSetting + `', true), ''), '{}')::bigint[]`

// extraRow scans trailing columns into extra, after the ones asked for.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// Extend moves the expiry of each lease still held to until (a
// heartbeat) and returns the sessions whose lease is gone: taken over
// after it expired, or given up.
func Extend(ctx context.Context, q ledger.Querier, leases []Lease, until time.Time) (lost []int64, err error) {
	sids, tokens := leaseArrays(leases)
	rows, err := q.Query(ctx, `
		WITH u AS (
			UPDATE sessions s SET lease_expires_at = $3
			  FROM unnest($1::bigint[], $2::bigint[]) AS l (sid, token)
			 WHERE s.sid = l.sid AND s.lease_token = l.token
			RETURNING s.sid)
		SELECT l.sid FROM unnest($1::bigint[]) AS l (sid) WHERE l.sid NOT IN (SELECT sid FROM u)`, sids, tokens, until)
	if err != nil {
		return nil, fmt.Errorf("session: extend leases: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// Release gives a lease up at now, so that another claim may take the
// session at once; a lease already lost is left alone.
func Release(ctx context.Context, q Execer, l Lease, now time.Time) error {
	if _, err := q.Exec(ctx, `UPDATE sessions SET lease_expires_at = $3 WHERE sid = $1 AND lease_token = $2`, l.SID, l.Token, now); err != nil {
		return fmt.Errorf("session: release lease: %w", err)
	}
	return nil
}

func leaseArrays(leases []Lease) (sids, tokens []int64) {
	sids, tokens = make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		sids[i], tokens[i] = l.SID, l.Token
	}
	return sids, tokens
}

// StartTurn is a claimed session's new turn, as QueueStartTurns records it.
type StartTurn struct {
	Lease
	Turn int
	// Firings are due firings the turn takes, recorded as SCHEDULE inputs
	// (C3, C6) with the delivery sequences the caller gave them (after the
	// claim's InputCount).
	Firings []Input
	// Scheduled are the firings' scheduled times, and Entries their entry
	// names, in the order of Firings.
	Scheduled []time.Time
	Entries   []string
}

// nextToken is the select-list expression of a claimed session's next
// token (QueueClaim).
const nextToken = `greatest(lease_token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)`

// wroteAll checks that a claim's write reached each of its n sessions.
func wroteAll(what string, n int) func(pgconn.CommandTag) error {
	return func(ct pgconn.CommandTag) error {
		if ct.RowsAffected() != int64(n) {
			return fmt.Errorf("session: claim: %s wrote %d of %d sessions (their tokens moved)", what, ct.RowsAffected(), n)
		}
		return nil
	}
}

// QueueStartTurns queues, for sessions a claim in this transaction took,
// their lease (owner, until, the claim's token) and the record of their new
// turns: the turn count and the firings taken as inputs; ann gets the
// change to announce (issue 12). The firings' events must be appended in
// the same transaction (ledger.Append); their inputs refer to them,
// checked at commit.
func QueueStartTurns(b *pgx.Batch, owner string, now, until time.Time, starts []StartTurn, ann *Announcement) {
	if len(starts) == 0 {
		return
	}
	var sids, tokens []int64
	var turns []int32
	var fsid, fseq, fsize []int64
	var fidentity, fkey, fentry []string
	var fevent []uuid.UUID
	var fstarts []bool
	var fat []time.Time
	for _, s := range starts {
		sids, tokens, turns = append(sids, s.SID), append(tokens, s.Token), append(turns, int32(s.Turn))
		ann.Session(s.SID)
		for i, in := range s.Firings {
			fsid, fseq, fsize = append(fsid, s.SID), append(fseq, in.Seq), append(fsize, int64(in.ByteSize))
			fidentity, fkey, fentry = append(fidentity, in.Identity), append(fkey, in.OrderKey), append(fentry, s.Entries[i])
			fevent, fstarts, fat = append(fevent, *in.EventID), append(fstarts, in.StartsTurn), append(fat, s.Scheduled[i])
		}
	}
	if len(fsid) > 0 {
		b.Queue(`INSERT INTO session_inputs (sid, seq, identity, kind, event_id, starts_turn, status, byte_size, delivered_at, order_key, schedule, scheduled_at)
			SELECT u.sid, u.seq, u.identity, $1, u.event_id, u.starts, $2, u.size, $3, u.key, u.entry, u.at
			  FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::uuid[], $8::boolean[], $9::bigint[], $10::text[], $11::text[], $12::timestamptz[])
			       AS u (sid, seq, identity, event_id, starts, size, key, entry, at)`,
			KindSchedule, InputPending, now, fsid, fseq, fidentity, fevent, fstarts, fsize, fkey, fentry, fat)
	}
	b.Queue(`UPDATE sessions s SET turn_count = u.turn,
			input_count = s.input_count + (SELECT count(*) FROM unnest($4::bigint[]) AS f (sid) WHERE f.sid = s.sid),
			lease_owner = $5, lease_expires_at = $6, lease_token = u.token
		  FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS u (sid, token, turn)
		 WHERE s.sid = u.sid AND s.lease_token < u.token`, sids, tokens, turns, fsid, owner, until).Exec(wroteAll("the start of turns", len(sids)))
}

// QueueLease queues, for sessions a claim in this transaction took that
// start no new turn but stay leased (a turn taken over, T9, or a session
// whose version cannot be used, left until the lease expires), their
// lease: owner, until and the claim's token.
func QueueLease(b *pgx.Batch, owner string, until time.Time, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	sids, tokens := leaseArrays(leases)
	b.Queue(`UPDATE sessions s SET lease_owner = $3, lease_expires_at = $4, lease_token = u.token
		  FROM unnest($1::bigint[], $2::bigint[]) AS u (sid, token)
		 WHERE s.sid = u.sid AND s.lease_token < u.token`, sids, tokens, owner, until).Exec(wroteAll("the lease", len(sids)))
}

// QueueStandDown queues, for sessions a claim in this transaction took
// that have nothing to run, the end of their lease (the claim's token
// installed, fencing any earlier holder); a session stays runnable only if
// an input that starts a turn is pending after all.
func QueueStandDown(b *pgx.Batch, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	sids, tokens := leaseArrays(leases)
	b.Queue(`UPDATE sessions s SET lease_owner = NULL, lease_expires_at = NULL, lease_token = u.token,
			next_turn_at = CASE WHEN EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'PENDING' AND i.starts_turn)
				THEN s.next_turn_at END
		  FROM unnest($1::bigint[], $2::bigint[]) AS u (sid, token)
		 WHERE s.sid = u.sid AND s.lease_token < u.token`, sids, tokens).Exec(wroteAll("the stand-down", len(sids)))
}

// QueueHold queues, for sessions a claim in this transaction took whose
// trigger deliveries the debounce holds (G3), the end of their lease and
// their next turn at until, with a timer that wakes the executor then.
func QueueHold(b *pgx.Batch, leases []Lease, until []time.Time) {
	if len(leases) == 0 {
		return
	}
	sids, tokens := leaseArrays(leases)
	b.Queue(`UPDATE sessions s SET lease_owner = NULL, lease_expires_at = NULL, lease_token = u.token, next_turn_at = u.until
		  FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS u (sid, token, until)
		 WHERE s.sid = u.sid AND s.lease_token < u.token`, sids, tokens, until).Exec(wroteAll("the hold", len(sids)))
	b.Queue(`INSERT INTO session_timers (sid, due_at) SELECT * FROM unnest($1::bigint[], $2::timestamptz[])
		ON CONFLICT (sid) DO UPDATE SET due_at = least(session_timers.due_at, EXCLUDED.due_at)`, sids, until)
}

// QueueCompleteAtEnd queues, for sessions a claim in this transaction
// took whose end has come with nothing pending, their completion (E5):
// COMPLETED with reason ended and no turn; their timers go; ann gets the
// change to announce.
func QueueCompleteAtEnd(b *pgx.Batch, now time.Time, leases []Lease, ann *Announcement) {
	if len(leases) == 0 {
		return
	}
	sids, tokens := leaseArrays(leases)
	b.Queue(`UPDATE sessions s SET status = $3, reason = $4, closed_at = $5, updated_at = $5,
			next_turn_at = NULL, lease_owner = NULL, lease_expires_at = NULL, lease_token = u.token
		  FROM unnest($1::bigint[], $2::bigint[]) AS u (sid, token)
		 WHERE s.sid = u.sid AND s.lease_token < u.token`, sids, tokens, Completed, ReasonEnded, now).Exec(wroteAll("the completion at the end", len(sids)))
	queueDropTimers(b, sids)
	for _, sid := range sids {
		ann.Session(sid)
	}
}

func queueDropTimers(b *pgx.Batch, sids []int64) {
	if len(sids) > 0 {
		b.Queue(`DELETE FROM session_timers WHERE sid = ANY($1)`, sids)
	}
}

package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// How a turn settles its session (T6-T8, P1, P2, H1, H2): the executor
// first locks the sessions of the turns it commits and checks their leases
// (QueueFence), decides each outcome from what it read, and then queues the
// writes (QueueSettle) in the same transaction.

// FenceRead asks QueueFence about one settling turn's session.
type FenceRead struct {
	Lease
	// Listed are the approvals the turn waits on (P1, P2); for such a turn
	// QueueFence also reads their interrupts and whether an answer is
	// pending besides the turn's own Inputs (delivery sequences).
	Listed []uuid.UUID
	Inputs []int64
}

// Fenced is a settling turn's session as QueueFence found it, locked.
type Fenced struct {
	// Held: the lease is still the caller's (the token matches and the
	// lease was not ended: a turn settled already ended it, so a second
	// settle of the same turn, after a commit whose answer was lost, finds
	// it gone). A turn whose lease is gone commits nothing (HARD-PARTS 3).
	Held   bool
	Status Status
	// Clock is the session's start and end, as they are now (S3 may have
	// moved them while the turn ran).
	Clock Clock
	// Answered: a COMMAND input other than the turn's own is pending (an
	// answer that arrived while the turn ran). Read for turns with Listed.
	Answered bool
	// Listed maps each listed approval that exists to its session and
	// status; missing ones are new.
	Listed map[uuid.UUID]ListedInterrupt
	// InterruptTurn is the turn an interrupt asked to end, by
	// InterruptedBy (G9); nil when none did.
	InterruptTurn *int
	InterruptedBy *string
}

// Interrupted reports whether an interrupt asked to end turn (G9).
func (f *Fenced) Interrupted(turn int) bool {
	return f.InterruptTurn != nil && *f.InterruptTurn == turn
}

// ListedInterrupt is the state of an interrupt a turn listed.
type ListedInterrupt struct {
	SID    int64
	Status InterruptStatus
}

// LockWait is how QueueFence takes the row locks of the sessions it
// fences when another transaction holds some of them: WaitForLocks,
// SkipLocked, or WaitUpTo a bound.
type LockWait time.Duration

const (
	// WaitForLocks waits as long as it takes, like any writer of a row:
	// for a caller settling one turn.
	WaitForLocks LockWait = 0
	// SkipLocked leaves out the sessions another transaction holds (out
	// gets no entry for them); it never waits.
	SkipLocked LockWait = -1
)

// WaitUpTo waits up to d (rounded down to milliseconds, at least 1 ms),
// then fails the statement, and so the transaction, with SQLSTATE 55P03
// (IsLockTimeout). A caller settling many turns at once takes their
// sessions in sid order, as the dispatcher's deliveries do; the bound
// keeps it from sitting out PostgreSQL's deadlock timeout (1 s) behind a
// transaction that takes some of them in another order.
func WaitUpTo(d time.Duration) LockWait {
	return LockWait(max(d.Truncate(time.Millisecond), time.Millisecond))
}

// IsLockTimeout reports whether err is a statement that gave up waiting
// for a lock (SQLSTATE 55P03: lock_timeout, or NOWAIT).
func IsLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// leaseHeld is the SQL condition that session row s is still leased with
// token u.token (Fenced.Held).
const leaseHeld = `s.lease_token = u.token AND s.lease_owner IS NOT NULL`

// queueLockBound queues, when wait bounds it (WaitUpTo), the limit on the
// row-lock waits of the statements queued next, and returns the func that
// queues its end: the bound is the fence's alone, the writes after it take
// no session lock they do not hold already.
func queueLockBound(b *pgx.Batch, wait LockWait) (end func()) {
	if wait <= 0 {
		return func() {}
	}
	b.Queue(fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, time.Duration(wait).Milliseconds()))
	return func() { b.Queue(`SET LOCAL lock_timeout TO DEFAULT`) }
}

// FenceCheck is what QueueFenceCheck holds a settling turn's session to:
// the claim's lease and the session's fields that decide an outcome
// (Fenced), as the claim read them.
type FenceCheck struct {
	Lease
	Status        Status
	StartedAt     time.Time
	EndsAt        *time.Time
	InterruptTurn *int
}

// Fenced is the view of the session that QueueFence would read if nothing
// changed since the claim, which QueueFenceCheck verifies.
func (c FenceCheck) Fenced() *Fenced {
	return &Fenced{Held: true, Status: c.Status, Clock: Clock{StartedAt: c.StartedAt, EndsAt: c.EndsAt}, InterruptTurn: c.InterruptTurn}
}

// QueueFenceCheck queues the lock of the sessions of settling turns, in
// sid order, and fails the transaction (IsSessionChanged) when any of them
// is not as its check says: lease taken over, status, start, end or
// interrupt moved. The caller then settles the turns the usual way
// (QueueFence first). It stands for QueueFence when the outcomes were
// decided from the claims' reads (check.Fenced) and no turn lists
// approvals or keeps a clock (those read more at the fence). wait is as
// QueueFence's, but SkipLocked is not allowed: every session must be
// locked, or the transaction fails (IsLockTimeout).
func QueueFenceCheck(b *pgx.Batch, checks []FenceCheck, wait LockWait) {
	n := len(checks)
	sids, tokens, statuses := make([]int64, n), make([]int64, n), make([]string, n)
	starts, ends, interrupts := make([]time.Time, n), make([]*time.Time, n), make([]*int32, n)
	for i, c := range checks {
		sids[i], tokens[i], statuses[i], starts[i], ends[i] = c.SID, c.Token, string(c.Status), c.StartedAt, c.EndsAt
		if c.InterruptTurn != nil {
			t := int32(*c.InterruptTurn)
			interrupts[i] = &t
		}
	}
	bounded := queueLockBound(b, wait)
	b.Queue(`WITH u AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int[])
			       AS u (sid, token, status, started_at, ends_at, interrupt_turn)),
		l AS (
			SELECT `+leaseHeld+` AND s.status = u.status AND s.started_at = u.started_at
			       AND s.ends_at IS NOT DISTINCT FROM u.ends_at AND s.interrupt_turn IS NOT DISTINCT FROM u.interrupt_turn AS same
			  FROM sessions s JOIN u ON s.sid = u.sid
			 ORDER BY s.sid FOR NO KEY UPDATE OF s)
		SELECT settle_check((SELECT count(*) FROM u) - (SELECT count(*) FROM l WHERE l.same))`,
		sids, tokens, statuses, starts, ends, interrupts)
	bounded()
}

// IsSessionChanged reports whether err is QueueFenceCheck's: a session
// changed since its turn was claimed (SQLSTATE AL001).
func IsSessionChanged(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "AL001"
}

// QueueFence queues the lock of the sessions of settling turns, in sid
// order, and the reads that decide their outcomes; out gets an entry for
// each session locked. wait says what it does when another transaction
// holds one of the rows (LockWait).
func QueueFence(b *pgx.Batch, reads []FenceRead, wait LockWait, out map[int64]*Fenced) {
	sids, tokens := make([]int64, len(reads)), make([]int64, len(reads))
	var listedSIDs, listedSeqSIDs, listedSeqs []int64
	var listed []uuid.UUID
	for i, r := range reads {
		sids[i], tokens[i] = r.SID, r.Token
		if len(r.Listed) > 0 {
			listedSIDs = append(listedSIDs, r.SID)
			listed = append(listed, r.Listed...)
			for _, seq := range r.Inputs {
				listedSeqSIDs, listedSeqs = append(listedSeqSIDs, r.SID), append(listedSeqs, seq)
			}
		}
	}
	// The lock an UPDATE of the row takes: it does not conflict with the
	// key-share locks of inserts that refer to the session.
	lock := `FOR NO KEY UPDATE OF s`
	if wait == SkipLocked {
		lock += ` SKIP LOCKED`
	}
	bounded := queueLockBound(b, wait)
	b.Queue(`SELECT s.sid, `+leaseHeld+`, s.status, s.started_at, s.ends_at, s.interrupt_turn, s.interrupted_by
		  FROM sessions s JOIN unnest($1::bigint[], $2::bigint[]) AS u (sid, token) ON s.sid = u.sid
		 ORDER BY s.sid `+lock, sids, tokens).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var sid int64
			f := &Fenced{}
			if err := rows.Scan(&sid, &f.Held, &f.Status, &f.Clock.StartedAt, &f.Clock.EndsAt, &f.InterruptTurn, &f.InterruptedBy); err != nil {
				return err
			}
			f.Clock.StartedAt, f.Clock.EndsAt = f.Clock.StartedAt.UTC(), utcPtr(f.Clock.EndsAt)
			out[sid] = f
		}
		return rows.Err()
	})
	bounded()
	if len(listedSIDs) == 0 {
		return
	}
	// Read after the lock: an answer or a delivery committed before it is
	// seen, and one not yet committed waits for this transaction.
	b.Queue(`SELECT u.sid, EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = u.sid AND i.status = 'PENDING' AND i.kind = $4
			AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::bigint[]) AS t (sid, seq) WHERE t.sid = i.sid AND t.seq = i.seq))
		  FROM unnest($1::bigint[]) AS u (sid)`, listedSIDs, listedSeqSIDs, listedSeqs, KindCommand).Query(func(rows pgx.Rows) error {
		var sid int64
		var answered bool
		_, err := pgx.ForEachRow(rows, []any{&sid, &answered}, func() error {
			if f := out[sid]; f != nil {
				f.Answered = answered
			}
			return nil
		})
		return err
	})
	b.Queue(`SELECT id, sid, status FROM session_interrupts WHERE id = ANY($1)`, listed).Query(func(rows pgx.Rows) error {
		var id uuid.UUID
		var li ListedInterrupt
		byID := map[uuid.UUID]ListedInterrupt{}
		if _, err := pgx.ForEachRow(rows, []any{&id, &li.SID, &li.Status}, func() error { byID[id] = li; return nil }); err != nil {
			return err
		}
		for _, r := range reads {
			f := out[r.SID]
			if f == nil || len(r.Listed) == 0 {
				continue
			}
			f.Listed = map[uuid.UUID]ListedInterrupt{}
			for _, id := range r.Listed {
				if li, ok := byID[id]; ok {
					f.Listed[id] = li
				}
			}
		}
		return nil
	})
}

// Settlement is how a turn leaves its session, written by QueueSettle.
// Exactly one of the outcome fields (Committed, Held, Failed) is set, or
// none when the session was closed while the turn ran (the turn is then
// cancelled: the lease ends and nothing else changes).
type Settlement struct {
	Lease
	Turn int
	// ExecutionID is the turn's execution: it answers the session's
	// REQUEST inputs when the turn finishes their work (I4).
	ExecutionID uuid.UUID
	// Inputs are the turn's inputs (delivery sequences): CONSUMED by a
	// committed turn (T6), RECEIVED by a held one (H2), left PENDING by a
	// failed one (T7).
	Inputs []int64

	Committed *Committed
	Held      *Held
	Failed    *Failure
	// TurnFailed: the turn failed but the session survives (G10), parked
	// when Park is set (G4).
	TurnFailed *TurnFailure
	// Usage is the model use of the turn's attempts (G8), added to the
	// session's spend however the turn settles.
	Usage Usage
}

// Committed is a committed turn's outcome (T5, T6, P1).
type Committed struct {
	State  jsonvalue.Value
	Status Status
	Reason *string
	// Resume is the continuation a turn that ends WAITING leaves (P1); nil otherwise.
	Resume jsonvalue.Value
	// AmbientStatus, when set, replaces the session's ambient status (G8).
	AmbientStatus *string
	// Due: the session needs another turn at once whatever is pending (its
	// end has come, E4, or a firing that starts turns is due, C4).
	Due bool
	// Raise are the approval requests the turn listed that are new (P1);
	// every other PENDING approval of the session but those in Listed is no
	// longer awaited and closes (P2).
	Raise  []Interrupt
	Listed []uuid.UUID
}

// Held is a held turn's outcome (H1, H2): the session waits on Hold.
type Held struct {
	Reason string
	Hold   Interrupt
}

// Failure is a failed turn's outcome (T7): the session fails with Reason
// and waits on nothing any more.
type Failure struct {
	Reason string
}

// SettleResult is what QueueSettle reports back, once the batch is read.
type SettleResult struct {
	// Runnable are the settled sessions that need another turn.
	Runnable []int64
	// Raised are the interrupts that were raised (new rows).
	Raised []uuid.UUID
	// Announcement is what the transaction announces once committed
	// (issue 12): every settled session, interrupts that changed, and the
	// executor's wake-up when a session needs another turn.
	Announcement
}

// QueueSettle queues the writes that settle turns' sessions, under the lock
// QueueFence took in the same transaction: interrupts raised and closed,
// inputs consumed or received, the sessions' state, status, reason and
// continuation, their next turn (another is due when the session is OPEN
// and an input that starts a turn is still pending, or Due), the end of
// the leases and timers of sessions that closed; res.Announcement gets the
// changes to announce once the transaction commits (issue 12). Every
// write is fenced by the lease token.
func QueueSettle(b *pgx.Batch, now time.Time, ss []Settlement, res *SettleResult) {
	if len(ss) == 0 {
		return
	}
	var (
		isid, iseq      []int64
		istatus         []InputStatus
		iturn           []int32
		failed, closing []int64
		committedSIDs   []int64
		listed          []uuid.UUID
		raise           []Interrupt
		n               = len(ss)
		sids, tokens    = make([]int64, n), make([]int64, n)
		setState        = make([]bool, n)
		states          = make([]*string, n)
		statuses        = make([]Status, n)
		setReason       = make([]bool, n)
		reasons         = make([]*string, n)
		setResume       = make([]bool, n)
		resumes         = make([]*string, n)
		touch, closes   = make([]bool, n), make([]bool, n)
		ambients        = make([]*string, n)
		due             = make([]bool, n)
		costs           = make([]float64, n)
		calls, ins      = make([]int64, n), make([]int64, n)
		outs            = make([]int64, n)
		notice          = &res.Notice
		// REQUEST inputs answered (I4): by sessions whose turn finished
		// (ansSIDs), and the failed turns' own (failSIDs, failSeqs).
		ansSIDs, failSIDs, failSeqs []int64
		ansExecs, failExecs         []uuid.UUID
		turnFailed                  []Settlement
	)
	for i, s := range ss {
		sids[i], tokens[i] = s.SID, s.Token
		costs[i], calls[i], ins[i], outs[i] = s.Usage.CostUSD, s.Usage.ModelCalls, s.Usage.InputTokens, s.Usage.OutputTokens
		notice.Session(s.SID)
		consume := func(st InputStatus) {
			for _, seq := range s.Inputs {
				isid, iseq, istatus, iturn = append(isid, s.SID), append(iseq, seq), append(istatus, st), append(iturn, int32(s.Turn))
			}
		}
		switch {
		case s.Committed != nil:
			c := s.Committed
			setState[i], states[i], statuses[i] = true, jsonText(c.State), c.Status
			setReason[i], reasons[i] = true, c.Reason
			setResume[i], resumes[i] = true, jsonText(c.Resume)
			ambients[i] = c.AmbientStatus
			touch[i], closes[i], due[i] = true, c.Status.Final(), c.Due
			consume(InputConsumed)
			committedSIDs = append(committedSIDs, s.SID)
			listed = append(listed, c.Listed...)
			raise = append(raise, c.Raise...)
			if c.Status.Final() {
				closing = append(closing, s.SID)
			}
			if c.Status != Waiting {
				ansSIDs, ansExecs = append(ansSIDs, s.SID), append(ansExecs, s.ExecutionID)
			}
		case s.Held != nil:
			statuses[i], setReason[i], reasons[i], touch[i] = Waiting, true, &s.Held.Reason, true
			consume(InputReceived)
			raise = append(raise, s.Held.Hold)
		case s.TurnFailed != nil:
			// G10: the inputs stay pending; the session waits for what wakes it.
			statuses[i], setReason[i], reasons[i], touch[i] = Waiting, true, &s.TurnFailed.Reason, true
			turnFailed = append(turnFailed, s)
		case s.Failed != nil:
			statuses[i], setReason[i], reasons[i], touch[i], closes[i] = Failed, true, &s.Failed.Reason, true, true
			failed, closing = append(failed, s.SID), append(closing, s.SID)
			ansSIDs, ansExecs = append(ansSIDs, s.SID), append(ansExecs, s.ExecutionID)
			for _, seq := range s.Inputs {
				failSIDs, failSeqs, failExecs = append(failSIDs, s.SID), append(failSeqs, seq), append(failExecs, s.ExecutionID)
			}
		default:
			// Closed while the turn ran: the lease ends, nothing else.
			statuses[i] = Cancelled
			closing = append(closing, s.SID)
		}
	}
	if len(raise) > 0 {
		queueRaise(b, now, raise, res)
		notice.Interrupts = true
	}
	if len(committedSIDs) > 0 {
		// P2: approvals the session waited on that its turn did not list
		// again are no longer awaited.
		if listed == nil {
			listed = []uuid.UUID{}
		}
		b.Queue(`UPDATE session_interrupts SET status = $3 WHERE sid = ANY($1) AND kind = $4 AND status = 'PENDING' AND NOT id = ANY($2)`,
			committedSIDs, listed, InterruptClosed, InterruptApproval).Exec(res.interruptsClosed)
	}
	if len(failed) > 0 {
		// A failed session waits on nothing any more.
		b.Queue(`UPDATE session_interrupts SET status = $2 WHERE sid = ANY($1) AND status = 'PENDING'`,
			failed, InterruptClosed).Exec(res.interruptsClosed)
	}
	if len(isid) > 0 {
		b.Queue(settleInputsSQL, isid, iseq, istatus, iturn)
	}
	queueAnswerRequests(b, now, ansSIDs, ansExecs, failSIDs, failSeqs, failExecs)
	// A session closed meanwhile keeps its status (statuses[i] is only
	// compared with OPEN for it), so the CASE keeps the row's own.
	b.Queue(`UPDATE sessions s SET
			state = CASE WHEN u.set_state THEN u.state::jsonb ELSE s.state END,
			status = CASE WHEN s.status IN ($15, $16, $17) THEN s.status ELSE u.status END,
			reason = CASE WHEN u.set_reason THEN u.reason ELSE s.reason END,
			resume = CASE WHEN u.set_resume THEN u.resume::json ELSE s.resume END,
			updated_at = CASE WHEN u.touch THEN $13::timestamptz ELSE s.updated_at END,
			closed_at = CASE WHEN u.closes THEN $13::timestamptz ELSE s.closed_at END,
			next_turn_at = CASE WHEN u.status = $14 AND (u.due OR EXISTS (
				SELECT 1 FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'PENDING' AND i.starts_turn)) THEN $13::timestamptz END,
			lease_owner = NULL, lease_expires_at = NULL, wait = NULL, wake_on = NULL, interrupt_turn = NULL, interrupted_by = NULL,
			ambient_status = coalesce(u.ambient, s.ambient_status),
			spent_usd = s.spent_usd + u.cost::numeric, model_calls = s.model_calls + u.calls,
			input_tokens = s.input_tokens + u.ins, output_tokens = s.output_tokens + u.outs
		  FROM unnest($1::bigint[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::boolean[],
		              $9::text[], $10::boolean[], $11::boolean[], $12::boolean[], $18::text[], $19::float8[], $20::bigint[],
		              $21::bigint[], $22::bigint[])
		       AS u (sid, token, set_state, state, status, set_reason, reason, set_resume, resume, touch, closes, due, ambient,
		             cost, calls, ins, outs)
		 WHERE s.sid = u.sid AND s.lease_token = u.token
		RETURNING s.sid, s.next_turn_at IS NOT NULL`,
		sids, tokens, setState, states, statuses, setReason, reasons, setResume, resumes, touch, closes, due,
		now, Open, Completed, Failed, Cancelled, ambients, costs, calls, ins, outs).Query(func(rows pgx.Rows) error {
		var sid int64
		var runnable bool
		_, err := pgx.ForEachRow(rows, []any{&sid, &runnable}, func() error {
			if runnable {
				res.Runnable = append(res.Runnable, sid)
				notice.Turns = true // wake the executors of other processes too
			}
			return nil
		})
		return err
	})
	queueTurnFailed(b, now, turnFailed)
	queueEndParks(b, now, closing)
	queueDropTimers(b, closing)
	res.QueueXID(b)
}

// interruptsClosed notes, once an update of interrupts is read, whether
// it changed any (the inbox hears of them).
func (res *SettleResult) interruptsClosed(tag pgconn.CommandTag) error {
	if tag.RowsAffected() > 0 {
		res.Interrupts = true
	}
	return nil
}

// settleInputsSQL sets the status and turn of inputs by (sid, seq), from
// arrays of sid, seq, status and turn.
const settleInputsSQL = `UPDATE session_inputs i SET status = u.status, turn = u.turn
	  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::int[]) AS u (sid, seq, status, turn)
	 WHERE i.sid = u.sid AND i.seq = u.seq`

// queueAnswerRequests queues the answers of REQUEST inputs (I4), after
// the turns' inputs are consumed: a turn that finished its work (committed
// without waiting for an approval, or failed) answers every request of its
// session that a turn took and none answered yet (taken by this turn, or
// by earlier ones that paused or were held and retried); a failed turn
// also answers the requests it took, which stay pending (T7). The answer
// is the turn's execution.
func queueAnswerRequests(b *pgx.Batch, now time.Time, sids []int64, execs []uuid.UUID, failSIDs, failSeqs []int64, failExecs []uuid.UUID) {
	if len(sids) > 0 {
		b.Queue(`UPDATE session_inputs i SET execution_id = u.exec, answered_at = $3
			  FROM unnest($1::bigint[], $2::uuid[]) AS u (sid, exec)
			 WHERE i.sid = u.sid AND i.kind = 'REQUEST' AND i.answered_at IS NULL AND i.status <> 'PENDING'`, sids, execs, now)
	}
	if len(failSIDs) > 0 {
		b.Queue(`UPDATE session_inputs i SET execution_id = u.exec, answered_at = $4
			  FROM unnest($1::bigint[], $2::bigint[], $3::uuid[]) AS u (sid, seq, exec)
			 WHERE i.sid = u.sid AND i.seq = u.seq AND i.kind = 'REQUEST' AND i.answered_at IS NULL`, failSIDs, failSeqs, failExecs, now)
	}
}

// queueRaise queues the insert of new interrupts (P1, H2); an id that
// exists already is left as it is.
func queueRaise(b *pgx.Batch, now time.Time, ins []Interrupt, res *SettleResult) {
	n := len(ins)
	var (
		ids, execs        = make([]uuid.UUID, n), make([]uuid.UUID, n)
		sids              = make([]int64, n)
		kinds             = make([]InterruptKind, n)
		turns             = make([]int32, n)
		toolIDs           = make([]*uuid.UUID, n)
		toolVersions      = make([]*int32, n)
		toolNames, callID = make([]*string, n), make([]*string, n)
		inputs            = make([]*string, n)
		causes            = make([]*HoldCause, n)
		cats              = make([]*string, n)
		explanations      = make([]*string, n)
	)
	for i, in := range ins {
		ids[i], execs[i], sids[i], kinds[i], turns[i] = in.ID, in.ExecutionID, in.SID, in.Kind, int32(in.Turn)
		toolIDs[i], toolNames[i], callID[i], inputs[i] = in.ToolActionID, in.ToolName, in.CallID, jsonText(in.Input)
		if in.ToolVersion != nil {
			v := int32(*in.ToolVersion)
			toolVersions[i] = &v
		}
		causes[i], cats[i], explanations[i] = in.Cause, in.Category, in.Explanation
	}
	b.Queue(`INSERT INTO session_interrupts (id, sid, kind, turn, execution_id, tool_action_id, tool_version, tool_name, call_id, input,
			cause, category, explanation, status, created_at)
		SELECT u.id, u.sid, u.kind, u.turn, u.exec, u.tool, u.version, u.name, u.call, u.input::jsonb, u.cause, u.category, u.explanation, $14, $15
		  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::int[], $5::uuid[], $6::uuid[], $7::int[], $8::text[], $9::text[], $10::text[],
		              $11::text[], $12::text[], $13::text[])
		       AS u (id, sid, kind, turn, exec, tool, version, name, call, input, cause, category, explanation)
		ON CONFLICT (id) DO NOTHING RETURNING id`,
		ids, sids, kinds, turns, execs, toolIDs, toolVersions, toolNames, callID, inputs, causes, cats, explanations,
		InterruptPending, now).Query(func(rows pgx.Rows) error {
		var id uuid.UUID
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error { res.Raised = append(res.Raised, id); return nil })
		return err
	})
}

// jsonText is a JSON value as a statement parameter: nil for none.
func jsonText(v jsonvalue.Value) *string {
	if len(v) == 0 {
		return nil
	}
	s := string(v)
	return &s
}

package turns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// finished is a turn whose run is over, with what it is to commit.
type finished struct {
	c          *claim
	transcript []Entry
	out        *Outcome
	runErr     error
	// usage is the model use of the turn's attempts (G8).
	usage Usage
	// w is the handler's transaction, when it began one: a successful
	// turn commits in it, with the handler's writes and tool calls (T6).
	w *ledger.Writer
}

// listsApprovals reports whether f's outcome lists approval requests
// (P1, P2): its settle reads their interrupts and pending answers.
func (f *finished) listsApprovals() bool {
	return f.runErr == nil && f.out != nil && len(f.out.Approvals) > 0
}

// clocked reports whether f's session keeps a clock (C3): its settle reads
// the firings taken.
func (f *finished) clocked() bool {
	cs := f.c.comp.Session
	return cs != nil && len(cs.Clock) > 0
}

// verdict is what settling did with a finished turn.
type verdict int

const (
	committed       verdict = iota // the outcome is committed
	leaseLost                      // the lease was taken over: nothing committed (HARD-PARTS 3)
	alone                          // not settled in this batch: settle it on its own
	interruptedInTx                // interrupted, but settled in the handler's transaction: roll it back and settle again (G9)
)

// errInterrupted is the run error of a turn an interrupt ended (G9).
var errInterrupted = errors.New("the turn was interrupted")

// sender sends a batch in a transaction and reads its results.
type sender interface {
	send(ctx context.Context, b *pgx.Batch) error
}

// txSender sends batches through a pgx.Tx (the handler's transaction),
// whose committer posts ann once it committed.
type txSender struct {
	tx  pgx.Tx
	ann *session.Announcement
}

func (s txSender) send(ctx context.Context, b *pgx.Batch) error {
	return s.tx.SendBatch(ctx, b).Close()
}

// settleOne commits one finished turn in its own transaction (T6): the
// handler's when it began one, else a new one. It waits for its session's
// row lock like any writer of one row. It reports whether the outcome
// committed; false (and no error) when the lease was lost.
func (e *Executor) settleOne(ctx context.Context, f *finished) (bool, error) {
	if f.w == nil || f.runErr != nil {
		if f.w != nil {
			f.w.Rollback(ctx)
		}
		v, err := e.settleInTx(ctx, []*finished{f}, session.WaitForLocks)
		if err != nil || v[0] != committed {
			return false, err
		}
		return true, nil
	}
	tx, err := f.w.Tx(ctx)
	if err != nil {
		return false, err
	}
	var ann session.Announcement
	v, err := e.settle(ctx, txSender{tx, &ann}, []*finished{f}, session.WaitForLocks)
	if err == nil && v[0] == interruptedInTx {
		// G9: interrupted while it ran: its writes do not commit.
		f.w.Rollback(ctx)
		f.w, f.runErr = nil, errInterrupted
		return e.settleOne(ctx, f)
	}
	if err != nil || v[0] != committed {
		f.w.Rollback(ctx)
		return false, err
	}
	if err := f.w.Commit(ctx); err != nil {
		return true, err
	}
	ann.Post(e.Notifier)
	return true, nil
}

// settle commits finished turns in the transaction behind s (T6, T7, H1,
// H2, P1, P2), in two round trips however many: the first locks their
// sessions and checks each lease (a turn whose lease was taken over
// commits nothing, HARD-PARTS 3) and reads what decides the outcomes, the
// second writes them all; a *pipeTx commits with it, other callers commit
// after. wait is how the sessions' locks are taken (session.LockWait);
// with session.SkipLocked, turns whose session another transaction holds
// are left alone (their verdict is alone). It returns a verdict per turn.
func (e *Executor) settle(ctx context.Context, s sender, fs []*finished, wait session.LockWait) ([]verdict, error) {
	verdicts := make([]verdict, len(fs))
	reads := make([]session.FenceRead, len(fs))
	var clocked []int64
	for i, f := range fs {
		reads[i] = session.FenceRead{Lease: f.c.lease}
		if f.listsApprovals() {
			reads[i].Listed, reads[i].Inputs = approvalIDs(f.out.Approvals), seqsOf(f.c.inputs)
		}
		if f.clocked() {
			clocked = append(clocked, f.c.sess.SID)
		}
	}
	fenced := map[int64]*session.Fenced{}
	taken := map[int64]map[string]time.Time{}
	b := &pgx.Batch{}
	session.QueueFence(b, reads, wait, fenced)
	session.QueueTakenFirings(b, clocked, taken)
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("commit: lock: %w", err)
	}
	now := e.clock.Now()
	var settlements []session.Settlement
	var writes turnWrites
	var settled []*finished
	for i, f := range fs {
		fc := fenced[f.c.sess.SID]
		switch {
		case fc == nil:
			verdicts[i] = alone
			continue
		case !fc.Held:
			verdicts[i] = leaseLost
			e.log.Warn("lease taken over; turn not committed", "session", f.c.sess.ID, "turn", f.c.turn)
			continue
		case f.w != nil && fc.Interrupted(f.c.turn):
			// G9: settled in the handler's own transaction, its writes
			// would commit with it: the caller rolls them back first.
			verdicts[i] = interruptedInTx
			continue
		}
		fc.Clock.Taken = taken[f.c.sess.SID]
		settlements = append(settlements, e.decide(f, fc, now, &writes))
		settled = append(settled, f)
	}
	if len(settled) == 0 {
		if p, ok := s.(*pipeTx); ok {
			return verdicts, p.commit(ctx, nil)
		}
		return verdicts, nil
	}
	var res session.SettleResult
	b = &pgx.Batch{}
	writes.queue(b, now)
	session.QueueSettle(b, now, settlements, &res)
	var err error
	if p, ok := s.(*pipeTx); ok {
		if err = p.commit(ctx, b); err == nil {
			res.Post(e.Notifier)
		}
	} else {
		err = s.send(ctx, b)
		if ts, ok := s.(txSender); ok {
			*ts.ann = res.Announcement // posted by its committer
		}
	}
	if err != nil {
		for _, f := range settled {
			f.c.outcome = ""
		}
		return nil, fmt.Errorf("commit: %w", err)
	}
	e.committed(settled, &res)
	return verdicts, nil
}

// committed is what follows the commit of settled turns: each keeps as
// raised only the interrupts the commit raised (one listed again is not
// new), and the claim loop is woken when a session is runnable again.
func (e *Executor) committed(settled []*finished, res *session.SettleResult) {
	raisedIDs := map[uuid.UUID]bool{}
	for _, id := range res.Raised {
		raisedIDs[id] = true
	}
	for _, f := range settled {
		kept := f.c.raised[:0]
		for _, r := range f.c.raised {
			if raisedIDs[r.id] {
				kept = append(kept, r)
			}
		}
		f.c.raised = kept
	}
	if len(res.Runnable) > 0 {
		nudge(e.kick)
	}
}

// decide works out how f settles now that its session fc is locked and
// its lease is held: the session's settlement, and the turn's, its
// execution's and its transcript's writes, collected in w.
func (e *Executor) decide(f *finished, fc *session.Fenced, now time.Time, w *turnWrites) session.Settlement {
	c := f.c
	c.raised = nil
	st := session.Settlement{Lease: c.lease, Turn: c.turn, ExecutionID: c.execID, Inputs: seqsOf(c.inputs), Usage: f.usage}
	w.transcript(c.execID, f.transcript)
	w.usage(c.execID, f.usage)
	runErr := f.runErr
	if !fc.Status.Final() && fc.Interrupted(c.turn) {
		// G9: an interrupt ended the turn: nothing it did commits, its
		// inputs stay pending in their order, and the session waits for
		// the next input (or a resume), as after a turn-scoped failure.
		by := "an operator"
		if fc.InterruptedBy != nil {
			by = *fc.InterruptedBy
		}
		reason := storable(fmt.Sprintf("turn %d was interrupted by %s; the session waits for the next input", c.turn, by))
		st.TurnFailed = &session.TurnFailure{Reason: reason}
		w.turn(c, TurnCancelled, &checkpoint{state: c.sess.State, status: session.Waiting, reason: &reason})
		w.exec(c, ExecCancelled, nil, "interrupted by "+by, nil)
		return st
	}
	if runErr == nil && f.out != nil && f.out.Status == "FAILED" && f.out.Scope == ScopeTurn {
		runErr = TurnScoped(errors.New(f.out.Reason)) // G10: the outcome fails the turn only
	}
	if runErr == nil && !fc.Status.Final() {
		cm, err := e.decideCommitted(f, fc, now, w)
		if err == nil {
			st.Committed = cm
			return st
		}
		c.raised = nil
		runErr = Permanent(err) // the outcome cannot stand: the turn fails (T5)
	}
	switch h := AsHold(runErr); {
	case fc.Status.Final():
		// Closed while the turn ran (T8): the turn is cancelled; the
		// session keeps its status and its lease ends.
		w.turn(c, TurnCancelled, nil)
		w.exec(c, ExecCancelled, nil, cancelledWhileRunning, nil)
	case h != nil:
		// H1, H2: nothing the run did commits; the turn waits on a hold.
		id := InterruptIDFor(c.execID, "hold")
		code := h.Code()
		reason := fmt.Sprintf("turn %d is held (%s): answer its hold with respondToSession", c.turn, code)
		cause := h.Cause
		st.Held = &session.Held{Reason: reason, Hold: session.Interrupt{ID: id, SID: c.sess.SID, Kind: session.InterruptHold,
			Turn: c.turn, ExecutionID: c.execID, Cause: &cause, Category: nonEmpty(storable(h.Category)), Explanation: nonEmpty(storable(h.Explanation))}}
		c.raised = append(c.raised, raised{id: id, kind: session.InterruptHold, what: string(cause)})
		w.turn(c, TurnHeld, &checkpoint{state: c.sess.State, status: session.Waiting, reason: &reason})
		w.exec(c, ExecHeld, nil, storable(string(code)+": "+h.Message), &id)
	case IsTurnScoped(runErr) || e.parks(c, runErr):
		// G10, G4: the turn fails, the session survives WAITING with its
		// inputs pending; a park bounds how long it waits.
		reason := storable(fmt.Sprintf("turn %d failed: %v", c.turn, runErr))
		tf := &session.TurnFailure{Reason: reason}
		if !IsTurnScoped(runErr) {
			p := c.comp.Session.Park
			reason = storable(fmt.Sprintf("turn %d failed (%s) and the session is parked until %s: %v", c.turn, ErrorCode(runErr),
				now.Add(p.TTL).UTC().Format(time.RFC3339), runErr))
			tf.Reason = reason
			park := &session.Park{ID: InterruptIDFor(c.execID, "park"), SID: c.sess.SID, Turn: c.turn, ExecutionID: c.execID,
				Cause: ErrorCode(runErr), Reason: storable(runErr.Error()), ParkedAt: now, ExpiresAt: now.Add(p.TTL), ResumeOn: p.ResumeOn}
			if p.ResumeAfter > 0 {
				at := now.Add(p.ResumeAfter)
				park.ResumeAt = &at
			}
			tf.Park = park
		}
		st.TurnFailed = tf
		w.turn(c, TurnFailed, &checkpoint{state: c.sess.State, status: session.Waiting, reason: &reason})
		w.exec(c, ExecFailed, nil, storable(runErr.Error()), nil)
	default:
		// T7: the turn and the session fail; the inputs stay pending.
		reason := storable(fmt.Sprintf("execution %s failed: %v", c.execID, runErr))
		st.Failed = &session.Failure{Reason: reason}
		w.turn(c, TurnFailed, &checkpoint{state: c.sess.State, status: session.Failed, reason: &reason})
		w.exec(c, ExecFailed, nil, storable(runErr.Error()), nil)
	}
	return st
}

// ambient cleans a reported ambient status (G8): one line, at most
// MaxAmbientStatus characters.
func ambient(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")), " ")
	if r := []rune(s); len(r) > MaxAmbientStatus {
		s = string(r[:MaxAmbientStatus-1]) + "…"
	}
	return s
}

// parks reports whether a turn whose run ended with runErr parks its
// session (G4): the session has a park block and the run's retries ran
// out on a transient cause (a timeout or an error not marked Permanent).
func (e *Executor) parks(c *claim, runErr error) bool {
	if c.comp.Session == nil || c.comp.Session.Park == nil || runErr == nil || IsPermanent(runErr) {
		return false
	}
	code := ErrorCode(runErr)
	return code == CodeTimeout || code == CodeTransient
}

// decideCommitted works out a successful turn's commit (T5, T6, P1, P2,
// E4, C4). An error means the outcome cannot be committed as it stands.
func (e *Executor) decideCommitted(f *finished, fc *session.Fenced, now time.Time, w *turnWrites) (*session.Committed, error) {
	c, out := f.c, f.out
	status := session.Status(out.Status)
	var reason *string
	if out.Reason != "" {
		reason = &out.Reason
	} else if status == session.Waiting {
		r := waitingReason(len(out.Approvals))
		reason = &r
	}
	cm := &session.Committed{State: out.State, Status: status, Reason: reason}
	if a := ambient(out.AmbientStatus); a != "" {
		cm.AmbientStatus = &a
	}
	if len(out.Approvals) > 0 {
		// P1, P2: the requests the session now waits on. New ones are
		// raised; one listed again keeps its row: still PENDING, or
		// ANSWERED while this turn ran (its answer is a pending COMMAND
		// input the next turn takes).
		waits := 0
		for _, a := range out.Approvals {
			cm.Listed = append(cm.Listed, a.InterruptID)
			li, ok := fc.Listed[a.InterruptID]
			switch {
			case !ok:
				v := a.ToolVersion
				name, call := a.ToolName, a.CallID
				tool := a.ToolActionID
				cm.Raise = append(cm.Raise, session.Interrupt{ID: a.InterruptID, SID: c.sess.SID, Kind: session.InterruptApproval,
					Turn: c.turn, ExecutionID: a.ExecutionID, ToolActionID: &tool, ToolVersion: &v, ToolName: &name, CallID: &call, Input: a.Input})
				c.raised = append(c.raised, raised{id: a.InterruptID, kind: session.InterruptApproval, what: a.ToolName})
				waits++
			case li.SID != c.sess.SID:
				return nil, fmt.Errorf("%s: approval %s is not a request of this session", FailOutputInvalid, a.InterruptID)
			case li.Status == session.InterruptPending:
				waits++
			}
		}
		switch {
		case fc.Answered:
			// An answer that arrived while the turn ran is pending: the
			// session goes on to it.
			cm.Status, cm.Reason = session.Open, nil
		case waits == 0:
			// Waiting on nothing would leave the session WAITING for good.
			return nil, fmt.Errorf("%s: the turn reports WAITING, but no request it lists is still waiting for an answer", FailOutputInvalid)
		}
	}
	if status == session.Waiting {
		cm.Resume = out.Resume
		if len(cm.Resume) == 0 {
			cm.Resume = jsonvalue.Value("{}")
		}
	}
	due, err := e.dueAfterTurn(c, fc.Clock, now)
	if err != nil {
		return nil, err
	}
	cm.Due = due
	w.turn(c, TurnCompleted, &checkpoint{state: out.State, status: status, reason: reason})
	w.exec(c, ExecSucceeded, out.Output, "", nil)
	if len(out.Approvals) > 0 {
		w.approvals = append(w.approvals, approvalsOf{c.execID, cm.Listed})
	}
	return cm, nil
}

// dueAfterTurn reports whether the session needs another turn at once
// for reasons that are not pending inputs: its end has come (a turn
// running when the end passed finishes as ordinary, then the end applies,
// E4), or a firing of an entry that starts turns came due while the turn
// ran (C4). clk holds the session's clock as the commit read it.
func (e *Executor) dueAfterTurn(c *claim, clk session.Clock, now time.Time) (bool, error) {
	if clk.Ended(now) {
		return true, nil
	}
	cs := c.comp.Session
	if cs == nil || len(cs.Clock) == 0 {
		return false, nil
	}
	for _, f := range clk.Due(cs, now) {
		if f.StartsTurn {
			return true, nil
		}
	}
	return false, nil
}

// checkpoint is what a turn records of the session it left (T9).
type checkpoint struct {
	state  jsonvalue.Value
	status session.Status
	reason *string
}

type approvalsOf struct {
	exec uuid.UUID
	ids  []uuid.UUID
}

// turnWrites collects the turns', executions' and transcripts' writes of
// the turns one transaction settles.
type turnWrites struct {
	tExec         []uuid.UUID
	tSeq          []int32
	tKind         []string
	tData         []string
	tAt           []time.Time
	sids          []int64
	numbers       []int32
	turnStatus    []TurnStatus
	hasCP         []bool
	cpState       []*string
	cpStatus      []*session.Status
	cpReason      []*string
	execIDs       []uuid.UUID
	execStatus    []ExecStatus
	outputs, errs []*string
	holds         []*uuid.UUID
	approvals     []approvalsOf
	// executions' model use (G8), for those that made model calls
	uExec                    []uuid.UUID
	uCalls, uIn, uOut, uUnpr []int64
	uCost                    []float64
}

// usage records an execution's model use, when it has any (G8).
func (w *turnWrites) usage(exec uuid.UUID, u Usage) {
	if u.Zero() {
		return
	}
	w.uExec, w.uCalls, w.uIn, w.uOut = append(w.uExec, exec), append(w.uCalls, u.ModelCalls), append(w.uIn, u.InputTokens), append(w.uOut, u.OutputTokens)
	w.uUnpr, w.uCost = append(w.uUnpr, u.Unpriced), append(w.uCost, u.CostUSD)
}

func (w *turnWrites) transcript(exec uuid.UUID, entries []Entry) {
	for _, en := range entries {
		w.tExec, w.tSeq, w.tKind = append(w.tExec, exec), append(w.tSeq, int32(en.Seq)), append(w.tKind, en.Kind)
		w.tData, w.tAt = append(w.tData, string(en.Data)), append(w.tAt, en.At)
	}
}

func (w *turnWrites) turn(c *claim, status TurnStatus, cp *checkpoint) {
	w.sids, w.numbers, w.turnStatus = append(w.sids, c.sess.SID), append(w.numbers, int32(c.turn)), append(w.turnStatus, status)
	if cp == nil {
		w.hasCP, w.cpState, w.cpStatus, w.cpReason = append(w.hasCP, false), append(w.cpState, nil), append(w.cpStatus, nil), append(w.cpReason, nil)
		return
	}
	st := cp.status
	w.hasCP, w.cpState, w.cpStatus, w.cpReason = append(w.hasCP, true), append(w.cpState, jsonText(cp.state)), append(w.cpStatus, &st), append(w.cpReason, cp.reason)
}

func (w *turnWrites) exec(c *claim, status ExecStatus, output jsonvalue.Value, errText string, hold *uuid.UUID) {
	c.outcome = status
	w.execIDs, w.execStatus, w.outputs = append(w.execIDs, c.execID), append(w.execStatus, status), append(w.outputs, jsonText(output))
	w.errs, w.holds = append(w.errs, nonEmpty(errText)), append(w.holds, hold)
}

// queue queues the writes: transcripts first (their executions exist),
// then turns and executions.
func (w *turnWrites) queue(b *pgx.Batch, now time.Time) {
	if len(w.tExec) > 0 {
		b.Queue(`INSERT INTO transcript_entries (execution_id, seq, kind, data, at)
			SELECT u.exec, u.seq, u.kind, u.data::jsonb, u.at
			  FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::timestamptz[]) AS u (exec, seq, kind, data, at)`,
			w.tExec, w.tSeq, w.tKind, w.tData, w.tAt)
	}
	if len(w.sids) > 0 {
		b.Queue(`UPDATE session_turns t SET status = u.status, finished_at = $8,
				checkpoint_state = CASE WHEN u.cp THEN u.state::jsonb ELSE t.checkpoint_state END,
				checkpoint_status = CASE WHEN u.cp THEN u.cstatus ELSE t.checkpoint_status END,
				checkpoint_reason = CASE WHEN u.cp THEN u.creason ELSE t.checkpoint_reason END
			  FROM unnest($1::bigint[], $2::int[], $3::text[], $4::boolean[], $5::text[], $6::text[], $7::text[])
			       AS u (sid, number, status, cp, state, cstatus, creason)
			 WHERE t.sid = u.sid AND t.number = u.number`,
			w.sids, w.numbers, w.turnStatus, w.hasCP, w.cpState, w.cpStatus, w.cpReason, now)
	}
	if len(w.execIDs) > 0 {
		b.Queue(`UPDATE executions x SET status = u.status, output = u.output::jsonb, error = u.error, finished_at = $6, hold_id = u.hold
			  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[]) AS u (id, status, output, error, hold)
			 WHERE x.id = u.id`, w.execIDs, w.execStatus, w.outputs, w.errs, w.holds, now)
	}
	for _, a := range w.approvals {
		b.Queue(`UPDATE executions SET approvals = $2 WHERE id = $1`, a.exec, a.ids)
	}
	if len(w.uExec) > 0 {
		// Added: a turn's execution settles once per claim, and a held turn
		// retried runs under the same execution again.
		b.Queue(`UPDATE executions x SET model_calls = x.model_calls + u.calls, input_tokens = x.input_tokens + u.ins,
				output_tokens = x.output_tokens + u.outs, unpriced_calls = x.unpriced_calls + u.unpriced,
				cost_usd = x.cost_usd + u.cost::numeric
			  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::float8[])
			       AS u (id, calls, ins, outs, unpriced, cost)
			 WHERE x.id = u.id`, w.uExec, w.uCalls, w.uIn, w.uOut, w.uUnpr, w.uCost)
	}
}

// completer commits the outcomes of turns that began no transaction of
// their own (no ledger write, no tool call; held and failed turns) in
// batches: one transaction and two round trips for whatever finished
// while the previous batch was being committed (group commit; river's
// completer batches the same way). The first turn to finish after a quiet
// spell is committed at once.
type completer struct {
	e     *Executor
	mu    sync.Mutex
	queue []*completion
	wake  chan struct{}
}

// completion is a finished turn waiting for the completer, and where its
// verdict goes.
type completion struct {
	f    *finished
	done chan completed
}

type completed struct {
	v   verdict
	err error
}

// maxCompleterBatch bounds the turns one completer transaction commits.
const maxCompleterBatch = 256

func newCompleter(e *Executor) *completer {
	return &completer{e: e, wake: make(chan struct{}, 1)}
}

// submit hands f to the completer and waits for its verdict.
func (cp *completer) submit(ctx context.Context, f *finished) (verdict, error) {
	req := &completion{f: f, done: make(chan completed, 1)}
	cp.mu.Lock()
	cp.queue = append(cp.queue, req)
	cp.mu.Unlock()
	nudge(cp.wake)
	select {
	case r := <-req.done:
		return r.v, r.err
	case <-ctx.Done():
		return alone, ctx.Err()
	}
}

// run commits batches until ctx ends.
func (cp *completer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			cp.fail(ctx.Err())
			return
		case <-cp.wake:
		}
		for {
			cp.mu.Lock()
			n := min(len(cp.queue), maxCompleterBatch)
			batch := cp.queue[:n:n]
			cp.queue = cp.queue[n:]
			cp.mu.Unlock()
			if n == 0 {
				break
			}
			cp.commit(ctx, batch)
		}
	}
}

// commit settles a batch and hands each turn its verdict. A batch that
// fails as a whole sends every turn to be settled alone, so that one bad
// outcome does not hold up the others.
func (cp *completer) commit(ctx context.Context, batch []*completion) {
	fs := make([]*finished, len(batch))
	for i, r := range batch {
		fs[i] = r.f
	}
	vs, err := cp.batch(ctx, fs)
	for i, r := range batch {
		if err != nil {
			r.done <- completed{v: alone}
			continue
		}
		r.done <- completed{v: vs[i]}
	}
	if err != nil && ctx.Err() == nil {
		cp.e.log.Warn("turn batch not committed; its turns are committed one by one", "turns", len(batch), "err", err)
	}
}

// batch settles fs in one transaction that waits up to
// Config.SettleLockWait for their sessions' locks; when the wait runs
// out, it tries once more in a new transaction that leaves the sessions
// still held out (their turns are then settled alone).
func (cp *completer) batch(ctx context.Context, fs []*finished) ([]verdict, error) {
	vs, err := cp.e.settleAtOnce(ctx, fs)
	switch {
	case err == nil && vs != nil:
		return vs, nil
	case session.IsLockTimeout(err):
		// It waited SettleLockWait already.
		cp.e.log.Debug("turn batch waited too long for its sessions; settling it without waiting", "turns", len(fs))
		return cp.e.settleInTx(ctx, fs, session.SkipLocked)
	}
	vs, err = cp.e.settleInTx(ctx, fs, session.WaitUpTo(cp.e.cfg.SettleLockWait))
	if session.IsLockTimeout(err) {
		cp.e.log.Debug("turn batch waited too long for its sessions; settling it again without waiting", "turns", len(fs))
		return cp.e.settleInTx(ctx, fs, session.SkipLocked)
	}
	return vs, err
}

// settleAtOnce settles fs in one round trip (issue 14) when it can: their
// outcomes are decided from their sessions as their claims read them, and
// the statement that locks the sessions fails the transaction, before any
// write, if one of them changed since (session.QueueFenceCheck). The
// settle the usual way (settle) holds the sessions' locks from its fence
// until its commit, across the round trip and the service's work between;
// this one only for the round trip that writes. It returns a verdict per
// turn (all committed), or none when it does not apply (a turn lists
// approvals, keeps a clock or has an interrupt recorded: those decide on
// more than the claim read) or did not commit (a session changed, or any
// other failure; err is the failure): the caller then settles fs the
// usual way, which decides again from the sessions as they are, skipping
// the sessions still locked when err IsLockTimeout (it waited
// SettleLockWait).
func (e *Executor) settleAtOnce(ctx context.Context, fs []*finished) ([]verdict, error) {
	now := e.clock.Now()
	checks := make([]session.FenceCheck, len(fs))
	for i, f := range fs {
		if f.w != nil || f.listsApprovals() || f.clocked() {
			return nil, nil
		}
		s := f.c.sess
		if s.InterruptTurn != nil {
			return nil, nil // an interrupt is recorded: who asked is read at the fence (G9)
		}
		if s.EndsAt != nil && s.EndsAt.Before(now.Add(atOnceEndMargin)) {
			// E4, E5: whether the end has come is decided at the lock (a
			// timer may act on it meanwhile), so an end near enough for
			// the wait to reach it takes the usual way.
			return nil, nil
		}
		checks[i] = session.FenceCheck{Lease: f.c.lease, Status: s.Status, StartedAt: s.StartedAt, EndsAt: s.EndsAt, InterruptTurn: s.InterruptTurn}
	}
	settlements := make([]session.Settlement, len(fs))
	var writes turnWrites
	for i, f := range fs {
		settlements[i] = e.decide(f, checks[i].Fenced(), now, &writes)
	}
	p, err := newPipeTx(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	defer p.close(ctx)
	b := &pgx.Batch{}
	session.QueueFenceCheck(b, checks, session.WaitUpTo(e.cfg.SettleLockWait))
	var res session.SettleResult
	writes.queue(b, now)
	session.QueueSettle(b, now, settlements, &res)
	if err := p.commit(ctx, b); err != nil {
		for _, f := range fs {
			f.c.outcome = ""
		}
		if !session.IsSessionChanged(err) && !session.IsLockTimeout(err) && ctx.Err() == nil {
			e.log.Debug("turn batch not settled in one round trip; settling it the usual way", "turns", len(fs), "err", err)
		}
		return nil, err
	}
	res.Post(e.Notifier)
	e.committed(fs, &res)
	vs := make([]verdict, len(fs))
	for i := range vs {
		vs[i] = committed
	}
	return vs, nil
}

// atOnceEndMargin: settleAtOnce leaves to the usual settle a session whose
// end comes within it, far more than the lock wait (SettleLockWait) and
// the round trip between its decision and its lock.
const atOnceEndMargin = time.Minute

// settleInTx settles fs (settle) in a transaction of its own, which
// commits with its writes.
func (e *Executor) settleInTx(ctx context.Context, fs []*finished, wait session.LockWait) ([]verdict, error) {
	p, err := newPipeTx(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	defer p.close(ctx)
	return e.settle(ctx, p, fs, wait)
}

// fail answers what is still queued when the completer stops.
func (cp *completer) fail(err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, r := range cp.queue {
		r.done <- completed{v: alone, err: err}
	}
	cp.queue = nil
}

func seqsOf(ins []session.Input) []int64 {
	out := make([]int64, len(ins))
	for i, in := range ins {
		out[i] = in.Seq
	}
	return out
}

func approvalIDs(as []Approval) []uuid.UUID {
	out := make([]uuid.UUID, len(as))
	for i, a := range as {
		out[i] = a.InterruptID
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

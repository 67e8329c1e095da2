package turns

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// claim is a leased session with the turn it is to run.
type claim struct {
	sess    *session.Session
	lease   session.Lease
	turn    int
	execID  uuid.UUID
	inputs  []session.Input
	attempt int // attempts counted so far, the current one included
	final   bool
	endsAt  *time.Time
	// events are the inputs' events, read with them (the handler's view).
	events map[uuid.UUID]ledger.Event
	// exhausted: a re-claimed turn whose attempts are spent (the workers
	// running it kept stopping); it fails without running again (T7).
	exhausted bool
	// resume: the continuation the turn starts from (P1, H3); retryOf: the
	// held turn it retries (H3), 0 for none.
	resume  jsonvalue.Value
	retryOf int
	// reclaimed: the turn was RUNNING when claimed (a worker that held it
	// stopped); lastErr: why an earlier run of it could not commit.
	reclaimed bool
	lastErr   string
	// comp is the session's version.
	comp *action.Compiled

	// What issue 12 reports of the turn: its span, when the claim began
	// (real time), how long the session had been runnable, the outcome
	// its record commits (the execution's status; empty until recorded)
	// and the interrupts it raised.
	span    trace.Span
	began   time.Time
	waited  time.Duration
	outcome ExecStatus
	raised  []raised
	// live holds the turn's live transcript entries back while it is
	// short (issue 14); set when its request is made.
	live *liveGate
	// status writes what the running turn reports as its ambient status (G8).
	status *liveStatus
}

// raised is an interrupt a turn raised, for the log once it commits.
type raised struct {
	id   uuid.UUID
	kind session.InterruptKind
	// what: the gated tool's name, or the hold's cause.
	what string
}

// running is a RUNNING turn a claim found: a worker that held the
// session's lease stopped before the turn committed (T7, T9).
type running struct {
	number   int
	execID   uuid.UUID
	final    bool
	endsAt   *time.Time
	resume   jsonvalue.Value
	retryOf  int
	attempts int
	lastErr  string
	inputs   []session.Input
}

// claim leases up to n runnable sessions and fixes their turns, in one
// transaction of two round trips whatever n (the first begins it, locks
// the sessions and reads what their turns are planned from, the last
// writes each one's lease and commits; a third reads the sessions whose
// action version was not compiled yet): for each session the RUNNING turn a dead
// worker left (with its inputs, final and endsAt, T9), or a new turn over
// the pending inputs and due firings (T2, T3, C4-C6), final when the
// session's end has come and it takes everything (E3, E4). A session whose
// end came with nothing pending completes instead (E5); one with nothing
// to run stands down.
//
// The claimed rows stay locked until the claim commits, so the reads see
// every input delivered before it, and a delivery that comes during the
// claim waits for it (and then finds the session runnable or not as the
// claim left it).
//
// It returns the turns to run and how many sessions it leased (those that
// stood down or completed included: as many as n means more may wait).
func (e *Executor) claim(ctx context.Context, n int) (_ []*claim, leased int, err error) {
	began := time.Now()
	p, err := newPipeTx(ctx, e.pool)
	if err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	defer p.close(ctx)
	now := e.clock.Now()
	// Every session the claim takes gets its one write from w (QueueClaim).
	w := claimWrites{owner: e.cfg.Owner, now: now, until: now.Add(e.cfg.Lease)}
	var claimed []session.Claimed
	events := map[uuid.UUID]ledger.Event{}
	pending := map[int64]*session.Pending{}
	taken := map[int64]map[string]time.Time{}
	runs := map[int64]*running{}
	b := &pgx.Batch{}
	session.QueueClaim(b, now, n, &claimed)
	// What the turns are planned from, read in the same round trip for the
	// sessions the claim locks (session.ClaimedSIDs): RUNNING turns a
	// dead worker left, and the pending inputs and taken firings of those
	// whose action version is compiled here already.
	queueRunning(b, runs, events)
	session.QueueClaimedPending(b, now, e.versionReads(), pending, taken, events)
	if err := p.send(ctx, b); err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	if len(claimed) == 0 {
		return nil, 0, p.commit(ctx, nil)
	}

	// A second round trip reads the sessions of versions compiled only now.
	var clocked []int64
	var reads []session.PendingRead
	comps := make(map[int64]*action.Compiled, len(claimed))
	for _, c := range claimed {
		comp, err := e.actions.Compiled(ctx, c.Session.ActionID, c.Session.Version)
		if err != nil || comp.Session == nil {
			// Left leased: the claim tries again when the lease expires,
			// and the other sessions are not held up meanwhile.
			e.log.Error("claim: session's version unusable; it waits for its lease to expire", "session", c.Session.ID, "err", err)
			w.kept = append(w.kept, c.Lease)
			continue
		}
		comps[c.SID] = comp
		if pending[c.SID] != nil {
			continue // read in the first round trip
		}
		cs := comp.Session
		clk := session.Clock{StartedAt: c.Session.StartedAt, EndsAt: c.Session.EndsAt}
		reads = append(reads, session.PendingRead{SID: c.SID, Limit: maxInputs(cs), Ended: clk.Ended(now)})
		if len(cs.Clock) > 0 {
			clocked = append(clocked, c.SID)
		}
	}
	if len(reads) > 0 {
		b = &pgx.Batch{}
		session.QueuePending(b, reads, pending, events)
		session.QueueTakenFirings(b, clocked, taken)
		if err := p.send(ctx, b); err != nil {
			return nil, 0, fmt.Errorf("claim: read: %w", err)
		}
	}

	// Plan each session's turn, then write them all: the last round trip.
	var out []*claim
	defer func() {
		if err != nil {
			for _, c := range out {
				observe.End(c.span, err)
			}
		}
	}()
	for _, cl := range claimed {
		comp := comps[cl.SID]
		if comp == nil {
			continue
		}
		c := &claim{sess: cl.Session, lease: cl.Lease, comp: comp, began: began, waited: now.Sub(cl.Runnable), events: events}
		if r := runs[cl.SID]; r != nil {
			e.reclaim(ctx, c, r, &w)
			out = append(out, c)
			continue
		}
		tk := plan(cl.Session, comp.Session, pending[cl.SID], taken[cl.SID], events, now)
		switch {
		case tk == nil:
			w.standDown = append(w.standDown, cl.Lease) // nothing starts a turn any more
			continue
		case tk.ended:
			w.ended = append(w.ended, cl.Lease) // E5: the end has come with nothing pending
			continue
		case !tk.notBefore.IsZero():
			w.held, w.heldUntil = append(w.held, cl.Lease), append(w.heldUntil, tk.notBefore) // G3: debounced
			continue
		}
		c.turn, c.execID, c.final, c.endsAt, c.attempt = cl.Session.TurnCount+1, ledger.NewID(), tk.final, cl.Session.EndsAt, 1
		c.inputs = w.start(c, cl.InputCount, tk.items)
		e.startTurn(ctx, c)
		out = append(out, c)
	}
	if err := e.resumes(ctx, p, out); err != nil {
		return nil, 0, err
	}
	b = &pgx.Batch{}
	if len(w.fired) == 0 && len(w.ended) == 0 {
		// A claim that appends no firing and ends no session commits
		// without waiting for its WAL to reach disk (as a dispatch batch
		// does): nothing is acknowledged on the strength of a claim, and
		// the turn's commit, which needs it, is synchronous and so makes
		// the WAL before it durable too. A PostgreSQL crash can lose only
		// the newest such claims, each whole; their sessions are claimed
		// again and their turns planned again from the inputs then
		// pending (a reclaimed turn's attempt is counted again), under a
		// token higher than the lost claim's (session.QueueClaim), so the
		// worker that ran the lost claim's turn cannot commit it. Handlers
		// may run twice, as after a worker's crash (T7). It keeps the turn
		// from waiting one disk flush before its handler runs (issue 14).
		b.Queue(asyncCommit)
	}
	w.queue(b, out)
	if len(w.fired) == 0 {
		if err := p.commit(ctx, b); err != nil {
			return nil, 0, fmt.Errorf("claim: %w", err)
		}
		w.ann.Post(e.Notifier)
		return out, len(claimed), nil
	}
	if err := p.send(ctx, b); err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	// Last: appending holds the ledger head until the transaction ends.
	appended, err := ledger.Append(ctx, p.tx, now, w.fired...)
	if err != nil {
		return nil, 0, fmt.Errorf("claim: firings: %w", err)
	}
	if err := p.commitTx(ctx); err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	w.ann.Post(e.Notifier)
	for _, ev := range appended {
		events[ev.ID] = ev
	}
	return out, len(claimed), nil
}

func maxInputs(cs *action.CompiledSession) int {
	if cs.MaxInputs > 0 {
		return cs.MaxInputs
	}
	return action.DefaultMaxInputs
}

// queueRunning queues, behind session.QueueClaim, the read of the RUNNING
// turns of the sessions the claim locks, with their executions and inputs.
func queueRunning(b *pgx.Batch, out map[int64]*running, events map[uuid.UUID]ledger.Event) {
	b.Queue(`SELECT t.sid, t.number, t.execution_id, t.final, t.ends_at, t.resume, coalesce(t.retry_of, 0), x.attempts, coalesce(x.error, '')
		  FROM session_turns t JOIN executions x ON x.id = t.execution_id
		 WHERE t.sid = ANY(` + session.ClaimedSIDs + `) AND t.status = 'RUNNING'`).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var sid int64
			r := &running{}
			if err := rows.Scan(&sid, &r.number, &r.execID, &r.final, &r.endsAt, &r.resume, &r.retryOf, &r.attempts, &r.lastErr); err != nil {
				return err
			}
			if r.endsAt != nil {
				t := r.endsAt.UTC()
				r.endsAt = &t
			}
			out[sid] = r
		}
		return rows.Err()
	})
	b.Queue(`SELECT ` + session.InputEventColumns + `
		  FROM session_turns t
		  JOIN turn_inputs ti ON ti.sid = t.sid AND ti.turn = t.number
		  JOIN session_inputs i ON i.sid = ti.sid AND i.seq = ti.seq
		  LEFT JOIN events e ON e.id = i.event_id
		 WHERE t.sid = ANY(` + session.ClaimedSIDs + `) AND t.status = 'RUNNING'
		 ORDER BY i.sid, i.order_key, i.seq`).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			in, ev, err := session.ScanInputEvent(rows)
			if err != nil {
				return err
			}
			if ev != nil {
				events[ev.ID] = *ev
			}
			if r := out[in.SID]; r != nil {
				r.inputs = append(r.inputs, in)
			}
		}
		return rows.Err()
	})
}

// reclaim takes over the RUNNING turn r that a worker left: the same
// number, execution, inputs, final and endsAt (T9), attempts continuing.
func (e *Executor) reclaim(ctx context.Context, c *claim, r *running, w *claimWrites) {
	c.turn, c.execID, c.final, c.endsAt, c.resume, c.retryOf = r.number, r.execID, r.final, r.endsAt, r.resume, r.retryOf
	c.attempt, c.lastErr, c.inputs, c.reclaimed = r.attempts, r.lastErr, r.inputs, true
	c.exhausted = c.attempt >= e.cfg.MaxAttempts
	if !c.exhausted {
		c.attempt++
	}
	// The run that settles the turn keeps its trace.
	e.startTurn(ctx, c)
	w.reclaimed = append(w.reclaimed, c)
	w.kept = append(w.kept, c.lease)
}

// resumes works out where the new turns that take answers start (P5,
// H3): the held turn a RETRY answer among their inputs retries, and the
// continuation they resume from: the held turn's, or the one the
// session's last WAITING turn left. One round trip, when any turn takes
// an answer.
func (e *Executor) resumes(ctx context.Context, p *pipeTx, cs []*claim) error {
	var sids, seqs []int64
	bySID := map[int64]*claim{}
	for _, c := range cs {
		if c.reclaimed {
			continue // already known
		}
		for _, in := range c.inputs {
			if in.Kind == session.KindCommand {
				sids, seqs = append(sids, c.sess.SID), append(seqs, in.Seq)
				bySID[c.sess.SID] = c
			}
		}
	}
	if len(sids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`
		WITH x AS (
			SELECT i.sid, coalesce(max(i.turn) FILTER (WHERE i.kind = $3 AND i.decision = $4), 0) AS retry_of,
			       count(*) FILTER (WHERE i.kind = $5) AS approvals
			  FROM session_interrupts i JOIN unnest($1::bigint[], $2::bigint[]) AS c (sid, seq) ON c.sid = i.sid AND c.seq = i.command_seq
			 GROUP BY i.sid)
		SELECT x.sid, x.retry_of, CASE
			WHEN x.retry_of > 0 THEN (SELECT t.resume FROM session_turns t WHERE t.sid = x.sid AND t.number = x.retry_of)
			WHEN x.approvals > 0 THEN (SELECT s.resume FROM sessions s WHERE s.sid = x.sid) END
		  FROM x`, sids, seqs, session.InterruptHold, session.Retry, session.InterruptApproval).Query(func(rows pgx.Rows) error {
		var sid int64
		var retryOf int
		var resume jsonvalue.Value
		_, err := pgx.ForEachRow(rows, []any{&sid, &retryOf, &resume}, func() error {
			if c := bySID[sid]; c != nil {
				c.retryOf, c.resume = retryOf, append(jsonvalue.Value(nil), resume...)
			}
			return nil
		})
		return err
	})
	if err := p.send(ctx, b); err != nil {
		return fmt.Errorf("claim: resume: %w", err)
	}
	return nil
}

// claimWrites collects what a claim writes.
type claimWrites struct {
	owner      string
	now, until time.Time
	starts     []session.StartTurn
	// kept are sessions that stay leased without a new turn: reclaimed
	// turns (T9) and sessions whose version is unusable.
	kept      []session.Lease
	standDown []session.Lease
	// held are sessions whose trigger deliveries the debounce holds until
	// heldUntil (G3).
	held      []session.Lease
	heldUntil []time.Time
	ended     []session.Lease
	reclaimed []*claim
	fired     []ledger.NewEvent
	// ann is what the claim announces once committed (issue 12).
	ann session.Announcement
}

// start records c's new turn over items, the firings among them taking
// the delivery sequences after count (C3, C6), and returns the turn's
// inputs in order.
func (w *claimWrites) start(c *claim, count int64, items []item) []session.Input {
	st := session.StartTurn{Lease: c.lease, Turn: c.turn}
	out := make([]session.Input, len(items))
	seq := count
	// Before the first pending input the listing continues after the inputs
	// already delivered: any key below that input's own sorts there.
	prev := orderKey(seq)
	for _, it := range items {
		if it.row != nil {
			prev = orderKey(it.row.Seq - 1)
			break
		}
	}
	for i, it := range items {
		if it.row != nil {
			out[i] = *it.row
			prev = it.row.OrderKey
			continue
		}
		seq++
		f := it.firing
		in := session.Input{SID: c.sess.SID, Seq: seq, Identity: f.Identity(), Kind: session.KindSchedule, EventID: &it.event.ID,
			StartsTurn: f.StartsTurn, Status: session.InputPending, ByteSize: it.size(), DeliveredAt: w.now,
			OrderKey: prev + "/" + orderKey(seq)}
		out[i] = in
		st.Firings, st.Scheduled, st.Entries = append(st.Firings, in), append(st.Scheduled, f.At), append(st.Entries, f.Entry.Name)
		w.fired = append(w.fired, it.event)
		c.events[it.event.ID] = ledger.Event{ID: it.event.ID, Type: it.event.Type, Data: it.event.Data, CommitTime: w.now}
	}
	w.starts = append(w.starts, st)
	return out
}

// queue queues the claim's writes: the sessions' (package session) before
// the turns', executions' and turn inputs' that refer to them.
func (w *claimWrites) queue(b *pgx.Batch, cs []*claim) {
	session.QueueStartTurns(b, w.owner, w.now, w.until, w.starts, &w.ann)
	session.QueueLease(b, w.owner, w.until, w.kept)
	session.QueueStandDown(b, w.standDown)
	session.QueueHold(b, w.held, w.heldUntil)
	session.QueueCompleteAtEnd(b, w.now, w.ended, &w.ann)
	for _, c := range w.reclaimed {
		b.Queue(`UPDATE executions SET attempts = $2, trace_id = coalesce($3, trace_id) WHERE id = $1`, c.execID, c.attempt, traceIDOf(c.span))
		w.ann.Session(c.sess.SID)
	}
	w.ann.QueueXID(b)
	var (
		execIDs, actionIDs []uuid.UUID
		versions, numbers  []int32
		sids               []int64
		finals             []bool
		endsAt             []*time.Time
		traces, resumes    []*string
		retryOf            []int32
		tiSID, tiSeq       []int64
		tiTurn             []int32
	)
	for _, c := range cs {
		if c.reclaimed {
			continue
		}
		execIDs, actionIDs = append(execIDs, c.execID), append(actionIDs, c.sess.ActionID)
		versions, numbers, sids = append(versions, int32(c.sess.Version)), append(numbers, int32(c.turn)), append(sids, c.sess.SID)
		finals, endsAt = append(finals, c.final), append(endsAt, c.endsAt)
		traces, resumes, retryOf = append(traces, traceIDOf(c.span)), append(resumes, jsonText(c.resume)), append(retryOf, int32(c.retryOf))
		for _, in := range c.inputs {
			tiSID, tiSeq, tiTurn = append(tiSID, c.sess.SID), append(tiSeq, in.Seq), append(tiTurn, int32(c.turn))
		}
	}
	if len(execIDs) == 0 {
		return
	}
	b.Queue(`INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at, trace_id)
		SELECT u.id, u.action_id, u.version, u.sid, u.turn, $7, 1, $8, u.trace
		  FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::bigint[], $5::int[], $6::text[]) AS u (id, action_id, version, sid, turn, trace)`,
		execIDs, actionIDs, versions, sids, numbers, traces, ExecRunning, w.now)
	b.Queue(`INSERT INTO session_turns (sid, number, status, execution_id, final, ends_at, started_at, resume, retry_of)
		SELECT u.sid, u.number, $8, u.exec, u.final, u.ends_at, $9, u.resume::json, nullif(u.retry_of, 0)
		  FROM unnest($1::bigint[], $2::int[], $3::uuid[], $4::boolean[], $5::timestamptz[], $6::text[], $7::int[])
		       AS u (sid, number, exec, final, ends_at, resume, retry_of)`,
		sids, numbers, execIDs, finals, endsAt, resumes, retryOf, TurnRunning, w.now)
	b.Queue(`INSERT INTO turn_inputs (sid, turn, seq) SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[])`, tiSID, tiTurn, tiSeq)
}

// startTurn starts the span of c's turn (issue 12): the root of a trace of
// its own, since the claim began.
func (e *Executor) startTurn(ctx context.Context, c *claim) {
	t := e.Tracer
	if t == nil {
		t = observe.Tracer(nil)
	}
	_, c.span = t.Start(ctx, "turn", trace.WithNewRoot(), trace.WithTimestamp(c.began), trace.WithAttributes(
		observe.ExecutionID.String(c.execID.String()), observe.ActionID.String(c.sess.ActionID.String()),
		observe.ActionVersion.Int(c.sess.Version), observe.SessionID.String(c.sess.ID),
		observe.TurnNumber.Int(c.turn), observe.Attempt.Int(c.attempt)))
}

// traceIDOf is the trace id of span to store, or NULL.
func traceIDOf(span trace.Span) *string {
	if span == nil {
		return nil
	}
	if id := observe.TraceID(trace.ContextWithSpan(context.Background(), span)); id != "" {
		return &id
	}
	return nil
}

// jsonText is a JSON value as a statement parameter: nil for none.
func jsonText(v jsonvalue.Value) *string {
	if len(v) == 0 {
		return nil
	}
	s := string(v)
	return &s
}

// versionReads lists the compiled action versions with sessions, for the
// reads of a claim's first round trip (session.QueueClaimedPending); the
// list is rebuilt only when the store compiled more versions.
func (e *Executor) versionReads() session.VersionReads {
	e.versions.mu.Lock()
	defer e.versions.mu.Unlock()
	if cs, grew := e.actions.CachedCompiled(e.versions.n); grew {
		var v session.VersionReads
		for _, c := range cs {
			if c.Session != nil {
				v.Add(c.ActionID, c.Version, maxInputs(c.Session), len(c.Session.Clock) > 0)
			}
		}
		e.versions.reads, e.versions.n = v, len(cs)
	}
	return e.versions.reads
}

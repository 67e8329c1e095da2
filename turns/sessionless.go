package turns

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Executions of actions without a session block (issue 15; docs/executions.md).
//
// The dispatcher queues one per action and matching event (QueueExecutions,
// in its own transaction). The executor claims them beside turns, in the
// same loop and worker slots: a lease on the execution row with a fencing
// token, as a turn's on its session, and the concurrency rule below. An
// attempt runs the handler with the execution's one event (the same for
// every attempt and every retry); the outcome commits, fenced by the token,
// in the handler's transaction when it began one (its ledger writes and
// tool calls commit with it) or in a transaction of its own. A worker that
// dies leaves the lease to expire; the next claim runs the execution again
// with the next attempt number.
//
// Concurrency: an execution of a group with a limit L (the action, or one
// value of its concurrency key) is admitted only while fewer than L of the
// group's executions run under a live lease, counting the group's
// executions still waiting for an earlier event: so a group's executions
// start in the commit order of their events, at most L at a time. Claims
// that admit into the same group take its advisory lock first, so two
// processes cannot both take the last place.

// QueueMatches queues in b one execution per match, QUEUED, with the
// triggers that matched and its concurrency group; one whose concurrency
// key failed to evaluate is FAILED at once with concurrency_key_failed.
// An execution that already exists for the action and event is left alone
// (one per action and event, whoever queues it). It is the dispatcher's
// session.QueueFunc; b must be sent in the dispatch transaction.
func QueueMatches(b *pgx.Batch, now time.Time, ms []session.Match) {
	n := len(ms)
	ids, actionIDs, eventIDs := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n)
	versions, limits := make([]int32, n), make([]*int32, n)
	positions := make([]int64, n)
	triggers, statuses := make([]string, n), make([]string, n)
	keys, errs := make([]*string, n), make([]*string, n)
	for i, m := range ms {
		tj, _ := json.Marshal(m.Triggers) // strings: never fails
		ids[i], actionIDs[i], eventIDs[i] = ledger.NewID(), m.Action.ActionID, m.Event.ID
		versions[i], positions[i], triggers[i], statuses[i] = int32(m.Action.Version), m.Event.Position, string(tj), string(ExecQueued)
		if cc := m.Action.Concurrency; cc != nil {
			l := int32(cc.Limit)
			limits[i], keys[i] = &l, m.Key
			if m.Key == nil {
				msg := string(FailKeyFailed) + ": concurrency.key: " + m.KeyErr
				statuses[i], errs[i] = string(ExecFailed), &msg
			}
		}
	}
	b.Queue(`INSERT INTO executions (id, action_id, version, status, attempts, started_at, queued_at, available_at, finished_at,
			event_id, event_position, triggers, concurrency_key, concurrency_limit, error)
		SELECT u.id, u.action_id, u.version, u.status, 0, $11::timestamptz, $11::timestamptz, CASE WHEN u.error IS NULL THEN $11::timestamptz END,
		       CASE WHEN u.error IS NOT NULL THEN $11::timestamptz END,
		       u.event_id, u.position, ARRAY(SELECT jsonb_array_elements_text(u.triggers::jsonb)), u.key, u.lim, u.error
		  FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::uuid[], $6::bigint[], $7::text[], $8::text[], $9::int[], $10::text[])
		       WITH ORDINALITY AS u (id, action_id, version, status, event_id, position, triggers, key, lim, error, ord)
		 ORDER BY u.ord
		ON CONFLICT (action_id, event_id) WHERE event_id IS NOT NULL DO NOTHING`,
		ids, actionIDs, versions, statuses, eventIDs, positions, triggers, keys, limits, errs, now)
}

// job is a claimed execution of an action without a session block.
type job struct {
	id       uuid.UUID
	actionID uuid.UUID
	version  int
	token    int64 // the lease's fencing token
	// attempt counts the attempts made so far, the current one included;
	// base those made before the latest operator retry.
	attempt, base int
	triggers      []string
	event         ledger.Event
	limited       bool // its group has a concurrency limit
	// exhausted: re-claimed with its attempts spent (the workers running
	// it kept stopping); it fails without running again. lastErr: why an
	// earlier run could not commit its outcome.
	exhausted bool
	lastErr   string
	comp      *action.Compiled

	span    trace.Span
	began   time.Time
	outcome ExecStatus // what its commit recorded; "" until then
}

// candidate is an execution a claim may admit.
type candidate struct {
	id       uuid.UUID
	actionID uuid.UUID
	key      *string
	limit    *int
}

// candidatesSQL reads up to $2 claimable executions in the commit order of
// their events: QUEUED, or RUNNING with an expired lease (available_at is
// the lease's expiry), and, in a group with a limit, among the first
// `limit` of the group's unfinished executions.
const candidatesSQL = `
SELECT x.id, x.action_id, x.concurrency_key, x.concurrency_limit
  FROM executions x
 WHERE x.event_id IS NOT NULL AND x.status IN ('QUEUED', 'RUNNING') AND x.available_at <= $1
   AND (x.concurrency_limit IS NULL OR (SELECT count(*) FROM (SELECT 1 FROM executions y
         WHERE y.action_id = x.action_id AND y.concurrency_key = x.concurrency_key AND y.event_id IS NOT NULL
           AND y.status IN ('QUEUED', 'RUNNING') AND y.event_position < x.event_position
         LIMIT x.concurrency_limit) e) < x.concurrency_limit)
 ORDER BY x.event_position
 LIMIT $2`

// admitSQL leases the candidates $1 still claimable at $2 that their
// group's limit admits: fewer than the limit running under a live lease
// plus waiting for an earlier event. Each gets owner $3, a lease until $4,
// the next fencing token and its next attempt; one whose attempts are
// spent ($5 since the latest operator retry) keeps its count and is
// marked exhausted. Rows another claim holds are skipped.
const admitSQL = `
WITH l AS (
	SELECT id FROM executions
	 WHERE id = ANY($1) AND status IN ('QUEUED', 'RUNNING') AND available_at <= $2
	   FOR NO KEY UPDATE SKIP LOCKED),
a AS (
	SELECT x.id, x.attempts - x.attempts_base >= $5 AS exhausted FROM executions x JOIN l ON l.id = x.id
	 WHERE x.concurrency_limit IS NULL
	    OR (SELECT count(*) FROM executions y
	         WHERE y.action_id = x.action_id AND y.concurrency_key = x.concurrency_key AND y.event_id IS NOT NULL
	           AND y.status = 'RUNNING' AND y.lease_expires_at > $2)
	     + (SELECT count(*) FROM (SELECT 1 FROM executions y
	         WHERE y.action_id = x.action_id AND y.concurrency_key = x.concurrency_key AND y.event_id IS NOT NULL
	           AND (y.status = 'QUEUED' OR (y.status = 'RUNNING' AND y.lease_expires_at <= $2))
	           AND y.event_position < x.event_position
	         LIMIT x.concurrency_limit) w) < x.concurrency_limit)
UPDATE executions x SET status = 'RUNNING', lease_owner = $3, lease_expires_at = $4, available_at = $4,
       lease_token = x.lease_token + 1,
       attempts = CASE WHEN a.exhausted THEN x.attempts ELSE x.attempts + 1 END,
       started_at = CASE WHEN x.attempts = 0 THEN $2 ELSE x.started_at END
  FROM a, events e
 WHERE x.id = a.id AND e.id = x.event_id
RETURNING x.id, x.action_id, x.version, x.lease_token, x.attempts, x.attempts_base, a.exhausted,
       coalesce(x.error, ''), x.triggers, x.concurrency_limit IS NOT NULL,
       e.id, e.position, e.type, e.data, e.commit_time`

// groupLock is the advisory lock of a concurrency group: a hash of the
// action and the key.
func groupLock(actionID uuid.UUID, key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("actionsledger/executions/"))
	_, _ = h.Write(actionID[:])
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}

// claimJobs leases up to n claimable executions (see the package comment
// above): a read of the candidates, then, in one transaction and round
// trip, the advisory locks of their limited groups (in one order, so
// claims never deadlock) and the lease of those the limits admit. With
// nothing to claim it costs the one read.
func (e *Executor) claimJobs(ctx context.Context, n int) ([]*job, error) {
	began := time.Now()
	now := e.clock.Now()
	rows, err := e.pool.Query(ctx, candidatesSQL, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim executions: %w", err)
	}
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		var c candidate
		return c, r.Scan(&c.id, &c.actionID, &c.key, &c.limit)
	})
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	ids := make([]uuid.UUID, len(cands))
	var locks []int64
	for i, c := range cands {
		ids[i] = c.id
		if c.limit != nil && c.key != nil {
			if k := groupLock(c.actionID, *c.key); !slices.Contains(locks, k) {
				locks = append(locks, k)
			}
		}
	}
	slices.Sort(locks)
	p, err := newPipeTx(ctx, e.pool)
	if err != nil {
		return nil, fmt.Errorf("claim executions: %w", err)
	}
	defer p.close(ctx)
	b := &pgx.Batch{}
	for _, k := range locks {
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, k)
	}
	var out []*job
	b.Queue(admitSQL, ids, now, e.cfg.Owner, now.Add(e.cfg.Lease), e.cfg.MaxAttempts).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			j := &job{began: began}
			var ev ledger.Event
			if err := rows.Scan(&j.id, &j.actionID, &j.version, &j.token, &j.attempt, &j.base, &j.exhausted, &j.lastErr,
				&j.triggers, &j.limited, &ev.ID, &ev.Position, &ev.Type, &ev.Data, &ev.CommitTime); err != nil {
				return err
			}
			ev.CommitTime = ev.CommitTime.UTC()
			j.event = ev
			out = append(out, j)
		}
		return rows.Err()
	})
	if err := p.commit(ctx, b); err != nil {
		return nil, fmt.Errorf("claim executions: %w", err)
	}
	slices.SortFunc(out, func(x, y *job) int { return cmp.Compare(x.event.Position, y.event.Position) })
	for _, j := range out {
		e.startJob(ctx, j)
	}
	return out, nil
}

// startJob starts the span of j's run (issue 12): the root of a trace of
// its own, since the claim began.
func (e *Executor) startJob(ctx context.Context, j *job) {
	t := e.Tracer
	if t == nil {
		t = observe.Tracer(nil)
	}
	_, j.span = t.Start(ctx, "execution", trace.WithNewRoot(), trace.WithTimestamp(j.began), trace.WithAttributes(
		observe.ExecutionID.String(j.id.String()), observe.ActionID.String(j.actionID.String()),
		observe.ActionVersion.Int(j.version), observe.Attempt.Int(j.attempt)))
}

// RunExecutionOnce claims one claimable execution of an action without a
// session block and runs it to the end, committing it by itself. It
// reports whether it found one.
func (e *Executor) RunExecutionOnce(ctx context.Context) (bool, error) {
	js, err := e.claimJobs(ctx, 1)
	if err != nil || len(js) == 0 {
		return false, err
	}
	return true, e.runJob(ctx, js[0])
}

// jobDone is what a job's run leaves to commit.
type jobDone struct {
	j          *job
	out        *Outcome
	runErr     error
	transcript []Entry
	// w is the handler's transaction, when it began one: a successful run
	// commits in it, with the handler's writes and tool calls.
	w *ledger.Writer
}

// runJob runs a claimed execution with retries while keeping its lease,
// then commits its outcome, once.
func (e *Executor) runJob(ctx context.Context, j *job) (err error) {
	ctx = trace.ContextWithSpan(ctx, j.span)
	defer func() { e.jobSettled(ctx, j, err) }()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := e.beats.addJob(j.id, j.token, cancel)
	stopBeat := func() { e.beats.removeJob(j.id, j.token) }
	defer stopBeat()
	d, err := e.executeJob(ctx, runCtx, j)
	if err != nil || d == nil {
		return err
	}
	if d.w != nil {
		defer d.w.Rollback(context.WithoutCancel(ctx))
	}
	stopBeat() // the commit is fenced by the lease token
	select {
	case <-lost:
		e.log.Warn("lease lost; execution not committed", "execution", j.id)
		return nil
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the lease expires and another claim runs it again
	}
	releaseSlot(ctx)
	ok, err := e.commitJob(ctx, d)
	if err != nil {
		if ctx.Err() == nil {
			e.uncommittedJob(ctx, j, err)
		}
		return err
	}
	if !ok {
		e.log.Warn("lease taken over; execution not committed", "execution", j.id)
	}
	return nil
}

// executeJob runs j's handler with retries and returns what is to
// commit; nil when the lease was lost before an attempt.
func (e *Executor) executeJob(ctx, runCtx context.Context, j *job) (*jobDone, error) {
	d := &jobDone{j: j}
	comp, err := e.actions.Compiled(ctx, j.actionID, j.version)
	tr := &Transcript{now: e.clock.Now, attempt: j.attempt}
	switch {
	case err != nil:
		d.runErr = Permanent(fmt.Errorf("the action version cannot run: %w", err))
	case j.exhausted:
		j.comp = comp
		if j.lastErr != "" {
			d.runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts; the last could not commit its outcome: %s", j.attempt-j.base, j.lastErr))
		} else {
			d.runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts (the workers running it stopped)", j.attempt-j.base))
		}
	default:
		j.comp = comp
		h, herr := e.kinds.Handler(comp.Def.Kind, Spec{Config: comp.Def.Config, Source: comp.Def.Source})
		if herr != nil {
			d.runErr = herr
			e.Metrics.HandlerError(comp.Def.Kind, CodeConfig)
			break
		}
		req := e.jobRequest(j, comp, tr)
		var stop bool
		d.out, d.w, d.runErr, stop, err = e.jobAttempts(ctx, runCtx, j, h, req)
		if err != nil || stop {
			return nil, err
		}
	}
	d.transcript = tr.Entries()
	return d, nil
}

// jobRequest is what the handler receives: no session, no state, and the
// execution's event as its one input, with the triggers that matched.
func (e *Executor) jobRequest(j *job, comp *action.Compiled, tr *Transcript) *Request {
	ev := j.event
	return &Request{
		ActionID: j.actionID, Version: j.version, ExecutionID: j.id, Attempt: j.attempt,
		Inputs: []InputView{{Identity: "event/" + ev.ID.String(), Kind: session.KindEvent, Sequence: 1, Triggers: j.triggers,
			Event: &EventView{ID: ev.ID, Type: ev.Type, Data: ev.Data, CommitTime: ev.CommitTime, Position: ev.Position}}},
		Spec: Spec{Config: comp.Def.Config, Source: comp.Def.Source}, Transcript: tr,
	}
}

// jobAttempts runs the handler until it succeeds, fails permanently or
// uses up its attempts (the kind's AttemptsPolicy, else MaxAttempts, from
// the latest operator retry on), each in a transaction of its own (begun
// when the handler first reaches the ledger or a tool). stop reports that
// the lease was lost before an attempt.
func (e *Executor) jobAttempts(ctx, runCtx context.Context, j *job, h Handler, req *Request) (out *Outcome, w *ledger.Writer, runErr error, stop bool, err error) {
	maxAttempts := e.cfg.MaxAttempts
	if p, ok := h.(AttemptsPolicy); ok && p.MaxAttempts() > 0 {
		maxAttempts = p.MaxAttempts()
	}
	for first := true; ; first = false {
		if !first { // the claim counted the first attempt
			j.attempt++
			tag, err := e.pool.Exec(ctx, `UPDATE executions SET attempts = $2 WHERE id = $1 AND lease_token = $3 AND status = $4`,
				j.id, j.attempt, j.token, ExecRunning)
			if err != nil {
				return nil, nil, nil, false, err
			}
			if tag.RowsAffected() == 0 {
				e.log.Warn("lease lost before an attempt; execution left to its new owner", "execution", j.id)
				return nil, nil, nil, true, nil
			}
		}
		req.Attempt = j.attempt
		req.Transcript.reset(j.attempt)
		w = ledger.NewWriter(e.pool, e.clock.Now)
		var touched atomic.Bool
		if e.EnvFunc != nil {
			req.Env = touchedEnv{e.EnvFunc(w, Run{ExecutionID: j.id, Action: j.comp}), &touched}
		}
		out, runErr = e.attempt(runCtx, h, req)
		code := ErrorCode(runErr)
		if runErr == nil {
			if verr := out.validateSessionless(); verr != nil {
				runErr, code = verr, CodeInvalidOutput
			}
		}
		if runErr == nil {
			if !touched.Load() {
				w = nil
			}
			return out, w, nil, false, nil
		}
		e.Metrics.HandlerError(j.comp.Def.Kind, code)
		w.Rollback(context.WithoutCancel(ctx))
		if h := AsHold(runErr); h != nil && !h.Retried() {
			return out, nil, Permanent(runErr), false, nil // a refusal is not retried
		}
		if IsPermanent(runErr) || j.attempt-j.base >= maxAttempts || runCtx.Err() != nil {
			return out, nil, runErr, false, nil
		}
		if e.sleep(runCtx, e.cfg.Backoff<<(j.attempt-j.base-1)) != nil {
			return out, nil, runErr, false, nil
		}
	}
}

// validateSessionless checks the outcome of an execution without a
// session (issue 15): its output is what counts. OPEN, COMPLETED or no
// status succeed (a reason is optional, state is ignored: there is no
// session to keep it in); FAILED fails the execution with its reason, not
// retried; WAITING cannot be: there is no session to wait in.
func (o *Outcome) validateSessionless() error {
	switch {
	case o == nil:
		return Permanent(fmt.Errorf("%s: the handler returned no outcome", FailOutputInvalid))
	case o.Status == "WAITING" || len(o.Approvals) > 0:
		return Permanent(fmt.Errorf("%s: an action without a session block cannot wait for an approval: there is no session to wait in", FailOutputInvalid))
	case o.Status == "FAILED":
		reason := o.Reason
		if reason == "" {
			reason = "(no reason given)"
		}
		return Permanent(fmt.Errorf("%s: %s", FailHandlerFailed, reason))
	case o.Status != "" && o.Status != "OPEN" && o.Status != "COMPLETED":
		return Permanent(fmt.Errorf("%s: status %q is not one of OPEN, COMPLETED, FAILED", FailOutputInvalid, o.Status))
	case len(o.Output) > 0:
		if err := jsonvalue.Check(o.Output, "output"); err != nil {
			return Permanent(fmt.Errorf("%s: %w", FailOutputInvalid, err))
		}
	}
	return nil
}

// settleJobSQL records an execution's outcome if its lease token is still
// current, with the run's transcript after the entries earlier runs left
// (an operator retry keeps them), and wakes other executors when its group
// has a limit (a place is free). It returns one row when it recorded.
const settleJobSQL = `
WITH u AS (
	UPDATE executions SET status = $3, output = $4::jsonb, error = $5, finished_at = $6,
	       lease_owner = NULL, lease_expires_at = NULL, available_at = NULL
	 WHERE id = $1 AND lease_token = $2 AND status = 'RUNNING'
	RETURNING id, concurrency_limit IS NOT NULL AS limited),
b AS (SELECT coalesce(max(seq), 0) AS base FROM transcript_entries WHERE execution_id = $1),
t AS (
	INSERT INTO transcript_entries (execution_id, seq, kind, data, at)
	SELECT u.id, b.base + e.seq, e.kind, e.data::jsonb, e.at
	  FROM u, b, unnest($7::int[], $8::text[], $9::text[], $10::timestamptz[]) AS e (seq, kind, data, at)
	RETURNING 1)
SELECT (SELECT count(*) FROM t), (SELECT CASE WHEN u.limited THEN pg_notify($11, '') END) FROM u`

// commitJob records d's outcome (SUCCEEDED with the output, or FAILED
// with the reason) with its transcript: in the handler's transaction when
// a successful run began one, so its ledger writes and tool calls commit
// with it, else in a transaction of its own. It reports false when the
// lease was lost (nothing committed).
func (e *Executor) commitJob(ctx context.Context, d *jobDone) (bool, error) {
	j := d.j
	status, output, errText := ExecSucceeded, jsonvalue.Value(nil), ""
	if d.runErr != nil {
		status, errText = ExecFailed, storable(d.runErr.Error())
	} else if d.out != nil {
		output = d.out.Output
	}
	n := len(d.transcript)
	seqs, kinds, data, at := make([]int32, n), make([]string, n), make([]string, n), make([]time.Time, n)
	for i, en := range d.transcript {
		seqs[i], kinds[i], data[i], at[i] = int32(en.Seq), en.Kind, string(en.Data), en.At
	}
	recorded := false
	b := &pgx.Batch{}
	b.Queue(settleJobSQL, j.id, j.token, status, jsonText(output), nonEmpty(errText), e.clock.Now(),
		seqs, kinds, data, at, session.ExecutionsChannel).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			recorded = true
		}
		return rows.Err()
	})
	if d.w != nil && d.runErr == nil {
		tx, err := d.w.Tx(ctx)
		if err != nil {
			return false, err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return false, fmt.Errorf("commit execution: %w", err)
		}
		if !recorded {
			d.w.Rollback(ctx)
			return false, nil
		}
		if err := d.w.Commit(ctx); err != nil {
			return false, fmt.Errorf("commit execution: %w", err)
		}
	} else {
		if d.w != nil {
			d.w.Rollback(ctx)
		}
		p, err := newPipeTx(ctx, e.pool)
		if err != nil {
			return false, err
		}
		defer p.close(ctx)
		if err := p.commit(ctx, b); err != nil {
			return false, fmt.Errorf("commit execution: %w", err)
		}
	}
	if recorded {
		j.outcome = status
		if j.limited {
			nudge(e.kickExec) // its group may admit the next one
		}
	}
	return recorded, nil
}

// uncommittedJob notes why an execution's outcome could not commit and
// gives its lease up, so it runs again at once and, when the failure
// repeats until its attempts are spent, fails with that reason.
func (e *Executor) uncommittedJob(ctx context.Context, j *job, cause error) {
	ctx = context.WithoutCancel(ctx)
	e.log.Error("execution outcome not committed; it runs again", "execution", j.id, "err", cause)
	now := e.clock.Now()
	_, _ = e.pool.Exec(ctx, `UPDATE executions SET error = $3, lease_expires_at = $4, available_at = $4
		WHERE id = $1 AND lease_token = $2 AND status = 'RUNNING'`, j.id, j.token, storable(cause.Error()), now)
	nudge(e.kickExec)
}

// jobSettled reports a claimed execution once its run is done (issue 12):
// its span and a log line.
func (e *Executor) jobSettled(ctx context.Context, j *job, err error) {
	if err != nil || j.outcome == "" {
		if err == nil {
			err = errors.New("execution not committed (lease lost or taken over)")
		}
		observe.End(j.span, err)
		return
	}
	kind := ""
	if j.comp != nil {
		kind = j.comp.Def.Kind
	}
	j.span.SetAttributes(observe.Outcome.String(string(j.outcome)), observe.ActionKind.String(kind))
	if j.outcome == ExecFailed {
		j.span.SetStatus(codes.Error, "execution failed")
	}
	j.span.End()
	attrs := []any{"action", j.actionID, "execution", j.id, "event", j.event.ID, "status", j.outcome,
		"attempts", j.attempt, "duration_ms", float64(time.Since(j.began).Microseconds()) / 1000}
	if id := observe.TraceID(ctx); id != "" {
		attrs = append(attrs, "trace", id)
	}
	e.log.Info("execution settled", attrs...)
}

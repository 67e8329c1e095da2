package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Config tunes an Executor. Zero fields take the defaults in parentheses.
type Config struct {
	Owner       string        // lease owner name (random)
	Workers     int           // concurrent turns in this process (4)
	Lease       time.Duration // how long a claim lasts without a heartbeat (30s)
	TurnTimeout time.Duration // deadline of one attempt (5m)
	MaxAttempts int           // attempts per execution before the turn fails (3)
	Backoff     time.Duration // first retry delay, doubled per attempt (200ms)
	Poll        time.Duration // fallback poll when no notification arrives (2s)
}

func (c *Config) defaults() {
	if c.Owner == "" {
		c.Owner = "worker-" + uuid.NewString()[:8]
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.TurnTimeout <= 0 {
		c.TurnTimeout = 5 * time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.Poll <= 0 {
		c.Poll = 2 * time.Second
	}
}

// Executor claims runnable sessions and runs their turns, one at a time per
// session (T1), across any number of processes. A claim is a lease on the
// session row with a fencing token: a worker that lost its lease cannot
// commit, and a turn claimed by a dead worker is run again after the lease
// expires, with the same inputs and execution (T7).
type Executor struct {
	pool    *pgxpool.Pool
	actions *action.Store
	kinds   *Registry
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config

	// EnvFunc, when set, gives each attempt its Env over the attempt's
	// writer, for the turn run describes.
	EnvFunc func(w *ledger.Writer, run Run) Env

	// Metrics, when set, counts turns, handler errors and claim waits
	// (issue 12); Tracer, when set, records a span per turn, the root of a
	// trace of its own, whose id the execution keeps (executions.trace_id).
	Metrics *observe.Metrics
	Tracer  trace.Tracer

	// sleep waits between retries; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// live publishes running turns' transcript entries (issue 12).
	live *publisher
}

// NewExecutor returns an Executor.
func NewExecutor(pool *pgxpool.Pool, actions *action.Store, kinds *Registry, c clock.Clock, log *slog.Logger, cfg Config) *Executor {
	cfg.defaults()
	return &Executor{pool: pool, actions: actions, kinds: kinds, clock: c, log: log, cfg: cfg, sleep: sleepCtx,
		live: newPublisher(pool, log)}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run runs Workers loops until ctx ends. wake delivers turn notifications.
// A notification wakes one idle worker; a worker that claims a turn wakes
// another before running it, so a burst of runnable sessions fans out
// without every notification stampeding every worker.
func (e *Executor) Run(ctx context.Context, wake <-chan struct{}) error {
	var wg sync.WaitGroup
	kick := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				nudge(kick)
			}
		}
	}()
	for i := 0; i < e.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.worker(ctx, kick)
		}()
	}
	wg.Wait()
	return nil
}

func nudge(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (e *Executor) worker(ctx context.Context, kick chan struct{}) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		c, err := e.claim(ctx)
		if err == nil && c != nil {
			nudge(kick) // there may be more: let another worker look
			if err := e.run(ctx, c); err != nil && ctx.Err() == nil {
				e.log.Error("turn failed to run", "session", c.sess.ID, "turn", c.turn, "err", err)
			}
			continue
		}
		if err == nil {
			_, err = e.Sweep(ctx)
		}
		if err != nil && ctx.Err() == nil {
			e.log.Error("claim failed", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-kick:
		case <-t.C:
		}
	}
}

// credentialTTL bounds a handler credential's life (T10): every attempt
// running to its deadline with the backoff between them, plus one lease.
// The credential normally dies sooner, with the turn's lease.
func (e *Executor) credentialTTL() time.Duration {
	return time.Duration(e.cfg.MaxAttempts)*e.cfg.TurnTimeout + e.cfg.Backoff<<e.cfg.MaxAttempts + e.cfg.Lease
}

// claim is a leased session with the turn it is to run.
type claim struct {
	sess    *session.Session
	token   int64
	turn    int
	execID  uuid.UUID
	inputs  []session.Input
	attempt int // attempts counted so far, the current one included
	final   bool
	endsAt  *time.Time
	// exhausted: a re-claimed turn whose attempts are spent (the workers
	// running it kept stopping); it fails without running again (T7).
	exhausted bool
	// resume: the continuation the turn starts from (P1, H3); retryOf: the
	// held turn it retries (H3), 0 for none.
	resume  jsonvalue.Value
	retryOf int
	// lastErr: why an earlier run of a re-claimed turn could not commit.
	lastErr string
	// comp is the session's version, once the turn runs.
	comp *action.Compiled

	// What issue 12 reports of the turn: its span, when the claim began
	// (real time), how long the session had been runnable, the outcome
	// its record commits (the execution's status; empty until recorded)
	// and the interrupts it raised.
	span    trace.Span
	began   time.Time
	waited  time.Duration
	outcome string
	raised  []raised
}

// raised is an interrupt a turn raised, for the log once it commits.
type raised struct {
	id   uuid.UUID
	kind string
	// what: the gated tool's name, or the hold's cause.
	what string
}

// RunOnce claims one runnable session and runs its turn to the end. It
// reports whether it found work. With nothing to run it settles orphaned turns (see Sweep).
func (e *Executor) RunOnce(ctx context.Context) (bool, error) {
	c, err := e.claim(ctx)
	if err != nil {
		return false, err
	}
	if c == nil {
		_, err := e.Sweep(ctx)
		return false, err
	}
	return true, e.run(ctx, c)
}

// Sweep settles turns left RUNNING by a worker that stopped after their
// session was closed: once the lease has expired, the turn and its execution
// become CANCELLED (T8). It returns how many it settled.
func (e *Executor) Sweep(ctx context.Context) (int, error) {
	now := e.clock.Now()
	rows, err := e.pool.Query(ctx, `
		WITH t AS (
			UPDATE session_turns t SET status = 'CANCELLED', finished_at = $1
			  FROM sessions s
			 WHERE t.status = 'RUNNING' AND s.sid = t.sid AND s.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
			   AND (s.lease_expires_at IS NULL OR s.lease_expires_at <= $1)
			RETURNING t.execution_id)
		UPDATE executions x SET status = 'CANCELLED', finished_at = $1, error = 'the session was closed while the turn ran'
		  FROM t WHERE x.id = t.execution_id
		RETURNING x.sid, (SELECT pg_notify($2, pg_current_xact_id()::text || ':' || x.sid::text))`, now, session.SessionsChannel)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	return n, rows.Err()
}

// claim leases the runnable session waiting longest and fixes its turn: the
// RUNNING turn a dead worker left (with its inputs, final and endsAt, T9),
// or a new turn over the pending inputs and due firings (T2, T3, C4-C6),
// final when the session's end has come and it takes everything (E3, E4).
// A session whose end came with nothing pending completes instead (E5).
func (e *Executor) claim(ctx context.Context) (*claim, error) {
	var c *claim
	began := time.Now()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		now := e.clock.Now()
		var sid, token int64
		var runnable time.Time
		err := tx.QueryRow(ctx, `
			WITH c AS (
				SELECT sid FROM sessions
				 WHERE next_turn_at <= $1 AND status = 'OPEN' AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
				 ORDER BY next_turn_at LIMIT 1 FOR UPDATE SKIP LOCKED)
			UPDATE sessions s SET lease_owner = $2, lease_expires_at = $3, lease_token = s.lease_token + 1
			  FROM c WHERE s.sid = c.sid RETURNING s.sid, s.lease_token, s.next_turn_at`, now, e.cfg.Owner, now.Add(e.cfg.Lease)).Scan(&sid, &token, &runnable)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		sess, err := session.BySID(ctx, tx, sid)
		if err != nil {
			return err
		}
		c = &claim{sess: sess, token: token, began: began, waited: now.Sub(runnable)}
		// A RUNNING turn left by a worker that died is run again as it was.
		var status string
		var retryOf *int
		err = tx.QueryRow(ctx, `SELECT status, execution_id, final, ends_at, resume, retry_of FROM session_turns WHERE sid = $1 AND number = $2`,
			sid, sess.TurnCount).Scan(&status, &c.execID, &c.final, &c.endsAt, &c.resume, &retryOf)
		if retryOf != nil {
			c.retryOf = *retryOf
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim: last turn: %w", err)
		}
		if err == nil && status == "RUNNING" {
			c.turn = sess.TurnCount
			if err := tx.QueryRow(ctx, `SELECT attempts, coalesce(error, '') FROM executions WHERE id = $1`, c.execID).Scan(&c.attempt, &c.lastErr); err != nil {
				return err
			}
			c.exhausted = c.attempt >= e.cfg.MaxAttempts
			if !c.exhausted {
				c.attempt++
			}
			// The run that settles the turn keeps its trace.
			ctx := e.startTurn(ctx, c)
			if _, err := tx.Exec(ctx, `UPDATE executions SET attempts = $2, trace_id = coalesce($3, trace_id) WHERE id = $1`,
				c.execID, c.attempt, traceID(ctx)); err != nil {
				return err
			}
			if c.inputs, err = session.TurnInputs(ctx, tx, sid, c.turn); err != nil {
				return err
			}
			return session.Notice{SIDs: []int64{sid}}.Send(ctx, tx)
		}
		comp, err := e.actions.Compiled(ctx, sess.ActionID, sess.Version)
		if err != nil {
			return err
		}
		tk, err := e.plan(ctx, tx, sess, comp.Session, now)
		if err != nil {
			return err
		}
		switch {
		case tk == nil:
			// Nothing starts a turn any more: stand down.
			_, err := tx.Exec(ctx, `UPDATE sessions SET next_turn_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE sid = $1`, sid)
			c = nil
			return err
		case tk.ended:
			// E5: the end has come with nothing pending.
			c = nil
			return complete(ctx, tx, sid, now)
		}
		c.turn, c.execID, c.final, c.endsAt, c.attempt = sess.TurnCount+1, uuid.New(), tk.final, sess.EndsAt, 1
		ctx := e.startTurn(ctx, c)
		var fired []ledger.NewEvent
		c.inputs, fired, err = recordFirings(ctx, tx, sid, tk.items, now)
		if err != nil {
			return err
		}
		if c.retryOf, c.resume, err = startsFrom(ctx, tx, sid, c.inputs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at, trace_id)
			VALUES ($1, $2, $3, $4, $5, 'RUNNING', 1, $6, $7)`, c.execID, sess.ActionID, sess.Version, sid, c.turn, now, traceID(ctx)); err != nil {
			return fmt.Errorf("claim: execution: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_turns (sid, number, status, execution_id, final, ends_at, started_at, resume, retry_of)
			VALUES ($1, $2, 'RUNNING', $3, $4, $5, $6, $7, nullif($8, 0))`, sid, c.turn, c.execID, c.final, sess.EndsAt, now,
			nullable(c.resume), c.retryOf); err != nil {
			return fmt.Errorf("claim: turn: %w", err)
		}
		seqs := make([]int64, len(c.inputs))
		for i, in := range c.inputs {
			seqs[i] = in.Seq
		}
		if _, err := tx.Exec(ctx, `INSERT INTO turn_inputs (sid, turn, seq) SELECT $1, $2, unnest($3::bigint[])`, sid, c.turn, seqs); err != nil {
			return fmt.Errorf("claim: turn inputs: %w", err)
		}
		notice, args := session.Notice{SIDs: []int64{sid}}.Returning(3)
		if _, err = tx.Exec(ctx, `UPDATE sessions SET turn_count = $2 WHERE sid = $1 RETURNING `+notice,
			append([]any{sid, c.turn}, args...)...); err != nil {
			return err
		}
		c.sess.TurnCount = c.turn
		// Last: appending holds the ledger head until this transaction ends.
		_, err = ledger.Append(ctx, tx, now, fired...)
		return err
	})
	if err != nil {
		if c != nil && c.span != nil {
			observe.End(c.span, err)
		}
		return nil, err
	}
	return c, nil
}

// startTurn starts the span of c's turn (issue 12): the root of a trace of
// its own, since the claim began, and returns ctx with it.
func (e *Executor) startTurn(ctx context.Context, c *claim) context.Context {
	t := e.Tracer
	if t == nil {
		t = observe.Tracer(nil)
	}
	ctx, c.span = t.Start(ctx, "turn", trace.WithNewRoot(), trace.WithTimestamp(c.began), trace.WithAttributes(
		observe.ExecutionID.String(c.execID.String()), observe.ActionID.String(c.sess.ActionID.String()),
		observe.ActionVersion.Int(c.sess.Version), observe.SessionID.String(c.sess.ID),
		observe.TurnNumber.Int(c.turn), observe.Attempt.Int(c.attempt)))
	return ctx
}

// traceID is the trace id of ctx's span to store, or NULL.
func traceID(ctx context.Context) *string {
	if id := observe.TraceID(ctx); id != "" {
		return &id
	}
	return nil
}

// complete ends a session whose end came with nothing pending (E5):
// COMPLETED, reason ended, no turn.
func complete(ctx context.Context, tx pgx.Tx, sid int64, now time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE sessions SET status = 'COMPLETED', reason = $2, closed_at = $3, updated_at = $3,
		next_turn_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE sid = $1`, sid, session.ReasonEnded, now); err != nil {
		return fmt.Errorf("complete at the end: %w", err)
	}
	if err := session.DropTimer(ctx, tx, sid); err != nil {
		return err
	}
	return session.Notice{SIDs: []int64{sid}}.Send(ctx, tx)
}

// run executes the claimed turn with retries (T7) while keeping the lease
// alive, then commits its outcome (T6), and reports it (issue 12): its
// span, metrics and log lines.
func (e *Executor) run(ctx context.Context, c *claim) (err error) {
	ctx = trace.ContextWithSpan(ctx, c.span)
	defer func() { e.settled(ctx, c, err) }()
	return e.runTurn(ctx, c)
}

func (e *Executor) runTurn(ctx context.Context, c *claim) error {
	runCtx, cancel := context.WithCancel(ctx)
	lost := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		e.heartbeat(runCtx, c, cancel, lost)
	}()
	// stopBeat ends the heartbeat and waits for it: a beat still in flight
	// must not extend the lease after the commit has cleared it.
	stopBeat := func() {
		cancel()
		<-beating
	}
	defer stopBeat()

	comp, err := e.actions.Compiled(ctx, c.sess.ActionID, c.sess.Version)
	if err != nil {
		return err
	}
	c.comp = comp
	h, herr := e.kinds.Handler(comp.Def.Kind, Spec{Config: comp.Def.Config, Source: comp.Def.Source})
	req, err := e.request(ctx, c, comp)
	if err != nil {
		return err
	}
	var out *Outcome
	var runErr error
	var w *ledger.Writer
	switch {
	case herr != nil:
		runErr = herr
		e.Metrics.HandlerError(comp.Def.Kind, CodeConfig)
	case c.exhausted:
		if c.lastErr != "" {
			runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts; the last could not commit its outcome: %s", c.attempt, c.lastErr))
		} else {
			runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts (the workers running it stopped)", c.attempt))
		}
	default:
		// T10: the credential of a handler that calls back (Kind.Credential),
		// dead with the lease it was minted under and deleted when this run
		// ends. Handlers that run in-process get none (two commits saved).
		if e.kinds.Credential(comp.Def.Kind) {
			now := e.clock.Now()
			if req.Credential, err = auth.MintCredential(ctx, e.pool, c.sess.SID, c.token, c.execID, now.Add(e.credentialTTL())); err != nil {
				return err
			}
			defer func() {
				rctx := context.WithoutCancel(ctx)
				if err := auth.RevokeCredentials(rctx, e.pool, c.sess.SID, c.token, e.clock.Now()); err != nil {
					e.log.Warn("revoke handler credential", "session", c.sess.ID, "err", err)
				}
			}()
		}
		var stop bool
		out, w, runErr, stop, err = e.attempts(ctx, runCtx, c, h, req)
		if err != nil || stop {
			return err
		}
	}
	if w != nil {
		defer w.Rollback(context.WithoutCancel(ctx))
	}
	stopBeat() // the commit is fenced by the lease token; the lease is long enough for it
	select {
	case <-lost:
		e.log.Warn("lease lost; turn not committed", "session", c.sess.ID, "turn", c.turn)
		return nil
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the lease expires and another worker runs the turn
	}
	// Live entries reach subscribers before the commit's notification.
	e.live.flush(liveFlushWait)
	if err := e.commit(ctx, c, w, req.Transcript.Entries(), out, runErr); err != nil {
		if ctx.Err() == nil {
			e.uncommitted(ctx, c, err)
		}
		return err
	}
	return nil
}

// uncommitted notes why a turn's outcome could not commit and gives the
// lease up, so the turn runs again at once (T7) and, when the failure
// repeats until its attempts are spent, fails with that reason rather
// than waiting out the lease each time.
func (e *Executor) uncommitted(ctx context.Context, c *claim, cause error) {
	ctx = context.WithoutCancel(ctx)
	e.log.Error("turn outcome not committed; the turn runs again", "session", c.sess.ID, "turn", c.turn, "err", cause)
	if _, err := e.pool.Exec(ctx, `UPDATE executions SET error = $2 WHERE id = $1`, c.execID, storable(cause.Error())); err != nil {
		return
	}
	_, _ = e.pool.Exec(ctx, `UPDATE sessions SET lease_expires_at = $3 WHERE sid = $1 AND lease_token = $2`,
		c.sess.SID, c.token, e.clock.Now())
}

// attempts runs the handler until it succeeds, fails permanently or uses
// up MaxAttempts (T7). stop reports that the lease was lost before an
// attempt: the turn belongs to another worker now.
//
// Each attempt runs in a transaction of its own (begun when the handler
// first reaches the ledger or a tool): a failed attempt's writes roll back,
// and the successful attempt's writer is returned so the turn commits in it.
func (e *Executor) attempts(ctx, runCtx context.Context, c *claim, h Handler, req *Request) (out *Outcome, w *ledger.Writer, runErr error, stop bool, err error) {
	maxAttempts := e.cfg.MaxAttempts
	if p, ok := h.(AttemptsPolicy); ok && p.MaxAttempts() > 0 {
		maxAttempts = p.MaxAttempts()
	}
	for first := true; ; first = false {
		if !first { // the claim counted the first attempt
			c.attempt++
			// Fenced by the lease: a worker that lost its turn stops here.
			tag, err := e.pool.Exec(ctx, `UPDATE executions x SET attempts = $2 FROM sessions s
				WHERE x.id = $1 AND s.sid = $3 AND s.lease_token = $4`, c.execID, c.attempt, c.sess.SID, c.token)
			if err != nil {
				return nil, nil, nil, false, err
			}
			if tag.RowsAffected() == 0 {
				e.log.Warn("lease lost before an attempt; turn left to its new owner", "session", c.sess.ID, "turn", c.turn)
				return nil, nil, nil, true, nil
			}
		}
		req.Attempt = c.attempt
		req.Transcript.reset(c.attempt)
		w = ledger.NewWriter(e.pool, e.clock.Now)
		if e.EnvFunc != nil {
			req.Env = e.EnvFunc(w, Run{ExecutionID: c.execID, Action: c.comp, SID: c.sess.SID, SessionID: c.sess.ID})
		}
		out, runErr = e.attempt(runCtx, h, req)
		code := ErrorCode(runErr)
		if runErr == nil {
			if verr := out.validate(c.final, c.endsAt != nil); verr != nil {
				runErr, code = Permanent(fmt.Errorf("action_output_invalid: %w", verr)), CodeInvalidOutput
			}
		}
		if runErr == nil {
			return out, w, nil, false, nil
		}
		e.Metrics.HandlerError(c.comp.Def.Kind, code)
		w.Rollback(context.WithoutCancel(ctx))
		if hold := AsHold(runErr); hold != nil && hold.Cause == CauseRefused {
			return out, nil, runErr, false, nil // H1: a refusal is not retried
		}
		if IsPermanent(runErr) || c.attempt >= maxAttempts || runCtx.Err() != nil {
			return out, nil, runErr, false, nil
		}
		if e.sleep(runCtx, e.cfg.Backoff<<(c.attempt-1)) != nil {
			return out, nil, runErr, false, nil
		}
	}
}

// attempt runs the handler once with a deadline, turning a panic into an error.
func (e *Executor) attempt(ctx context.Context, h Handler, req *Request) (out *Outcome, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.TurnTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, Permanent(panicError{r})
		}
	}()
	return h.Run(ctx, req)
}

// heartbeat extends the lease every third of its length; when the lease is
// gone (token moved on) it cancels the run and closes lost.
func (e *Executor) heartbeat(ctx context.Context, c *claim, cancel context.CancelFunc, lost chan<- struct{}) {
	t := time.NewTicker(e.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tag, err := e.pool.Exec(ctx, `UPDATE sessions SET lease_expires_at = $3 WHERE sid = $1 AND lease_token = $2`,
			c.sess.SID, c.token, e.clock.Now().Add(e.cfg.Lease))
		if err != nil {
			continue // transient; the next beat tries again
		}
		if tag.RowsAffected() == 0 {
			close(lost)
			cancel()
			return
		}
	}
}

func (e *Executor) request(ctx context.Context, c *claim, comp *action.Compiled) (*Request, error) {
	views, err := e.views(ctx, c.inputs)
	if err != nil {
		return nil, err
	}
	replayed, err := e.replayed(ctx, c)
	if err != nil {
		return nil, err
	}
	return &Request{
		ActionID: c.sess.ActionID, Version: c.sess.Version, SessionID: c.sess.ID,
		Input: c.sess.Input, State: c.sess.State, Inputs: views, Turn: c.turn, Resume: c.resume, Replayed: replayed,
		Final: c.final, EndsAt: c.endsAt, ExecutionID: c.execID, Spec: Spec{Config: comp.Def.Config, Source: comp.Def.Source},
		Transcript: &Transcript{now: e.clock.Now, attempt: c.attempt, publish: func(attempt int, en Entry) {
			e.live.add(LivePayload(c.sess.SID, LiveEntry{Turn: c.turn, Attempt: attempt, ExecutionID: c.execID, Entry: en}))
		}},
	}, nil
}

// liveFlushWait bounds how long a commit waits for the turn's live
// transcript entries to be published.
const liveFlushWait = 2 * time.Second

// commit records the turn in one transaction (T6), fenced by the lease
// token: state, status, output, transcript and the consumption of inputs all
// commit, or none. A failed execution fails the turn and the session and
// leaves the inputs pending (T7). A session closed meanwhile gets the turn
// CANCELLED and nothing else.
//
// A successful turn commits in its handler's transaction (w), so the
// handler's ledger writes and tool calls commit with it; a failed turn
// commits its record in a fresh transaction.
func (e *Executor) commit(ctx context.Context, c *claim, w *ledger.Writer, transcript []Entry, out *Outcome, runErr error) error {
	if w == nil || runErr != nil {
		if w != nil {
			w.Rollback(ctx)
		}
		w = ledger.NewWriter(e.pool, e.clock.Now)
	}
	tx, err := w.Tx(ctx)
	if err != nil {
		return err
	}
	committed := false
	err = e.record(ctx, tx, c, transcript, out, runErr, &committed)
	if err != nil || !committed {
		w.Rollback(ctx)
		return err
	}
	return w.Commit(ctx)
}

// record writes the turn's outcome in tx; committed reports whether the
// transaction is to commit (false when the lease was taken over).
func (e *Executor) record(ctx context.Context, tx pgx.Tx, c *claim, transcript []Entry, out *Outcome, runErr error, committed *bool) error {
	*committed = true
	return func() error {
		now := e.clock.Now()
		var status session.Status
		var token int64
		clk := session.Clock{}
		if err := tx.QueryRow(ctx, `SELECT status, lease_token, started_at, ends_at FROM sessions WHERE sid = $1 FOR UPDATE`,
			c.sess.SID).Scan(&status, &token, &clk.StartedAt, &clk.EndsAt); err != nil {
			return err
		}
		if token != c.token {
			e.log.Warn("lease taken over; turn not committed", "session", c.sess.ID, "turn", c.turn)
			*committed = false
			return nil
		}
		if err := insertTranscript(ctx, tx, c.execID, transcript); err != nil {
			return err
		}
		if status.Final() {
			if err := session.DropTimer(ctx, tx, c.sess.SID); err != nil {
				return err
			}
			if err := e.finish(ctx, tx, c, now, "CANCELLED", "CANCELLED", nil, "the session was closed while the turn ran"); err != nil {
				return err
			}
			return session.Notice{SIDs: []int64{c.sess.SID}}.Send(ctx, tx)
		}
		if h := AsHold(runErr); h != nil {
			return e.hold(ctx, tx, c, h, now)
		}
		if runErr != nil {
			if err := session.DropTimer(ctx, tx, c.sess.SID); err != nil {
				return err
			}
			// A failed session waits on nothing any more.
			closed, err := tx.Exec(ctx, `UPDATE session_interrupts SET status = 'CLOSED' WHERE sid = $1 AND status = 'PENDING'`, c.sess.SID)
			if err != nil {
				return err
			}
			reason := fmt.Sprintf("execution %s failed: %v", c.execID, runErr)
			if _, err := tx.Exec(ctx, `UPDATE sessions SET status = 'FAILED', reason = $2, closed_at = $3, updated_at = $3,
				next_turn_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE sid = $1`, c.sess.SID, storable(reason), now); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE session_turns SET checkpoint_state = $3, checkpoint_status = 'FAILED', checkpoint_reason = $4
				WHERE sid = $1 AND number = $2`, c.sess.SID, c.turn, nullable(c.sess.State), storable(reason)); err != nil {
				return err
			}
			if err := e.finish(ctx, tx, c, now, "FAILED", "FAILED", nil, storable(runErr.Error())); err != nil {
				return err
			}
			return session.Notice{SIDs: []int64{c.sess.SID}, Interrupts: closed.RowsAffected() > 0}.Send(ctx, tx)
		}
		var reason *string
		if out.Reason != "" {
			reason = &out.Reason
		} else if out.Status == string(session.Waiting) {
			r := waitingReason(len(out.Approvals))
			reason = &r
		}
		// P1, P2: the requests the session now waits on; any other it
		// waited on is no longer awaited.
		approvals, pending, raised, err := recordApprovals(ctx, tx, c, out.Approvals, now)
		if err != nil {
			return err
		}
		var resume jsonvalue.Value
		if out.Status == string(session.Waiting) {
			resume = out.Resume
			if len(resume) == 0 {
				resume = jsonvalue.Value("{}")
			}
		}
		final := session.Status(out.Status).Final()
		if _, err := tx.Exec(ctx, `UPDATE sessions SET state = $2, status = $3, reason = $4, updated_at = $5,
			closed_at = CASE WHEN $6 THEN $5::timestamptz END, lease_owner = NULL, lease_expires_at = NULL, resume = $7 WHERE sid = $1`,
			c.sess.SID, nullable(out.State), out.Status, reason, now, final, nullable(resume)); err != nil {
			return err
		}
		if len(approvals) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE executions SET approvals = $2 WHERE id = $1`, c.execID, approvals); err != nil {
				return err
			}
			// An answer that arrived while the turn ran (to a request it
			// lists again) is already pending: the session goes on to it.
			tag, err := tx.Exec(ctx, `UPDATE sessions SET status = 'OPEN', reason = NULL, next_turn_at = $2
				WHERE sid = $1 AND EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = $1 AND i.status = 'PENDING' AND i.kind = 'COMMAND'
					AND NOT EXISTS (SELECT 1 FROM turn_inputs t WHERE t.sid = $1 AND t.turn = $3 AND t.seq = i.seq))`,
				c.sess.SID, now, c.turn)
			if err != nil {
				return err
			}
			if pending == 0 && tag.RowsAffected() == 0 {
				// Waiting on nothing would leave the session WAITING for good.
				return errors.New("action_output_invalid: the turn reports WAITING, but no request it lists is still waiting for an answer")
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE session_inputs i SET status = 'CONSUMED', turn = $2 FROM turn_inputs t
			WHERE t.sid = $1 AND t.turn = $2 AND i.sid = t.sid AND i.seq = t.seq`, c.sess.SID, c.turn); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE session_turns SET checkpoint_state = $3, checkpoint_status = $4, checkpoint_reason = $5
			WHERE sid = $1 AND number = $2`, c.sess.SID, c.turn, nullable(out.State), out.Status, reason); err != nil {
			return err
		}
		if err := e.finish(ctx, tx, c, now, "COMPLETED", "SUCCEEDED", out.Output, ""); err != nil {
			return err
		}
		if final {
			if err := session.DropTimer(ctx, tx, c.sess.SID); err != nil {
				return err
			}
		}
		due, err := e.dueAfterTurn(ctx, tx, c, clk, now)
		if err != nil {
			return err
		}
		// The row is locked, so every input delivered before this statement is seen.
		// It also sends the commit's notifications (issue 12).
		notice, args := session.Notice{SIDs: []int64{c.sess.SID}, Interrupts: raised}.Returning(5)
		var next *time.Time
		if err := tx.QueryRow(ctx, `UPDATE sessions SET next_turn_at = CASE WHEN status = 'OPEN' AND ($3 OR EXISTS (
				SELECT 1 FROM session_inputs WHERE sid = $1 AND status = 'PENDING' AND starts_turn)) THEN $2::timestamptz END
			WHERE sid = $1 RETURNING next_turn_at, CASE WHEN next_turn_at IS NOT NULL THEN pg_notify($4::text, '') END, `+notice,
			append([]any{c.sess.SID, now, due, session.TurnsChannel}, args...)...).Scan(&next, nil, nil, nil); err != nil {
			return err
		}
		return nil
	}()
}

// dueAfterTurn reports whether the session needs another turn at once
// for reasons that are not pending rows: its end has come (a turn running
// when the end passed finishes as ordinary, then the end applies, E4), or
// a firing of an entry that starts turns came due while the turn ran (C4).
func (e *Executor) dueAfterTurn(ctx context.Context, tx pgx.Tx, c *claim, clk session.Clock, now time.Time) (bool, error) {
	if clk.Ended(now) {
		return true, nil
	}
	comp, err := e.actions.Compiled(ctx, c.sess.ActionID, c.sess.Version)
	if err != nil {
		return false, err
	}
	cs := comp.Session
	if cs == nil || len(cs.Clock) == 0 {
		return false, nil
	}
	taken, err := session.TakenFirings(ctx, tx, []int64{c.sess.SID})
	if err != nil {
		return false, err
	}
	clk.Taken = taken[c.sess.SID]
	for _, f := range clk.Due(cs, now) {
		if f.StartsTurn {
			return true, nil
		}
	}
	return false, nil
}

// finish settles the turn and its execution.
func (e *Executor) finish(ctx context.Context, tx pgx.Tx, c *claim, now time.Time, turnStatus, execStatus string, output jsonvalue.Value, errText string) error {
	c.outcome = execStatus
	if _, err := tx.Exec(ctx, `UPDATE session_turns SET status = $3, finished_at = $4 WHERE sid = $1 AND number = $2`,
		c.sess.SID, c.turn, turnStatus, now); err != nil {
		return err
	}
	var errp *string
	if errText != "" {
		errp = &errText
	}
	_, err := tx.Exec(ctx, `UPDATE executions SET status = $2, output = $3, error = $4, finished_at = $5 WHERE id = $1`,
		c.execID, execStatus, nullable(output), errp, now)
	if turnStatus == "CANCELLED" {
		if _, err := tx.Exec(ctx, `UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL WHERE sid = $1`, c.sess.SID); err != nil {
			return err
		}
	}
	return err
}

func insertTranscript(ctx context.Context, tx pgx.Tx, execID uuid.UUID, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([][]any, len(entries))
	for i, en := range entries {
		rows[i] = []any{execID, en.Seq, en.Kind, []byte(en.Data), en.At}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"transcript_entries"}, []string{"execution_id", "seq", "kind", "data", "at"}, pgx.CopyFromRows(rows))
	return err
}

func nullable(v jsonvalue.Value) []byte {
	if len(v) == 0 {
		return nil
	}
	return v
}

// MaxReasonBytes bounds a stored failure reason or hold explanation; longer
// ones are cut on a character boundary (issue 10, item 4).
const MaxReasonBytes = 2000

// storable makes a handler's reason storable: cleaned and cut to
// MaxReasonBytes (text.Store).
func storable(s string) string { return text.Store(s, MaxReasonBytes) }

package turns

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// DefaultWorkers is how many turns an Executor runs at once unless told:
// enough that one claim leases many sessions and the completer commits
// their turns together (issue 14: 4 workers consumed a third of the inputs
// per second that 16 did, in bench/pipeline on two cores).
const DefaultWorkers = 16

// Config tunes an Executor. Zero fields take the defaults in parentheses.
type Config struct {
	Owner       string        // lease owner name (random)
	Workers     int           // concurrent turns in this process (DefaultWorkers): the claim's slots
	Lease       time.Duration // how long a claim lasts without a heartbeat (30s)
	TurnTimeout time.Duration // deadline of one attempt (5m)
	MaxAttempts int           // attempts per execution before the turn fails (3)
	Backoff     time.Duration // first retry delay, doubled per attempt (200ms)
	Poll        time.Duration // fallback poll when no notification arrives (2s)
	// LiveDelay is how long an attempt runs before its transcript entries
	// are published live as they are added (DefaultLiveDelay; negative: at
	// once); a turn done sooner publishes none (liveGate).
	LiveDelay time.Duration
	// Prices is the model price table (MODEL_PRICES) that prices the
	// turns' model calls against their sessions' spend caps (G8).
	Prices Prices
	// SettleLockWait bounds how long the transaction that commits a batch
	// of finished turns waits for their sessions' row locks
	// (DefaultSettleLockWait); past it, the batch is committed again
	// without the sessions still held, and their turns one by one.
	SettleLockWait time.Duration
}

// DefaultSettleLockWait is Config.SettleLockWait's default: longer than a
// dispatch batch holds the sessions it delivers to (tens of
// milliseconds), far shorter than PostgreSQL's deadlock timeout (1 s).
// Waiting for the batch lets one transaction commit the turns that
// finished meanwhile; skipping their sessions sent each turn to be
// committed alone behind the batch, a disk flush each (issue 14).
const DefaultSettleLockWait = 100 * time.Millisecond

// DefaultLiveDelay is Config.LiveDelay's default: short enough that a
// person watching a model-driven turn sees it working, long enough that
// the short turns of a busy pipeline publish nothing (issue 14).
const DefaultLiveDelay = 200 * time.Millisecond

func (c *Config) defaults() {
	if c.Owner == "" {
		c.Owner = "worker-" + uuid.NewString()[:8]
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
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
	if c.LiveDelay == 0 {
		c.LiveDelay = DefaultLiveDelay
	}
	if c.SettleLockWait <= 0 {
		c.SettleLockWait = DefaultSettleLockWait
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

	// ExecutionsWake, when set before Run, delivers
	// session.ExecutionsChannel notifications: executions of actions
	// without a session block to claim (issue 15). Without it they are
	// looked for at each poll.
	ExecutionsWake <-chan struct{}

	// Metrics, when set, counts turns, handler errors and claim waits
	// (issue 12); Tracer, when set, records a span per turn, the root of a
	// trace of its own, whose id the execution keeps (executions.trace_id).
	Metrics *observe.Metrics
	Tracer  trace.Tracer
	// Notifier announces what claims and turns committed, once committed
	// (issue 14); NewExecutor gives one of its own, the process shares one.
	Notifier *ledger.Notifier

	// sleep waits between retries; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// live publishes running turns' transcript entries (issue 12).
	live *publisher
	// beats keeps the leases of running turns alive.
	beats *heartbeats
	// kick wakes Run's claim loop: a settled session needs another turn.
	kick chan struct{}
	// kickExec wakes it for executions without a session: one settled in
	// a group with a limit, or could not commit (issue 15).
	kickExec chan struct{}
	// completer commits finished turns in batches while Run runs; nil
	// otherwise (RunOnce commits each turn by itself).
	completer *completer
	// versions is what versionReads built, from n cached versions.
	versions struct {
		mu    sync.Mutex
		n     int
		reads session.VersionReads
	}
}

// NewExecutor returns an Executor.
func NewExecutor(pool *pgxpool.Pool, actions *action.Store, kinds *Registry, c clock.Clock, log *slog.Logger, cfg Config) *Executor {
	cfg.defaults()
	e := &Executor{pool: pool, actions: actions, kinds: kinds, clock: c, log: log, cfg: cfg, sleep: sleepCtx,
		live: newPublisher(pool, log), kick: make(chan struct{}, 1), kickExec: make(chan struct{}, 1),
		Notifier: ledger.NewNotifier(pool)}
	e.beats = &heartbeats{e: e, held: map[int64]*beat{}, jobs: map[uuid.UUID]*jobBeat{}}
	return e
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

// maxClaim bounds the sessions one claim leases.
const maxClaim = 128

// Run runs turns until ctx ends, at most Workers at a time; wake delivers
// turn notifications. One loop claims: as many runnable sessions as there
// are free slots, in one claim (three round trips), when woken, at each
// poll, and as slots free up while the last claim found as many as it
// asked for. Each turn runs in a goroutine of its own, and its outcome
// goes to the completer, which commits the outcomes of turns that finish
// together in one transaction. Turns whose handler began a transaction
// (ledger writes, tool calls) commit in it, one by one.
func (e *Executor) Run(ctx context.Context, wake <-chan struct{}) error {
	cctx, stopCompleter := context.WithCancel(context.WithoutCancel(ctx))
	cp := newCompleter(e)
	e.completer = cp
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		cp.run(cctx)
	}()
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		stopCompleter()
		<-completerDone
	}()
	// A slot is held while a turn's handler runs; a turn whose run is over
	// gives its slot back while its outcome commits, so that committing
	// turns (which the completer commits together) never keep the claim
	// loop to one session a claim. Turns still to commit are bounded too.
	slots := e.cfg.Workers
	maxInFlight := max(4*slots, 64)
	freed := make(chan struct{}, maxInFlight)
	ended := make(chan struct{}, maxInFlight)
	poll := time.NewTicker(e.cfg.Poll)
	defer poll.Stop()
	busy, inFlight, look, lookExec := 0, 0, true, true
	var swept time.Time
	// Executions without a session share the slots with turns; when both
	// have work, the one that claimed first last time claims second.
	execFirst := false
	for {
		if execFirst && lookExec {
			lookExec = e.claimRound(ctx, &wg, &busy, &inFlight, slots, maxInFlight, freed, ended)
		}
		if look && busy < slots && inFlight < maxInFlight && ctx.Err() == nil {
			n := min(slots-busy, maxInFlight-inFlight, maxClaim)
			cs, leased, err := e.claim(ctx, n)
			if err != nil && ctx.Err() == nil {
				e.log.Error("claim failed", "err", err)
			}
			for _, c := range cs {
				busy++
				inFlight++
				wg.Add(1)
				go func() {
					var once sync.Once
					release := func() { once.Do(func() { freed <- struct{}{} }) }
					defer func() {
						release()
						ended <- struct{}{}
						wg.Done()
					}()
					if err := e.run(context.WithValue(ctx, releaseKey{}, release), c); err != nil && ctx.Err() == nil {
						e.log.Error("turn failed to run", "session", c.sess.ID, "turn", c.turn, "err", err)
					}
				}()
			}
			// A full claim may have left more: claim again as slots free.
			look = err == nil && leased == n
			if err == nil && leased == 0 && time.Since(swept) >= e.cfg.Poll {
				swept = time.Now()
				if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
					e.log.Error("sweep failed", "err", err)
				}
			}
		}
		if !execFirst && lookExec {
			lookExec = e.claimRound(ctx, &wg, &busy, &inFlight, slots, maxInFlight, freed, ended)
		}
		execFirst = !execFirst
		// Wait for something to happen, then take in everything else that
		// has happened meanwhile before claiming again: slots that freed up
		// while the last claim ran are claimed for together, not one claim
		// each.
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			look = true
		case <-e.kick:
			look = true
		case <-e.ExecutionsWake:
			lookExec = true
		case <-e.kickExec:
			lookExec = true
		case <-poll.C:
			look, lookExec = true, true
		case <-freed:
			busy--
		case <-ended:
			inFlight--
		}
	drain:
		for {
			select {
			case <-freed:
				busy--
			case <-ended:
				inFlight--
			default:
				break drain
			}
		}
	}
}

// claimRound claims executions without a session for the free slots and
// runs each in a goroutine of its own, as Run does turns. It reports
// whether to claim again as slots free up (the claim was full), or,
// with no free slot, to keep looking.
func (e *Executor) claimRound(ctx context.Context, wg *sync.WaitGroup, busy, inFlight *int, slots, maxInFlight int,
	freed, ended chan struct{}) bool {
	if *busy >= slots || *inFlight >= maxInFlight || ctx.Err() != nil {
		return true
	}
	n := min(slots-*busy, maxInFlight-*inFlight, maxClaim)
	js, err := e.claimJobs(ctx, n)
	if err != nil && ctx.Err() == nil {
		e.log.Error("claim executions failed", "err", err)
	}
	for _, j := range js {
		*busy++
		*inFlight++
		wg.Add(1)
		go func() {
			var once sync.Once
			release := func() { once.Do(func() { freed <- struct{}{} }) }
			defer func() {
				release()
				ended <- struct{}{}
				wg.Done()
			}()
			if err := e.runJob(context.WithValue(ctx, releaseKey{}, release), j); err != nil && ctx.Err() == nil {
				e.log.Error("execution failed to run", "execution", j.id, "err", err)
			}
		}()
	}
	return err == nil && len(js) == n
}

// releaseKey carries, in a turn's context under Run, the function that
// gives the turn's worker slot back once its run is over.
type releaseKey struct{}

// releaseSlot gives ctx's turn's worker slot back (once; a no-op outside Run).
func releaseSlot(ctx context.Context) {
	if f, ok := ctx.Value(releaseKey{}).(func()); ok {
		f()
	}
}

func nudge(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// credentialTTL bounds a handler credential's life (T10): every attempt
// running to its deadline with the backoff between them, plus one lease.
// The credential normally dies sooner, with the turn's lease.
func (e *Executor) credentialTTL() time.Duration {
	return time.Duration(e.cfg.MaxAttempts)*e.cfg.TurnTimeout + e.cfg.Backoff<<e.cfg.MaxAttempts + e.cfg.Lease
}

// Interrupt ends the run of session sid's turn early when this executor
// runs it (G9): its handler's context is cancelled, and the turn's
// settlement, which finds the interrupt session.Store.Interrupt stored,
// commits nothing of it. The server calls it for each notification on
// session.InterruptsChannel; it reports whether the turn ran here.
func (e *Executor) Interrupt(sid int64) bool { return e.beats.interrupt(sid) }

// RunOnce claims one runnable session and runs its turn to the end,
// committing it by itself. It reports whether it found work. With nothing
// to run it settles orphaned turns (see Sweep).
func (e *Executor) RunOnce(ctx context.Context) (bool, error) {
	cs, _, err := e.claim(ctx, 1)
	if err != nil {
		return false, err
	}
	if len(cs) == 0 {
		_, err := e.Sweep(ctx)
		return false, err
	}
	return true, e.run(ctx, cs[0])
}

// Sweep settles turns left RUNNING by a worker that stopped after their
// session was closed: once the lease has expired, the turn and its execution
// become CANCELLED (T8). It returns how many it settled.
func (e *Executor) Sweep(ctx context.Context) (int, error) {
	now := e.clock.Now()
	rows, err := e.pool.Query(ctx, `
		WITH t AS (
			UPDATE session_turns t SET status = $3, finished_at = $1
			  FROM sessions s
			 WHERE t.status = 'RUNNING' AND s.sid = t.sid AND s.status IN ($5, $6, $7)
			   AND (s.lease_expires_at IS NULL OR s.lease_expires_at <= $1)
			RETURNING t.execution_id)
		UPDATE executions x SET status = $4, finished_at = $1, error = $8
		  FROM t WHERE x.id = t.execution_id
		RETURNING x.sid, (SELECT pg_notify($2, pg_current_xact_id()::text || ':' || x.sid::text))`, now, session.SessionsChannel,
		TurnCancelled, ExecCancelled, session.Completed, session.Failed, session.Cancelled, cancelledWhileRunning)
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
	defer cancel()
	lost := e.beats.add(c.lease, cancel)
	// stopBeat ends the heartbeat and waits for a beat in flight: it must
	// not extend the lease after the commit has cleared it.
	stopBeat := func() { e.beats.remove(c.lease) }
	defer stopBeat()
	f, done, err := e.execute(ctx, runCtx, c)
	defer done()
	c.status.stop() // no live status write lands after the commit (G8)
	committed := false
	defer func() {
		if c.live == nil {
			return
		}
		if committed {
			c.live.drop() // the committed transcript has what it held
		} else {
			c.live.release() // nothing of it commits: every entry written is seen
		}
	}()
	if err != nil || f == nil {
		return err
	}
	if f.w != nil {
		defer f.w.Rollback(context.WithoutCancel(ctx))
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
	// The handler is done: its slot goes to the next claim while the
	// outcome commits.
	releaseSlot(ctx)
	// Live entries, if the turn published any, reach subscribers before
	// the commit's notification.
	if c.live.stop() {
		e.live.flush(liveFlushWait)
	}
	if err := e.commit(ctx, f); err != nil {
		if ctx.Err() == nil {
			e.uncommitted(ctx, c, err)
		}
		return err
	}
	committed = true
	return nil
}

// execute runs c's handler with retries (T7) and returns what the turn is
// to commit; nil when the lease was lost before an attempt (the turn is
// another worker's now). done releases what the run held (its handler
// credential): call it once the turn is settled.
func (e *Executor) execute(ctx, runCtx context.Context, c *claim) (_ *finished, done func(), err error) {
	done = func() {}
	comp := c.comp
	h, herr := e.kinds.Handler(comp.Def.Kind, Spec{Config: comp.Def.Config, Source: comp.Def.Source})
	req, err := e.request(ctx, c, comp)
	if err != nil {
		return nil, done, err
	}
	f := &finished{c: c}
	switch {
	case herr != nil:
		f.runErr = herr
		e.Metrics.HandlerError(comp.Def.Kind, CodeConfig)
	case c.exhausted:
		if c.lastErr != "" {
			f.runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts; the last could not commit its outcome: %s", c.attempt, c.lastErr))
		} else {
			f.runErr = Permanent(fmt.Errorf("the execution did not finish in %d attempts (the workers running it stopped)", c.attempt))
		}
	default:
		// T10: the credential of a handler that calls back (Kind.Credential),
		// dead with the lease it was minted under and deleted when this run
		// ends. Handlers that run in-process get none (two commits saved).
		if e.kinds.Credential(comp.Def.Kind) {
			now := e.clock.Now()
			if req.Credential, err = auth.MintCredential(ctx, e.pool, c.sess.SID, c.lease.Token, c.execID, now.Add(e.credentialTTL())); err != nil {
				return nil, done, err
			}
			done = func() {
				rctx := context.WithoutCancel(ctx)
				if err := auth.RevokeCredentials(rctx, e.pool, c.sess.SID, c.lease.Token, e.clock.Now()); err != nil {
					e.log.Warn("revoke handler credential", "session", c.sess.ID, "err", err)
				}
			}
		}
		if berr := req.Meter.Allow("", ""); berr != nil {
			// G8: the session spent its cap: the turn is held before it runs.
			req.Transcript.Add("note", map[string]any{"budget": berr.Error()})
			f.runErr = berr
			break
		}
		var stop bool
		f.out, f.w, f.runErr, stop, err = e.attempts(ctx, runCtx, c, h, req)
		if err != nil || stop {
			return nil, done, err
		}
	}
	f.transcript = req.Transcript.Entries()
	f.usage = req.Meter.Usage()
	return f, done, nil
}

// commit commits a finished turn (T6): through the completer, batched with
// others, when Run runs and the turn began no transaction of its own;
// otherwise (or when the completer leaves it out) by itself.
func (e *Executor) commit(ctx context.Context, f *finished) error {
	if f.w == nil && e.completer != nil {
		v, err := e.completer.submit(ctx, f)
		switch {
		case err != nil:
			return err
		case v == committed:
			return nil
		case v == leaseLost:
			return nil
		}
	}
	ok, err := e.settleOne(ctx, f)
	if err == nil && !ok {
		e.log.Warn("lease taken over; turn not committed", "session", f.c.sess.ID, "turn", f.c.turn)
	}
	return err
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
	if session.Release(ctx, e.pool, c.lease, e.clock.Now()) == nil {
		nudge(e.kick) // claim it again now: no delivery woke anyone for a leased session
	}
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
				WHERE x.id = $1 AND s.sid = $3 AND s.lease_token = $4`, c.execID, c.attempt, c.lease.SID, c.lease.Token)
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
		c.live.begin() // an earlier attempt's entries, not committed, go out
		w = ledger.NewWriter(e.pool, e.clock.Now)
		var touched atomic.Bool
		if e.EnvFunc != nil {
			req.Env = touchedEnv{e.EnvFunc(w, Run{ExecutionID: c.execID, Action: c.comp, SID: c.sess.SID, SessionID: c.sess.ID}), &touched}
		}
		out, runErr = e.attempt(runCtx, h, req)
		code := ErrorCode(runErr)
		if runErr == nil {
			if verr := out.validate(c.final, c.endsAt != nil); verr != nil {
				runErr, code = Permanent(fmt.Errorf("%s: %w", FailOutputInvalid, verr)), CodeInvalidOutput
			}
		}
		if runErr == nil {
			if !touched.Load() {
				w = nil // it began no transaction: the turn commits with others
			}
			return out, w, nil, false, nil
		}
		e.Metrics.HandlerError(c.comp.Def.Kind, code)
		w.Rollback(context.WithoutCancel(ctx))
		if hold := AsHold(runErr); hold != nil && !hold.Retried() {
			return out, nil, runErr, false, nil // H1, G8: a refusal or a spent budget is not retried
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

func (e *Executor) request(ctx context.Context, c *claim, comp *action.Compiled) (*Request, error) {
	c.live = newLiveGate(e.live, e.cfg.LiveDelay)
	c.status = newLiveStatus(ctx, func(ctx context.Context, line string) {
		if err := session.SetAmbient(ctx, e.pool, c.lease, line); err != nil && ctx.Err() == nil {
			e.log.Warn("ambient status not written", "session", c.sess.ID, "turn", c.turn, "err", err)
		}
	})
	views, err := e.views(ctx, c.inputs, c.events)
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
		Meter: NewMeter(e.cfg.Prices, c.sess.MaxUSD, c.sess.Spent.CostUSD), ReportStatus: c.status.report,
		Transcript: &Transcript{now: e.clock.Now, attempt: c.attempt, publish: func(attempt int, en Entry) {
			c.live.add(c.sess.SID, LiveEntry{Turn: c.turn, Attempt: attempt, ExecutionID: c.execID, Entry: en})
		}},
	}, nil
}

// liveFlushWait bounds how long a commit waits for the turn's live
// transcript entries to be published.
const liveFlushWait = 2 * time.Second

// MaxReasonBytes bounds a stored failure reason or hold explanation; longer
// ones are cut on a character boundary (issue 10, item 4).
const MaxReasonBytes = 2000

// storable makes a handler's reason storable: cleaned and cut to
// MaxReasonBytes (text.Store).
func storable(s string) string { return text.Store(s, MaxReasonBytes) }

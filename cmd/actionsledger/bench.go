package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
)

// benchCmd measures three figures on one database: the raw single-row
// commit rate of the PostgreSQL server (the ceiling), the end-to-end rate
// from putValue to the turn that takes the entry, and the latency from an
// event's commit to its turn's commit, under saturation and at a paced rate.
type benchCmd struct {
	database
	Conns         []int         `default:"4,1" help:"Connection counts of the raw INSERT runs."`
	Duration      time.Duration `default:"3s" help:"Length of each raw INSERT run."`
	Accounts      int           `default:"20" help:"Accounts (sessions) the entries spread over."`
	Entries       int           `default:"5000" help:"Entries written as fast as possible for the end-to-end figure."`
	Writers       int           `default:"8" help:"Goroutines calling PutValue."`
	Workers       int           `default:"4" help:"Concurrent turns (executor workers)."`
	WriterPool    string        `default:"service" enum:"service,own" help:"Pool the writers' PutValue uses: the service's (as GraphQL putValue does) or one of their own with a connection per writer."`
	PacedRate     int           `default:"100" help:"Entries per second of the paced latency pass (0 skips it)."`
	PacedDuration time.Duration `default:"5s" help:"Length of the paced latency pass."`
	Timeout       time.Duration `default:"60s" help:"Longest wait for a pass's entries to be taken by turns."`
}

func (c *benchCmd) Run(ctx context.Context, log *slog.Logger) error {
	if c.Accounts < 1 || c.Entries < 1 || c.Writers < 1 || c.Duration <= 0 {
		return errors.New("bench: --accounts, --entries, --writers and --duration must be positive")
	}
	began := time.Now()
	rep := &benchReport{out: os.Stdout}
	for _, n := range c.Conns {
		rate, count, err := insertCeiling(ctx, c.DatabaseURL, n, c.Duration)
		if err != nil {
			return err
		}
		rep.say("1. raw INSERT, %d conn(s): %d autocommit single-row INSERTs into a scratch table in %s: %.0f commits/s", n, count, c.Duration, rate)
		rep.row(fmt.Sprintf("raw INSERT commits/s, %d conn(s)", n), fmt.Sprintf("%.0f/s", rate),
			fmt.Sprintf("%d single-row autocommit INSERTs in %s", count, c.Duration))
	}

	rig, err := newBenchRig(ctx, c.DatabaseURL, c, log)
	if err != nil {
		return err
	}
	defer func() { _ = rig.stop() }()
	sat, err := rig.pass(ctx, c.Entries, c.Writers, 0, c.Timeout)
	if err != nil {
		return err
	}
	rep.say("2. end-to-end: %d entries over %d accounts by %d writers (PutValue, %s pool; %d turn workers):", sat.n, c.Accounts, c.Writers, c.WriterPool, c.Workers)
	rep.say("   writes took %.2fs (%.0f putValue commits/s); every entry CONSUMED after %.2fs (polled every 20ms): %.0f events/s; %d turns, %.1f inputs per turn",
		sat.writes.Seconds(), sat.writeRate(), sat.done.Seconds(), sat.e2eRate(), sat.turns, sat.perTurn())
	rep.row(fmt.Sprintf("putValue commits/s, %d writers", c.Writers), fmt.Sprintf("%.0f/s", sat.writeRate()),
		fmt.Sprintf("%d PutValue calls in %.2fs", sat.n, sat.writes.Seconds()))
	rep.row("end-to-end events/s", fmt.Sprintf("%.0f/s", sat.e2eRate()),
		fmt.Sprintf("first write -> all %d CONSUMED in %.2fs; %d turns", sat.n, sat.done.Seconds(), sat.turns))
	rep.latency(fmt.Sprintf("saturated (the same %d entries)", sat.n), "saturated", sat)

	if c.PacedRate > 0 && c.PacedDuration > 0 {
		n := int(float64(c.PacedRate) * c.PacedDuration.Seconds())
		paced, err := rig.pass(ctx, n, c.Writers, c.PacedRate, c.Timeout)
		if err != nil {
			return err
		}
		rep.latency(fmt.Sprintf("paced at %d/s for %s (%d entries, written in %.2fs, %d turns, %.1f inputs per turn)",
			c.PacedRate, c.PacedDuration, paced.n, paced.writes.Seconds(), paced.turns, paced.perTurn()), fmt.Sprintf("paced %d/s", c.PacedRate), paced)
	}
	if err := rig.stop(); err != nil {
		return fmt.Errorf("bench: service: %w", err)
	}
	rep.table()
	rep.say("bench: done in %.1fs", time.Since(began).Seconds())
	return nil
}

// benchReport prints figures as they are measured and collects the final table.
type benchReport struct {
	out  io.Writer
	rows [][3]string // figure, result, how measured
}

func (r *benchReport) say(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }

func (r *benchReport) row(figure, result, how string) {
	r.rows = append(r.rows, [3]string{figure, result, how})
}

func (r *benchReport) latency(long, short string, p passResult) {
	r.say("3. latency, %s:", long)
	r.say("   event commit_time -> turn finished_at: %s", p.commitLat)
	r.say("   putValue return   -> turn finished_at: %s", p.ackLat)
	r.say("   stages, p50/p99 ms: dispatch %s, wait for a claim %s, turn %s", p.dispatch.short(), p.queue.short(), p.run.short())
	r.say("   service pool (%d conns): %d acquires waited for a connection, %.2fs in all", p.poolSize, p.poolWaits, p.poolWait.Seconds())
	r.row("latency commit->turn, "+short, p.commitLat.String(), "events.commit_time -> session_turns.finished_at")
	r.row("latency ack->turn, "+short, p.ackLat.String(), "PutValue return -> session_turns.finished_at")
}

func (r *benchReport) table() {
	fmt.Fprintln(r.out)
	tw := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tresult\tmeasured as")
	for _, row := range r.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row[0], row[1], row[2])
	}
	_ = tw.Flush()
}

// insertCeiling runs autocommit single-row INSERTs into a scratch table from
// conns connections for d and returns commits per second and the count.
// Connections are opened before the clock starts; the table is dropped after.
func insertCeiling(ctx context.Context, dsn string, conns int, d time.Duration) (float64, int64, error) {
	if conns < 1 {
		return 0, 0, fmt.Errorf("bench: --conns: %d is not a connection count", conns)
	}
	pool, err := newPool(ctx, dsn, conns)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	table := "bench_scratch_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, data jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, 0, fmt.Errorf("bench: scratch table: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(dctx, `DROP TABLE `+table)
	}()
	held := make([]*pgxpool.Conn, conns)
	for i := range held {
		if held[i], err = pool.Acquire(ctx); err != nil {
			for _, c := range held[:i] {
				c.Release()
			}
			return 0, 0, err
		}
	}
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	data := []byte(`{"account_id":"00000000-0000-0000-0000-000000000000","amount":12345}`)
	start := time.Now()
	deadline := start.Add(d)
	for _, conn := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Release()
			for time.Now().Before(deadline) {
				if _, err := conn.Exec(ctx, `INSERT INTO `+table+` (data) VALUES ($1)`, data); err != nil {
					errs <- err
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, fmt.Errorf("bench: insert: %w", err)
	}
	n := count.Load()
	return float64(n) / elapsed.Seconds(), n, nil
}

// benchRig is the service running in process with the example monitor and
// its account sessions open, plus the bench's own small pool for polls and
// statistics (so measuring never takes a connection from the service).
type benchRig struct {
	app      *server.App
	pool     *pgxpool.Pool // the bench's own
	writer   *ledger.Store // the service's, or one over a pool of the writers' own
	closers  []func()
	stopApp  func() error
	accounts []string
	sids     []int64
}

func newBenchRig(ctx context.Context, dsn string, c *benchCmd, log *slog.Logger) (_ *benchRig, err error) {
	r := &benchRig{}
	defer func() {
		if err != nil {
			_ = r.stop()
		}
	}()
	if r.pool, err = newPool(ctx, dsn, 2); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.pool.Close)
	if r.app, r.stopApp, err = startApp(ctx, server.Config{DatabaseURL: dsn, Workers: c.Workers}, observe.AtLeast(log, slog.LevelWarn)); err != nil {
		return nil, err
	}
	r.writer = r.app.Ledger
	if c.WriterPool == "own" {
		wp, err := newPool(ctx, dsn, c.Writers)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, wp.Close)
		r.writer = ledger.NewStore(wp, r.app.Clock)
	}
	return r, r.setup(ctx, c.Accounts)
}

// stop stops the service and closes the pools; calling it again is harmless.
func (r *benchRig) stop() error {
	var err error
	if r.stopApp != nil {
		err = r.stopApp()
	}
	for _, c := range r.closers {
		c()
	}
	return err
}

func newPool(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// setup creates the monitor with the seed's CreateMonitor mutation and opens
// the accounts, waiting until each has its session.
func (r *benchRig) setup(ctx context.Context, accounts int) error {
	actionID := uuid.New()
	if _, err := createMonitor(ctx, gqlClient{h: r.app.Handler()}, actionID); err != nil {
		return err
	}
	r.accounts = make([]string, accounts)
	for i := range r.accounts {
		r.accounts[i] = uuid.NewString()
		v := jsonvalue.MustEncode(map[string]any{"account_id": r.accounts[i]})
		if _, err := r.app.Ledger.PutValue(ctx, "account", r.accounts[i], v, ""); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.sids = r.sids[:0]
		rows, err := r.pool.Query(ctx, `SELECT sid FROM sessions WHERE action_id = $1`, actionID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var sid int64
			if err := rows.Scan(&sid); err != nil {
				rows.Close()
				return err
			}
			r.sids = append(r.sids, sid)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(r.sids) == accounts {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d of %d account sessions started", len(r.sids), accounts)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// passResult is one pass's measurements.
type passResult struct {
	n         int
	writes    time.Duration // first write start -> last write returned
	done      time.Duration // first write start -> every entry CONSUMED
	turns     int           // turns that took the pass's entries
	commitLat latencies     // events.commit_time -> session_turns.finished_at
	ackLat    latencies     // PutValue returned -> session_turns.finished_at
	// commitLat in stages: commit_time -> delivered_at (dispatcher),
	// delivered_at -> turn started_at (waiting for a claim), started_at -> finished_at (turn)
	dispatch, queue, run latencies
	// the service pool during the pass: acquires that had to wait, and for how long in all
	poolWaits int64
	poolWait  time.Duration
	poolSize  int32
}

func (p passResult) stages() string {
	return fmt.Sprintf("p50/p99 ms: dispatch %s, wait for claim %s, turn %s", p.dispatch.short(), p.queue.short(), p.run.short())
}

func (p passResult) writeRate() float64 { return float64(p.n) / p.writes.Seconds() }
func (p passResult) e2eRate() float64   { return float64(p.n) / p.done.Seconds() }
func (p passResult) perTurn() float64   { return float64(p.n) / float64(max(p.turns, 1)) }

// pass writes n entries round-robin over the accounts from writers
// goroutines, as fast as they go (rate 0) or paced at rate per second, and
// waits until a turn has taken each of them.
func (r *benchRig) pass(ctx context.Context, n, writers, rate int, timeout time.Duration) (passResult, error) {
	res := passResult{n: n}
	base, err := r.consumed(ctx)
	if err != nil {
		return res, err
	}
	pool0 := r.app.Pool.Stat()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &entryWriter{store: r.writer, accounts: r.accounts, ids: make([]uuid.UUID, n), acks: make([]time.Time, n), start: time.Now()}
	done := make(chan error, 1)
	go func() {
		err := w.run(ctx, writers, rate)
		if err != nil {
			cancel() // stop waiting for entries that will not come
		}
		done <- err
	}()
	res.done, err = r.awaitConsumed(ctx, base+int64(n), w.start, timeout)
	if err != nil {
		cancel()
	}
	if werr := <-done; werr != nil {
		return res, fmt.Errorf("bench: PutValue: %w", werr)
	}
	if err != nil {
		return res, err
	}
	res.writes = time.Duration(w.last.Load())
	pool1 := r.app.Pool.Stat()
	res.poolWaits = pool1.EmptyAcquireCount() - pool0.EmptyAcquireCount()
	res.poolWait = pool1.EmptyAcquireWaitTime() - pool0.EmptyAcquireWaitTime()
	res.poolSize = pool1.MaxConns()
	return res, r.latency(ctx, &res, w.ids, w.acks)
}

// entryWriter writes entries and records their event ids and when each
// PutValue returned.
type entryWriter struct {
	store    *ledger.Store
	accounts []string
	ids      []uuid.UUID
	acks     []time.Time
	start    time.Time
	last     atomic.Int64 // latest return, as a duration since start
}

// run writes len(ids) entries from writers goroutines and returns once all
// have returned: at once (rate 0) or one every 1/rate on a schedule that does
// not drift. The first error cancels the rest.
func (w *entryWriter) run(ctx context.Context, writers, rate int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(w.ids)
	jobs := make(chan int, n)
	go func() {
		defer close(jobs)
		for i := range n {
			if rate > 0 && sleepCtx(ctx, time.Until(w.start.Add(time.Duration(i)*time.Second/time.Duration(rate)))) != nil {
				return
			}
			jobs <- i
		}
	}()
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := w.put(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (w *entryWriter) put(ctx context.Context, i int) error {
	v := jsonvalue.MustEncode(map[string]any{"account_id": w.accounts[i%len(w.accounts)], "amount": 100 + i%90000})
	kv, err := w.store.PutValue(ctx, "entry", uuid.NewString(), v, "")
	if err != nil {
		return err
	}
	w.ids[i], w.acks[i] = kv.EventID, time.Now()
	since := int64(w.acks[i].Sub(w.start))
	for {
		old := w.last.Load()
		if since <= old || w.last.CompareAndSwap(old, since) {
			return nil
		}
	}
}

// awaitConsumed polls the CONSUMED count every 20ms until it reaches want
// and returns the time since start it took.
func (r *benchRig) awaitConsumed(ctx context.Context, want int64, start time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := start.Add(timeout)
	for {
		got, err := r.consumed(ctx)
		if err != nil {
			return 0, err
		}
		if got >= want {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: after %s, %d entries were still not CONSUMED", timeout, want-got)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// consumed counts the account sessions' CONSUMED entry inputs.
func (r *benchRig) consumed(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM session_inputs
		WHERE sid = ANY($1) AND status = 'CONSUMED' AND triggers = '{entry}'`, r.sids).Scan(&n)
	return n, err
}

// latency joins each written event to the turn that took it and fills in
// the pass's latencies and turn count.
func (r *benchRig) latency(ctx context.Context, res *passResult, ids []uuid.UUID, acks []time.Time) error {
	rows, err := r.pool.Query(ctx, `
		SELECT e.id, e.commit_time, i.delivered_at, t.started_at, t.finished_at, i.sid, i.turn
		  FROM events e
		  JOIN session_inputs i ON i.event_id = e.id AND i.status = 'CONSUMED'
		  JOIN session_turns t ON t.sid = i.sid AND t.number = i.turn
		 WHERE e.id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("bench: latency: %w", err)
	}
	defer rows.Close()
	ack := make(map[uuid.UUID]time.Time, len(ids))
	for i, id := range ids {
		ack[id] = acks[i]
	}
	type turnKey struct {
		sid  int64
		turn int
	}
	turnSet := map[turnKey]bool{}
	var fromCommit, fromAck, dispatch, queue, run []time.Duration
	for rows.Next() {
		var id uuid.UUID
		var committed, delivered, started, finished time.Time
		var k turnKey
		if err := rows.Scan(&id, &committed, &delivered, &started, &finished, &k.sid, &k.turn); err != nil {
			return err
		}
		turnSet[k] = true
		fromCommit = append(fromCommit, finished.Sub(committed))
		fromAck = append(fromAck, finished.Sub(ack[id]))
		dispatch = append(dispatch, delivered.Sub(committed))
		queue = append(queue, started.Sub(delivered))
		run = append(run, finished.Sub(started))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(fromCommit) != len(ids) {
		return fmt.Errorf("bench: latency: %d of %d entries joined to a turn", len(fromCommit), len(ids))
	}
	res.turns = len(turnSet)
	res.commitLat, res.ackLat = newLatencies(fromCommit), newLatencies(fromAck)
	res.dispatch, res.queue, res.run = newLatencies(dispatch), newLatencies(queue), newLatencies(run)
	return nil
}

// latencies are a sample's nearest-rank percentiles.
type latencies struct{ p50, p90, p99, max time.Duration }

func newLatencies(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return latencies{at(0.50), at(0.90), at(0.99), ds[len(ds)-1]}
}

func (l latencies) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("p50 %s / p90 %s / p99 %s / max %s ms", ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max))
}

func (l latencies) short() string {
	return fmt.Sprintf("%.1f/%.1f", float64(l.p50.Microseconds())/1000, float64(l.p99.Microseconds())/1000)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/examples"
)

// monitorOp is the example monitor, the seed's CreateMonitor (examples/).
var monitorOp = examples.CreateMonitor

// runPrefix names the folder of a run under os.TempDir(); keptPrefix the
// folder a run with violations (or Config.KeepLogs) leaves behind: its
// logs, and a pg_dump when it failed.
const (
	runPrefix  = "actionsledger-chaos-run-"
	keptPrefix = "actionsledger-chaos-logs-"
	pidFile    = "runner.pid"
)

// Report is the outcome of a run: its figures and the invariants broken.
type Report struct {
	Seed       int64
	Config     Config
	Figures    RunFigures
	Violations []Violation
	// Kept is the folder holding the logs (and, after a violation, a
	// pg_dump) of the run; "" when they were removed.
	Kept string
}

// RunFigures are what a run did and saw.
type RunFigures struct {
	Attempted, Acked  int            // writes attempted, acknowledged
	Retried           int            // writes that needed more than one request
	RetryAttempts     int            // requests sent again, in all
	RetryCauses       map[string]int // those requests by what made them fail
	Accounts, Entries int            // account writes, entry inserts attempted
	Updates           int            // entry updates attempted
	Kills             map[string]int // kill -9s by process
	KillsSkipped      int            // kills that found their process already down
	PGRestarts        int            // PostgreSQL crash restarts
	FailedStarts      int            // process starts that exited before they were up
	Convergence       time.Duration  // load end to settled (every process up, all dispatched and taken)
	Load, Total       time.Duration  // the load's length, the whole run's
	DB                DBFigures
}

// Run performs one chaos run (issue 10): a private cluster, two serve
// replicas and a worker, the load under kills and PostgreSQL crash restarts,
// then the invariants. It returns the report, whose Violations are empty
// when the run passed, or an error when the run itself could not be carried
// out (no PostgreSQL binaries, a process that never starts, a cancelled
// ctx). Progress lines go to cfg.Out as the run goes; everything it started
// is stopped and its folder removed before Run returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, began: time.Now(), procs: map[string]*proc{}}
	r.say("seed %d (replay: CHAOS_SEED=%d make chaos)", cfg.Seed, cfg.Seed)
	if r.pgbin, err = findPGBin(cfg.PGBin); err != nil {
		return nil, err
	}
	if r.bin, err = filepath.Abs(cfg.Bin); err != nil {
		return nil, err
	}
	if _, err := os.Stat(r.bin); err != nil {
		return nil, fmt.Errorf("the actionsledger binary: %w (make build)", err)
	}
	r.sweepStale()
	if r.dir, err = os.MkdirTemp("", runPrefix+"*"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(r.dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	rep = &Report{Seed: cfg.Seed, Config: cfg}
	defer func() { r.cleanup(rep, err != nil && ctx.Err() == nil) }()
	if err := r.setUp(ctx); err != nil {
		return rep, err
	}
	if err := r.chaos(ctx, rep); err != nil {
		return rep, err
	}
	r.stopProcs()
	if err := r.check(ctx, rep); err != nil {
		return rep, err
	}
	rep.Figures.Total = time.Since(r.began)
	return rep, nil
}

// run is the state of one Run.
type run struct {
	cfg        Config
	began      time.Time
	bin, pgbin string
	dir        string
	pg         *cluster
	url        string
	procs      map[string]*proc
	order      []*proc
	stopProcs  func()
	client     *client
	actions    []uuid.UUID
	expect     Expect
	mu         sync.Mutex // serialises progress lines
}

// say prints a progress line with the time since the run began.
func (r *run) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.cfg.Out, "[%6.1fs] %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// setUp starts the cluster, migrates, starts the processes and creates the
// two monitor actions.
func (r *run) setUp(ctx context.Context) error {
	var err error
	r.pg, err = newCluster(ctx, r.pgbin, r.dir)
	if err != nil {
		return err
	}
	r.say("postgres (%s) on 127.0.0.1:%d, data in %s", r.pgbin, r.pg.port, r.pg.data)
	if err := r.pg.createDB(ctx, dbName); err != nil {
		return err
	}
	r.url = r.pg.URL(dbName)
	migrate := exec.CommandContext(ctx, r.bin, "migrate")
	migrate.Env = env(r.url, r.cfg.Lease)
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w\n%s", err, out)
	}
	logs := filepath.Join(r.dir, "logs")
	var urls []string
	for _, name := range []string{ServeA, ServeB} {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		urls = append(urls, "http://"+addr+"/graphql")
		r.addProc(newProc(name, r.bin, filepath.Join(logs, name+".log"), env(r.url, r.cfg.Lease, "ADDR="+addr), "http://"+addr+"/healthz", "serve"))
	}
	r.addProc(newProc(Worker, r.bin, filepath.Join(logs, Worker+".log"), env(r.url, r.cfg.Lease), "", "worker"))
	r.client = newClient(urls)

	pctx, cancel := context.WithCancel(context.Background()) // stopped by stopProcs, not by ctx
	var wg sync.WaitGroup
	for _, p := range r.order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.supervise(pctx); err != nil {
				r.say("%s: %v", p.name, err)
			}
		}()
	}
	var once sync.Once
	r.stopProcs = func() { once.Do(func() { cancel(); wg.Wait() }) }
	for _, p := range r.order {
		if err := p.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	r.say("up: %s, %s (%s), %s", ServeA, ServeB, strings.Join(urls, ", "), Worker)

	slow := strings.Replace(monitorOp, "sleep_ms: 0", "sleep_ms: 50", 1)
	slow = strings.Replace(slow, `name: "early-fraud-detector"`, `name: "early-fraud-detector-slow"`, 1)
	if slow == monitorOp {
		return errors.New("monitor.graphql no longer has sleep_ms: 0 and its name to vary")
	}
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 2))
	for _, op := range []string{monitorOp, slow} {
		id, _ := uuid.NewRandomFromReader(rngReader{rng})
		if err := r.client.post(ctx, op, map[string]any{"id": id}, nil); err != nil {
			return fmt.Errorf("create the monitor action: %w", err)
		}
		r.actions = append(r.actions, id)
	}
	r.say("monitor actions %s (echo) and %s (echo, 50ms turns)", r.actions[0], r.actions[1])
	return nil
}

func (r *run) addProc(p *proc) {
	r.procs[p.name] = p
	r.order = append(r.order, p)
}

// env is a process's environment: ours, then its settings (later wins).
func env(url string, lease time.Duration, extra ...string) []string {
	return append(append(os.Environ(), "DATABASE_URL="+url, "TURN_LEASE="+lease.String(), "LOG_LEVEL=info", "AUTH=off"), extra...)
}

// chaos runs the load and the fault schedule side by side, then waits for
// the system to settle.
func (r *run) chaos(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	faults := Schedule(rand.New(rand.NewPCG(uint64(cfg.Seed), 0)), cfg.Duration, cfg.KillEvery, cfg.PGRestarts)
	accounts := accountIDs(rand.New(rand.NewPCG(uint64(cfg.Seed), 1)), cfg.Accounts)
	kills := 0
	for _, f := range faults {
		if f.Kind == Kill {
			kills++
		}
	}
	r.say("load: %s at %d writes/s over %d clients, %d accounts; %d kills and %d postgres crash restarts scheduled",
		cfg.Duration, cfg.Rate, cfg.Clients, cfg.Accounts, kills, len(faults)-kills)

	start := time.Now()
	var injectErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		injectErr = r.inject(ctx, faults, start, &rep.Figures)
	}()
	load := runLoad(ctx, cfg, r.client, accounts, r.say)
	wg.Wait()
	loadEnd := time.Now()
	if err := ctx.Err(); err != nil {
		return err
	}
	if injectErr != nil {
		return injectErr
	}
	rep.Figures.Load = loadEnd.Sub(start)
	r.loadFigures(load, rep)
	r.say("load done: %d writes attempted, %d acknowledged", rep.Figures.Attempted, rep.Figures.Acked)

	elapsed, detail := r.converge(ctx, loadEnd)
	if err := ctx.Err(); err != nil {
		return err
	}
	rep.Figures.Convergence = elapsed
	if detail != "" {
		rep.Violations = append(rep.Violations, Violation{Invariant: InvariantConverged, Count: 1, Examples: []string{detail}})
		r.say("not converged: %s", detail)
	} else {
		r.say("converged %s after the load", elapsed.Round(time.Millisecond))
	}
	r.expect = Expect{Actions: r.actions, Writes: load.writes}
	return nil
}

// inject carries out the faults at their times after start: kills on one
// goroutine and PostgreSQL restarts on another, so kills go on while
// PostgreSQL is down.
func (r *run) inject(ctx context.Context, faults []Fault, start time.Time, fig *RunFigures) error {
	var kills, restarts []Fault
	for _, f := range faults {
		if f.Kind == Kill {
			kills = append(kills, f)
		} else {
			restarts = append(restarts, f)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, f := range kills {
			if !sleep(ctx, time.Until(start.Add(f.At))) {
				return
			}
			if r.procs[f.Process].kill(f.Down) {
				r.say("%s", f)
			} else {
				fig.KillsSkipped++ // read after wg.Wait
				r.say("%s: skipped, it is down", f)
			}
		}
	}()
	defer wg.Wait()
	for _, f := range restarts {
		if !sleep(ctx, time.Until(start.Add(f.At))) {
			return nil
		}
		r.say("postgres crash restart (pg_ctl restart -m immediate)")
		t := time.Now()
		if err := r.pg.crashRestart(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fig.PGRestarts++
		r.say("postgres up again after %s", time.Since(t).Round(time.Millisecond))
	}
	return nil
}

// loadFigures counts the load's writes into rep.
func (r *run) loadFigures(load loadResult, rep *Report) {
	f := &rep.Figures
	f.RetryCauses = load.causes
	var refused []string
	for _, w := range load.writes {
		f.Attempted++
		switch {
		case w.Namespace == AccountNS:
			f.Accounts++
		case w.update:
			f.Updates++
		default:
			f.Entries++
		}
		if w.Acked() {
			f.Acked++
		} else {
			refused = append(refused, fmt.Sprintf("%s/%s (key %s): %s", w.Namespace, w.Key, w.IdemKey, w.Err))
		}
		if w.Attempts > 1 {
			f.Retried++
			f.RetryAttempts += w.Attempts - 1
		}
	}
	if len(refused) > 0 {
		rep.Violations = append(rep.Violations, Violation{Invariant: InvariantAcked, Count: len(refused), Examples: refused[:min(len(refused), maxExamples)]})
	}
}

// drainQuery reads what is left to do: events not yet dispatched, inputs
// not yet taken, turns running.
const drainQuery = `SELECT (SELECT position FROM ledger_head) - (SELECT position FROM dispatch_state),
	(SELECT count(*) FROM session_inputs WHERE status <> 'CONSUMED'),
	(SELECT count(*) FROM session_turns WHERE status = 'RUNNING')`

// converge waits until every process is up and the database is drained.
// It returns the time since loadEnd and, when that took longer than
// cfg.Converge, what was wrong. It waits up to twice cfg.Converge, so that
// a slow but settling system is still checked settled (and a stuck one is
// reported with what was left).
func (r *run) converge(ctx context.Context, loadEnd time.Time) (time.Duration, string) {
	limit := r.cfg.Converge
	deadline := loadEnd.Add(2 * limit)
	late := func(what string) string {
		return fmt.Sprintf("%s after %s, limit %s", what, time.Since(loadEnd).Round(time.Millisecond), limit)
	}
	for _, p := range r.order {
		if err := p.waitReady(ctx, time.Until(deadline)); err != nil {
			return time.Since(loadEnd), late(p.name + " still not up")
		}
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	left := "no connection to the database"
	for time.Now().Before(deadline) {
		if conn == nil {
			c, err := pgx.Connect(ctx, r.url)
			if err != nil {
				left = "no connection to the database: " + err.Error()
				if !sleep(ctx, 100*time.Millisecond) {
					break
				}
				continue
			}
			conn = c
		}
		var undispatched, pending, running int64
		if err := conn.QueryRow(ctx, drainQuery).Scan(&undispatched, &pending, &running); err != nil {
			_ = conn.Close(context.Background())
			conn, left = nil, "query: "+err.Error()
			continue
		}
		if undispatched == 0 && pending == 0 && running == 0 {
			if elapsed := time.Since(loadEnd); elapsed > limit {
				return elapsed, late("settled only")
			}
			return time.Since(loadEnd), ""
		}
		left = fmt.Sprintf("%d events undispatched, %d inputs not taken, %d turns running", undispatched, pending, running)
		if !sleep(ctx, 100*time.Millisecond) {
			break
		}
	}
	return time.Since(loadEnd), late("not settled (" + left + ")")
}

// check runs Check and reads the figures, once every process has stopped.
func (r *run) check(ctx context.Context, rep *Report) error {
	f := &rep.Figures
	f.Kills = map[string]int{}
	var exits []string
	for _, p := range r.order {
		pf := p.figures()
		f.Kills[p.name] = pf.Kills
		f.FailedStarts += pf.FailedStarts
		exits = append(exits, pf.Unexpected...)
	}
	if len(exits) > 0 {
		rep.Violations = append(rep.Violations, Violation{Invariant: InvariantSurvived, Count: len(exits), Examples: exits[:min(len(exits), maxExamples)]})
	}
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	t := time.Now()
	vs, err := Check(ctx, conn, r.expect)
	if err != nil {
		return err
	}
	rep.Violations = append(rep.Violations, vs...)
	if f.DB, err = Figures(ctx, conn, r.actions); err != nil {
		return err
	}
	r.say("invariants checked in %s", time.Since(t).Round(time.Millisecond))
	return nil
}

// cleanup stops the processes and the cluster and removes the run's
// folder. A run with violations keeps its logs and a pg_dump in
// keptPrefix<seed>-<time>; one that broke down (broken) or ran with
// Config.KeepLogs keeps its logs. It runs however Run ends.
func (r *run) cleanup(rep *Report, broken bool) {
	if r.stopProcs != nil {
		r.stopProcs()
	}
	failed := len(rep.Violations) > 0
	if r.pg != nil {
		if failed {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := r.pg.dump(ctx, dbName, filepath.Join(r.dir, "logs", dbName+".dump")); err != nil {
				r.say("%v", err)
			}
			cancel()
		}
		if err := r.pg.stop(); err != nil {
			r.say("stopping postgres: %v", err)
		}
	}
	if !failed && !broken && !r.cfg.KeepLogs {
		if err := os.RemoveAll(r.dir); err != nil {
			r.say("removing %s: %v", r.dir, err)
		}
		return
	}
	for _, d := range []string{"pgdata", "sock", pidFile} {
		_ = os.RemoveAll(filepath.Join(r.dir, d))
	}
	kept := filepath.Join(filepath.Dir(r.dir), fmt.Sprintf("%s%d-%s", keptPrefix, rep.Seed, time.Now().Format("20060102T150405")))
	if err := os.Rename(r.dir, kept); err != nil {
		kept = r.dir
	}
	rep.Kept = filepath.Join(kept, "logs")
}

// sweepStale stops the cluster of, and removes, every run folder whose
// runner is gone (a run killed outright cannot clean up after itself).
func (r *run) sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runPrefix+"*"))
	cred, _ := pgCredential()
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, pidFile))
		if err != nil {
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
				continue // just being made by another run
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && processAlive(pid) {
			continue // another run still going
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := stopCluster(ctx, r.pgbin, filepath.Join(dir, "pgdata"), cred); err != nil {
			r.say("an earlier run's cluster in %s: %v", dir, err)
		}
		cancel()
		if err := os.RemoveAll(dir); err == nil {
			r.say("removed %s, left by a run that did not finish", dir)
		}
	}
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// rngReader reads random bytes from a seeded rng (uuid.NewRandomFromReader).
type rngReader struct{ rng *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.rng.UintN(256))
	}
	return len(p), nil
}

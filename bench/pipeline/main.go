// Command pipeline measures the turn pipeline (issue 14): how fast inputs
// are consumed end to end, the latency from an event's commit to the commit
// of the turn that takes it, and the PostgreSQL backend CPU spent per
// consumed input, each against a pgbench single-row INSERT ceiling measured
// in the same run on the same server.
//
// Each run uses a fresh database (-db, dropped and created through -admin)
// and runs the service in this process (server.New, App.Run as a worker)
// with the seed's monitor action (agent.echo) over -sessions accounts. Then:
//
//  1. ceiling: pgbench, single-row INSERT into a scratch table, autocommit,
//     8 clients and 1 client, -ceiling seconds each;
//  2. bulk feed: -bulk entry events appended through package ledger in
//     transactions of -bulk-batch events by -bulk-writers goroutines, as
//     fast as they go; inputs/s = events / (first write -> every input
//     consumed);
//  3. single feed: -single PutValue calls from -writers goroutines;
//  4. paced: single writes at half the single feed's inputs/s for -paced
//     (commit->turn p50/p99), then at -slow per second (p50).
//
// Backend CPU is the user+system time (from /proc) of the database's
// backends, except this program's own monitoring connection, over a pass,
// divided by the inputs it consumed. Every figure is printed per run and,
// after the last run, as min/median/max over the runs, as ratios to the
// 8-client ceiling of the same run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
)

type options struct {
	admin, db          string
	runs               int
	sessions, workers  int
	bulk, bulkBatch    int
	bulkWriters        int
	single, writers    int
	paced, ceiling     time.Duration
	slow               int
	timeout            time.Duration
	skipBulk, skipSlow bool
	profile            string
}

func main() {
	var o options
	flag.StringVar(&o.admin, "admin", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "URL of a database to create and drop the bench database from")
	flag.StringVar(&o.db, "db", "actionsledger_pipeline", "bench database (dropped and created for each run)")
	flag.IntVar(&o.runs, "runs", 3, "runs")
	flag.IntVar(&o.sessions, "sessions", 100, "account sessions the entries spread over")
	flag.IntVar(&o.workers, "workers", 0, "executor workers (0: the service's default)")
	flag.IntVar(&o.bulk, "bulk", 20000, "entries of the bulk feed (0 skips it)")
	flag.IntVar(&o.bulkBatch, "bulk-batch", 500, "entries per bulk transaction")
	flag.IntVar(&o.bulkWriters, "bulk-writers", 4, "goroutines appending bulk transactions")
	flag.IntVar(&o.single, "single", 5000, "entries of the single-write feed")
	flag.IntVar(&o.writers, "writers", 8, "goroutines calling PutValue")
	flag.DurationVar(&o.paced, "paced", 5*time.Second, "length of each paced pass")
	flag.IntVar(&o.slow, "slow", 100, "rate of the slow paced pass, entries/s (0 skips it)")
	flag.DurationVar(&o.ceiling, "ceiling", 5*time.Second, "length of each pgbench run")
	flag.DurationVar(&o.timeout, "timeout", 180*time.Second, "longest wait for a pass's inputs to be consumed")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of each pass into this folder (bulk.pprof, single.pprof, half.pprof, slow.pprof)")
	flag.Parse()
	ctx := context.Background()
	var all []runResult
	for i := range o.runs {
		r, err := run(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pipeline:", err)
			os.Exit(1)
		}
		fmt.Printf("run %d: %s\n", i+1, r)
		all = append(all, r)
	}
	summary(all)
}

// runResult is one run's figures.
type runResult struct {
	Ceiling8, Ceiling1 float64 // pgbench tps
	Bulk, Single       pass
	Half, Slow         pass
}

func (r runResult) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// pass is one pass's figures.
type pass struct {
	N          int
	Paced      int     // entries/s asked for; 0: as fast as they go
	Rate       float64 // inputs consumed per second, end to end
	WriteRate  float64 // writes per second
	Turns      int
	P50, P99   float64 // ms, commit -> turn commit
	Queue50    float64 // ms, delivered -> turn started (p50)
	Queue99    float64
	CPUPerIn   float64 // ms of backend CPU per consumed input
	XactPerIn  float64 // transactions committed per consumed input
	GoCPUPerIn float64 // ms of this process's CPU per consumed input
}

func run(ctx context.Context, o options) (runResult, error) {
	var r runResult
	url, err := freshDB(ctx, o.admin, o.db)
	if err != nil {
		return r, err
	}
	if r.Ceiling8, err = pgbench(ctx, url, 8, o.ceiling); err != nil {
		return r, err
	}
	if r.Ceiling1, err = pgbench(ctx, url, 1, o.ceiling); err != nil {
		return r, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app, err := server.New(ctx, server.Config{DatabaseURL: url, Workers: o.workers}, log)
	if err != nil {
		return r, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		cancel()
		<-done
		app.Close()
	}()
	mon, err := newMonitor(ctx, url)
	if err != nil {
		return r, err
	}
	defer mon.pool.Close()
	rig := &rig{app: app, mon: mon}
	if err := rig.setup(ctx, o.sessions); err != nil {
		return r, err
	}
	if o.bulk > 0 {
		if r.Bulk, err = rig.pass(ctx, o, o.bulk, 0, true); err != nil {
			return r, fmt.Errorf("bulk: %w", err)
		}
	}
	if r.Single, err = rig.pass(ctx, o, o.single, 0, false); err != nil {
		return r, fmt.Errorf("single: %w", err)
	}
	half := int(r.Single.Rate / 2)
	if half > 0 && o.paced > 0 {
		n := int(float64(half) * o.paced.Seconds())
		if r.Half, err = rig.pass(ctx, o, n, half, false); err != nil {
			return r, fmt.Errorf("paced at half: %w", err)
		}
	}
	if o.slow > 0 && o.paced > 0 {
		n := int(float64(o.slow) * o.paced.Seconds())
		if r.Slow, err = rig.pass(ctx, o, n, o.slow, false); err != nil {
			return r, fmt.Errorf("paced slow: %w", err)
		}
	}
	return r, nil
}

// freshDB drops and creates database db and returns its URL.
func freshDB(ctx context.Context, admin, db string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", err
	}
	cfg := conn.Config()
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, db), nil
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs single-row autocommit INSERTs from clients connections for d
// and returns transactions per second.
func pgbench(ctx context.Context, url string, clients int, d time.Duration) (float64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_scratch (id bigserial PRIMARY KEY, data jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "pipeline")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "insert.sql")
	if err := os.WriteFile(script, []byte(`INSERT INTO bench_scratch (data) VALUES ('{"account_id":"00000000-0000-0000-0000-000000000000","amount":12345}');`+"\n"), 0o600); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", strconv.Itoa(int(d.Seconds())), url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench: no tps in %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// monitor is this program's own connection, for polls and statistics.
type monitor struct {
	pool *pgxpool.Pool
	db   string
}

func newMonitor(ctx context.Context, url string) (*monitor, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &monitor{pool: p, db: cfg.ConnConfig.Database}, nil
}

// cpu returns the CPU time (user + system) each backend of the database
// has used so far, by pid, leaving out the monitor's own.
func (m *monitor) cpu(ctx context.Context) (map[int]time.Duration, error) {
	rows, err := m.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, m.db)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone
		}
		// Fields after the command (which may hold spaces), from field 3.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[int(pid)] = time.Duration(ut+st) * 10 * time.Millisecond // CLK_TCK 100
	}
	return out, nil
}

// xacts returns the transactions the database committed so far (the
// statistics lag by up to a second; a pass is longer).
func (m *monitor) xacts(ctx context.Context) (int64, error) {
	if _, err := m.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, err
	}
	var n int64
	err := m.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, m.db).Scan(&n)
	return n, err
}

// cpuSince sums the backend CPU used since before.
func cpuSince(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

type rig struct {
	app      *server.App
	mon      *monitor
	accounts []string
	sids     []int64
}

// setup creates the seed's monitor action and opens the accounts.
func (r *rig) setup(ctx context.Context, n int) error {
	doc, err := parser.ParseQuery(&ast.Source{Input: examples.CreateMonitor})
	if err != nil {
		return err
	}
	create := doc.Operations[0].SelectionSet[0].(*ast.Field).SelectionSet[0].(*ast.Field)
	v, err := create.Arguments.ForName("input").Value.Value(nil)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(v)
	var def action.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return err
	}
	actionID := uuid.New()
	if _, err := r.app.Actions.Create(ctx, actionID, def); err != nil {
		return err
	}
	r.accounts = make([]string, n)
	for i := range r.accounts {
		r.accounts[i] = uuid.NewString()
		if _, err := r.app.Ledger.PutValue(ctx, "account", r.accounts[i], jsonvalue.MustEncode(map[string]any{"account_id": r.accounts[i]}), ""); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := r.mon.pool.Query(ctx, `SELECT sid FROM sessions WHERE action_id = $1`, actionID)
		if err != nil {
			return err
		}
		if r.sids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(r.sids) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sessions started", len(r.sids), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pass writes n entries, in bulk or by single PutValue calls, as fast as
// they go (rate 0) or paced at rate per second, waits until every input is
// consumed and measures.
func (r *rig) pass(ctx context.Context, o options, n, rate int, bulk bool) (pass, error) {
	if o.profile != "" {
		name := "single"
		switch {
		case bulk:
			name = "bulk"
		case rate > 0 && rate == o.slow:
			name = "slow"
		case rate > 0:
			name = "half"
		}
		f, err := os.Create(filepath.Join(o.profile, name+".pprof"))
		if err != nil {
			return pass{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return pass{}, err
		}
		defer pprof.StopCPUProfile()
	}
	p := pass{N: n, Paced: rate}
	var first int64
	if err := r.mon.pool.QueryRow(ctx, `SELECT position FROM ledger_head`).Scan(&first); err != nil {
		return p, err
	}
	cpu0, err := r.mon.cpu(ctx)
	if err != nil {
		return p, err
	}
	go0 := processCPU()
	x0, err := r.mon.xacts(ctx)
	if err != nil {
		return p, err
	}
	start := time.Now()
	var werr error
	if bulk {
		werr = r.writeBulk(ctx, n, o.bulkBatch, o.bulkWriters)
	} else {
		werr = r.writeSingle(ctx, n, o.writers, rate, start)
	}
	if werr != nil {
		return p, werr
	}
	wrote := time.Since(start)
	var last int64
	if err := r.mon.pool.QueryRow(ctx, `SELECT position FROM ledger_head`).Scan(&last); err != nil {
		return p, err
	}
	for {
		var done bool
		err := r.mon.pool.QueryRow(ctx, `SELECT (SELECT position FROM dispatch_state) >= $1
			AND NOT EXISTS (SELECT 1 FROM session_inputs WHERE sid = ANY($2) AND status = 'PENDING')`, last, r.sids).Scan(&done)
		if err != nil {
			return p, err
		}
		if done {
			break
		}
		if time.Since(start) > o.timeout {
			return p, fmt.Errorf("inputs not consumed after %s", o.timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	cpu1, err := r.mon.cpu(ctx)
	if err != nil {
		return p, err
	}
	goCPU := processCPU() - go0
	time.Sleep(1500 * time.Millisecond) // backends report their statistics at most once a second
	x1, err := r.mon.xacts(ctx)
	if err != nil {
		return p, err
	}
	p.XactPerIn = float64(x1-x0) / float64(n)
	p.Rate, p.WriteRate = float64(n)/took.Seconds(), float64(n)/wrote.Seconds()
	p.CPUPerIn = float64(cpuSince(cpu0, cpu1).Microseconds()) / 1000 / float64(n)
	p.GoCPUPerIn = float64(goCPU.Microseconds()) / 1000 / float64(n)
	return p, r.latency(ctx, &p, first, last)
}

func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func (r *rig) entry(i int) jsonvalue.Value {
	return jsonvalue.MustEncode(map[string]any{"account_id": r.accounts[i%len(r.accounts)], "amount": 100 + i%90000})
}

// writeBulk appends n entry.inserted events in transactions of batch.
func (r *rig) writeBulk(ctx context.Context, n, batch, writers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				from := int(next.Add(int64(batch))) - batch
				if from >= n {
					return
				}
				to := min(from+batch, n)
				evs := make([]ledger.NewEvent, 0, to-from)
				for i := from; i < to; i++ {
					evs = append(evs, ledger.NewEvent{ID: uuid.New(), Type: "entry.inserted", Data: r.entry(i)})
				}
				err := pgx.BeginFunc(ctx, r.app.Pool, func(tx pgx.Tx) error {
					_, err := ledger.Append(ctx, tx, r.app.Clock.Now(), evs...)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// writeSingle writes n entries by PutValue from writers goroutines, paced
// at rate per second when rate > 0.
func (r *rig) writeSingle(ctx context.Context, n, writers, rate int, start time.Time) error {
	jobs := make(chan int, n)
	go func() {
		defer close(jobs)
		for i := range n {
			if rate > 0 {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
			}
			jobs <- i
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for i := range jobs {
				if _, err := r.app.Ledger.PutValue(ctx, "entry", uuid.NewString(), r.entry(i), ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// latency joins the pass's events (positions after first up to last) to
// the turns that took them.
func (r *rig) latency(ctx context.Context, p *pass, first, last int64) error {
	rows, err := r.mon.pool.Query(ctx, `
		SELECT extract(epoch FROM t.finished_at - e.commit_time) * 1000, extract(epoch FROM t.started_at - i.delivered_at) * 1000, i.sid, i.turn
		  FROM events e
		  JOIN session_inputs i ON i.event_id = e.id AND i.status = 'CONSUMED'
		  JOIN session_turns t ON t.sid = i.sid AND t.number = i.turn
		 WHERE e.position > $1 AND e.position <= $2 AND e.type = 'entry.inserted'`, first, last)
	if err != nil {
		return err
	}
	var lat, queue []float64
	turnSet := map[[2]int64]bool{}
	var l, q float64
	var sid, turn int64
	if _, err := pgx.ForEachRow(rows, []any{&l, &q, &sid, &turn}, func() error {
		lat, queue = append(lat, l), append(queue, q)
		turnSet[[2]int64{sid, turn}] = true
		return nil
	}); err != nil {
		return err
	}
	if len(lat) != p.N {
		return fmt.Errorf("%d of %d entries joined to a turn", len(lat), p.N)
	}
	p.Turns = len(turnSet)
	p.P50, p.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	p.Queue50, p.Queue99 = quantile(queue, 0.5), quantile(queue, 0.99)
	return nil
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// summary prints min/median/max over the runs of each figure.
func summary(rs []runResult) {
	if len(rs) == 0 {
		return
	}
	type fig struct {
		name string
		f    func(runResult) float64
	}
	ratio := func(f func(runResult) float64) func(runResult) float64 {
		return func(r runResult) float64 { return f(r) / r.Ceiling8 }
	}
	figs := []fig{
		{"pgbench insert tps, 8 clients", func(r runResult) float64 { return r.Ceiling8 }},
		{"pgbench insert tps, 1 client", func(r runResult) float64 { return r.Ceiling1 }},
		{"bulk feed: inputs consumed/s", func(r runResult) float64 { return r.Bulk.Rate }},
		{"bulk feed: inputs/s / ceiling8", ratio(func(r runResult) float64 { return r.Bulk.Rate })},
		{"bulk feed: inputs per turn", func(r runResult) float64 { return float64(r.Bulk.N) / float64(max(r.Bulk.Turns, 1)) }},
		{"bulk feed: backend CPU ms/input", func(r runResult) float64 { return r.Bulk.CPUPerIn }},
		{"bulk feed: Go CPU ms/input", func(r runResult) float64 { return r.Bulk.GoCPUPerIn }},
		{"bulk feed: commits/input", func(r runResult) float64 { return r.Bulk.XactPerIn }},
		{"single feed: putValue/s", func(r runResult) float64 { return r.Single.WriteRate }},
		{"single feed: inputs consumed/s", func(r runResult) float64 { return r.Single.Rate }},
		{"single feed: inputs/s / ceiling8", ratio(func(r runResult) float64 { return r.Single.Rate })},
		{"single feed: inputs per turn", func(r runResult) float64 { return float64(r.Single.N) / float64(max(r.Single.Turns, 1)) }},
		{"single feed: backend CPU ms/input", func(r runResult) float64 { return r.Single.CPUPerIn }},
		{"single feed: Go CPU ms/input", func(r runResult) float64 { return r.Single.GoCPUPerIn }},
		{"single feed: commits/input", func(r runResult) float64 { return r.Single.XactPerIn }},
		{"single feed saturated: commit->turn p50 ms", func(r runResult) float64 { return r.Single.P50 }},
		{"single feed saturated: commit->turn p99 ms", func(r runResult) float64 { return r.Single.P99 }},
		{"single feed saturated: wait for claim p50 ms", func(r runResult) float64 { return r.Single.Queue50 }},
		{"paced at half max: rate/s", func(r runResult) float64 { return float64(r.Half.Paced) }},
		{"paced at half max: commit->turn p50 ms", func(r runResult) float64 { return r.Half.P50 }},
		{"paced at half max: commit->turn p99 ms", func(r runResult) float64 { return r.Half.P99 }},
		{"paced slow: commit->turn p50 ms", func(r runResult) float64 { return r.Slow.P50 }},
		{"paced slow: commit->turn p99 ms", func(r runResult) float64 { return r.Slow.P99 }},
	}
	fmt.Printf("\n%-46s %10s %10s %10s\n", "figure", "min", "median", "max")
	for _, f := range figs {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f.f(r)
		}
		slices.Sort(xs)
		fmt.Printf("%-46s %10.3f %10.3f %10.3f\n", f.name, xs[0], xs[len(xs)/2], xs[len(xs)-1])
	}
}

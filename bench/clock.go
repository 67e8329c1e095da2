package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
)

// ClockConfig sizes a bench-clock run; cmd/actionsledger's bench-clock
// command sets it from its flags.
type ClockConfig struct {
	DatabaseURL  string        // a fresh database
	Sessions     int           // sessions whose hourly clock starts turns (the idle figure)
	Idle         time.Duration // how long idle CPU is measured, before and after the sessions exist
	IdleLag      int           // sessions of the idle lag pass (every 1s)
	Load         int           // sessions of the loaded lag pass
	LoadEvery    time.Duration // clock period of the loaded pass's sessions
	LagDuration  time.Duration // length of each lag pass
	Workers      int           // concurrent turns
	StartTimeout time.Duration // longest wait for the sessions to start
}

// RunClock measures session clocks on the wall clock, with the service in
// this process: what many sessions with an hourly clock cost a server with
// nothing due (idle CPU of this process and of its PostgreSQL backends,
// transactions per second), and how late firings start and commit their
// turns, on an idle server and under load. It prints each figure as it
// is measured, then a table.
func RunClock(ctx context.Context, c ClockConfig, out io.Writer, log *slog.Logger) error {
	if c.Sessions < 0 || c.IdleLag < 1 || c.Load < 1 || c.LoadEvery < time.Second || c.Idle <= 0 || c.LagDuration <= 0 {
		return errors.New("bench-clock: counts must be positive and --load-every at least 1s")
	}
	began := time.Now()
	rep := &report{out: out}
	app, stop, err := server.Start(ctx, server.Config{DatabaseURL: c.DatabaseURL, Workers: c.Workers}, observe.AtLeast(log, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	url, stopHTTP, err := serve(ctx, app)
	if err != nil {
		return err
	}
	defer func() { _ = stopHTTP() }()
	b := &clockBench{app: app, gql: newClient(url), gauges: session.NewGauges(app.Pool, app.Clock)}
	defer b.gql.close()

	base, err := b.idle(ctx, c.Idle)
	if err != nil {
		return err
	}
	rep.say("1. idle before: %s", base)
	rep.row("idle CPU, no clocked sessions", base.short(), fmt.Sprintf("%s of wall time, nothing due", c.Idle))

	if c.Sessions > 0 {
		hourly, err := b.action(ctx, "bench-hourly", "hourly", "1h")
		if err != nil {
			return err
		}
		took, err := b.start(ctx, hourly, c.Sessions, 0, c.StartTimeout)
		if err != nil {
			return err
		}
		g, err := b.gauges.Read(ctx)
		if err != nil {
			return err
		}
		rep.say("2. %d sessions with `every: 1h` (turns.on names it: each firing starts a turn) started in %.1fs; %d sessions open, %d timers due",
			c.Sessions, took.Seconds(), g.Sessions[string(session.Open)], g.TimersDue)
		// Autovacuum would soon do the same after the bulk start; doing it
		// now keeps that one-off work out of the idle figure.
		if _, err := app.Pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
			return err
		}
		idle, err := b.idle(ctx, c.Idle)
		if err != nil {
			return err
		}
		rep.say("   idle with them: %s", idle)
		rep.row(fmt.Sprintf("idle CPU, %d hourly sessions", c.Sessions), idle.short(), fmt.Sprintf("%s of wall time, no firing due", c.Idle))
	}

	for _, pass := range []struct {
		name     string
		sessions int
		every    time.Duration
	}{{"idle server", c.IdleLag, time.Second}, {"under load", c.Load, c.LoadEvery}} {
		lag, err := b.lag(ctx, pass.sessions, pass.every, c.LagDuration, c.StartTimeout)
		if err != nil {
			return err
		}
		rep.say("3. firing lag, %s: %d sessions with every %s for %s: %s", pass.name, pass.sessions, pass.every, c.LagDuration, lag)
		rep.row("firing lag to turn start, "+pass.name, lag.start.short()+" ms p50/p99",
			fmt.Sprintf("%d sessions, every %s: scheduled_at -> session_turns.started_at", pass.sessions, pass.every))
		rep.row("firing lag to turn commit, "+pass.name, lag.commit.short()+" ms p50/p99", "scheduled_at -> session_turns.finished_at")
	}
	if err := stop(); err != nil {
		return fmt.Errorf("bench-clock: service: %w", err)
	}
	rep.table()
	rep.say("bench-clock: done in %.1fs", time.Since(began).Seconds())
	return nil
}

type clockBench struct {
	app    *server.App
	gql    *client
	gauges *session.Gauges
}

// idleUse is what a quiet period cost.
type idleUse struct {
	wall           time.Duration
	self, postgres time.Duration // CPU time; postgres < 0: not readable
	xacts          int64         // transactions committed in the database
}

func (u idleUse) pct(d time.Duration) float64 { return 100 * d.Seconds() / u.wall.Seconds() }

func (u idleUse) String() string {
	pg := "PostgreSQL backends' CPU not readable"
	if u.postgres >= 0 {
		pg = fmt.Sprintf("its PostgreSQL backends %.3fs CPU (%.2f%% of one core)", u.postgres.Seconds(), u.pct(u.postgres))
	}
	return fmt.Sprintf("over %s this process used %.3fs CPU (%.2f%% of one core); %s; %.1f transactions/s",
		u.wall, u.self.Seconds(), u.pct(u.self), pg, float64(u.xacts)/u.wall.Seconds())
}

func (u idleUse) short() string {
	s := fmt.Sprintf("%.2f%% core (process)", u.pct(u.self))
	if u.postgres >= 0 {
		s += fmt.Sprintf(", %.2f%% (its PostgreSQL backends)", u.pct(u.postgres))
	}
	return s
}

// idle measures CPU and transactions over d while the test does nothing.
func (b *clockBench) idle(ctx context.Context, d time.Duration) (idleUse, error) {
	x0, err := b.xacts(ctx)
	if err != nil {
		return idleUse{}, err
	}
	pids, err := backendPIDs(ctx, b.app.Pool)
	if err != nil {
		return idleUse{}, err
	}
	s0, p0, t0 := selfCPU(), backendCPU(pids), time.Now()
	if err := sleepCtx(ctx, d); err != nil {
		return idleUse{}, err
	}
	s1, p1, wall := selfCPU(), backendCPU(pids), time.Since(t0)
	// The statistics collector publishes counts with a delay; give it a moment.
	if err := sleepCtx(ctx, 1500*time.Millisecond); err != nil {
		return idleUse{}, err
	}
	x1, err := b.xacts(ctx)
	if err != nil {
		return idleUse{}, err
	}
	u := idleUse{wall: wall, self: s1 - s0, postgres: -1, xacts: x1 - x0}
	if p0 >= 0 && p1 >= 0 {
		u.postgres = p1 - p0
	}
	return u, nil
}

func (b *clockBench) xacts(ctx context.Context) (int64, error) {
	var n int64
	err := b.app.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU sums the CPU time of the PostgreSQL backends with the given
// pids (the service's connections to this database), read from /proc when
// the server runs on this machine; -1 when none can be read. Background
// processes (autovacuum, checkpointer) and other databases' backends are
// not counted: the machine may be shared.
func backendCPU(pids []int) time.Duration {
	var sum time.Duration
	found := false
	for _, pid := range pids {
		if d, ok := procCPU(pid); ok {
			sum, found = sum+d, true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// procCPU reads the CPU time (user and system) of process pid from /proc;
// false when it cannot be read (no such process, or no /proc).
func procCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	closing := strings.LastIndexByte(s, ')')
	if closing < 0 {
		return 0, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100, true // USER_HZ
}

// action creates an action whose sessions start on a bench event and keep a
// clock with one every entry that starts turns.
func (b *clockBench) action(ctx context.Context, name, entry, every string) (uuid.UUID, error) {
	id := uuid.New()
	def := action.Definition{
		Name: name, Kind: "agent.echo",
		Triggers: []action.Trigger{{Name: "opened", Event: fmt.Sprintf(`event.type == "bench.%s"`, strings.ReplaceAll(id.String(), "-", "")),
			Session: &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"n": "event.data.n"}`)}}}},
		Session: &action.SessionDef{
			ID:       "string(session.input.n)",
			Schedule: []action.ScheduleEntry{{Name: entry, Every: &every}},
			Turns:    &action.Turns{On: []string{entry}},
		},
	}
	_, err := b.app.Actions.Create(ctx, id, def)
	return id, err
}

// start opens n sessions of the action and waits until the dispatcher has
// started them all. With spread zero the events are appended 5,000 per
// transaction at once; otherwise in 50 transactions spaced evenly over
// spread, so the sessions' clocks fire spread out over a period.
func (b *clockBench) start(ctx context.Context, id uuid.UUID, n int, spread, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	open0, err := b.open(ctx)
	if err != nil {
		return 0, err
	}
	typ := "bench." + strings.ReplaceAll(id.String(), "-", "")
	chunk := 5000
	if spread > 0 {
		chunk = max(n/50, 1)
	}
	for from, k := 0, 0; from < n; from, k = from+chunk, k+1 {
		if spread > 0 {
			if err := sleepCtx(ctx, time.Until(t0.Add(time.Duration(k)*spread/50))); err != nil {
				return 0, err
			}
		}
		evs := make([]ledger.NewEvent, 0, chunk)
		for i := from; i < min(from+chunk, n); i++ {
			evs = append(evs, ledger.NewEvent{Type: typ, Data: jsonvalue.MustEncode(map[string]any{"n": i})})
		}
		err := pgx.BeginFunc(ctx, b.app.Pool, func(tx pgx.Tx) error {
			_, err := ledger.Append(ctx, tx, b.app.Clock.Now(), evs...)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	for {
		open, err := b.open(ctx)
		if err != nil {
			return 0, err
		}
		got := open - open0
		if got >= int64(n) {
			return time.Since(t0), nil
		}
		if time.Since(t0) > timeout {
			return 0, fmt.Errorf("bench-clock: %d of %d sessions started after %s", got, n, timeout)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// lagResult is a lag pass's measurements.
type lagResult struct {
	firings, missed int
	start, commit   latencies
	rate            float64
	starts, commits []time.Duration
}

func (l lagResult) String() string {
	return fmt.Sprintf("%d firings taken (%.0f/s), %d passed over (missed); scheduled_at -> turn start %s; -> turn commit %s",
		l.firings, l.rate, l.missed, l.start, l.commit)
}

// lag starts n sessions with an every clock, their starts spread over one
// period (so firings come evenly, not in one burst), lets them run for d
// and measures, for the firings scheduled after the first period, how late
// the turns that took them started and committed.
func (b *clockBench) lag(ctx context.Context, n int, every, d, timeout time.Duration) (lagResult, error) {
	var res lagResult
	id, err := b.action(ctx, "bench-lag", "tick", every.String())
	if err != nil {
		return res, err
	}
	if _, err := b.start(ctx, id, n, every, timeout); err != nil {
		return res, err
	}
	from := time.Now().Add(every)
	if err := sleepCtx(ctx, d+every); err != nil {
		return res, err
	}
	to := from.Add(d - every)
	ids, err := b.firings(ctx, id, func(f firing) {
		if f.at.Before(from) || !f.at.Before(to) {
			return
		}
		res.starts = append(res.starts, f.started.Sub(f.at))
		res.commits = append(res.commits, f.finished.Sub(f.at))
		res.missed += f.missed
	})
	if err != nil {
		return res, err
	}
	res.firings = len(res.starts)
	res.rate = float64(res.firings) / to.Sub(from).Seconds()
	res.start, res.commit = newLatencies(res.starts), newLatencies(res.commits)
	// Stop the pass's clocks so the next pass measures alone.
	for _, sid := range ids {
		if _, err := b.app.Sessions.Close(ctx, id, sid, "bench pass over"); err != nil && fault.CodeOf(err) != fault.SessionClosed {
			return res, err
		}
	}
	return res, nil
}

// open returns how many sessions are open or waiting, of every action.
func (b *clockBench) open(ctx context.Context) (int64, error) {
	g, err := b.gauges.Read(ctx)
	return g.Sessions[string(session.Open)] + g.Sessions[string(session.Waiting)], err
}

// firing is a clock firing a turn took.
type firing struct {
	at                time.Time // scheduled_at
	started, finished time.Time // the turn's
	missed            int       // firings passed over before this one
}

// firingsOp pages an action's sessions with the firings their turns took.
const firingsOp = `query($a: UUID!, $after: String) { actions { action(id: $a) {
  sessions(first: 5, after: $after) { pageInfo { hasNextPage endCursor }
    nodes { id turns(first: 40) { nodes { startedAt finishedAt inputs { kind event { data } } } } } } } } }`

// firings calls f with every firing the action's sessions' finished turns
// took (of each session's newest 40 turns, read over GraphQL) and returns
// the sessions' ids.
func (b *clockBench) firings(ctx context.Context, actionID uuid.UUID, f func(firing)) ([]string, error) {
	var ids []string
	var after *string
	for {
		var out struct {
			Actions struct {
				Action struct {
					Sessions struct {
						PageInfo struct {
							HasNextPage bool
							EndCursor   *string
						}
						Nodes []struct {
							ID    string
							Turns struct {
								Nodes []struct {
									StartedAt  time.Time
									FinishedAt *time.Time
									Inputs     []struct {
										Kind  string
										Event *struct {
											Data struct {
												ScheduledAt time.Time `json:"scheduled_at"`
												Missed      int
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
		if err := b.gql.do(ctx, firingsOp, map[string]any{"a": actionID, "after": after}, &out); err != nil {
			return nil, fmt.Errorf("bench-clock: sessions: %w", err)
		}
		ss := out.Actions.Action.Sessions
		for _, s := range ss.Nodes {
			ids = append(ids, s.ID)
			for _, t := range s.Turns.Nodes {
				for _, in := range t.Inputs {
					if in.Kind != "SCHEDULE" || in.Event == nil || t.FinishedAt == nil {
						continue
					}
					f(firing{at: in.Event.Data.ScheduledAt, started: t.StartedAt, finished: *t.FinishedAt, missed: in.Event.Data.Missed})
				}
			}
		}
		if !ss.PageInfo.HasNextPage {
			return ids, nil
		}
		after = ss.PageInfo.EndCursor
	}
}

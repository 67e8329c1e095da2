package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/console"
	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/handlers/agent"
	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/handlers/echo"
	"github.com/actionsledger/actionsledger/handlers/httpkind"
	"github.com/actionsledger/actionsledger/handlers/script"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/internal/pgmaint"
	"github.com/actionsledger/actionsledger/internal/pgplan"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/mcp"
	"github.com/actionsledger/actionsledger/migrations"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/tools"
	"github.com/actionsledger/actionsledger/turns"
)

// Config configures a process. DatabaseURL is required.
type Config struct {
	DatabaseURL string
	Addr        string        // HTTP listen address; empty: no HTTP (worker only)
	Workers     int           // concurrent turns (see turns.Config)
	Lease       time.Duration // turn lease (see turns.Config)
	// MaxAttempts is how many attempts a turn gets (turns.Config; 0: 3).
	MaxAttempts int
	Poll        time.Duration // fallback poll of dispatcher and executor (1s)
	// LiveDelay is how long a turn's attempt runs before its transcript
	// entries stream to subscribers (turns.Config.LiveDelay: 200ms;
	// negative: at once).
	LiveDelay time.Duration
	// VacuumEvery is how often the process looks for tables to vacuum
	// and analyse (pgmaint.Keeper: 10s; negative: never).
	VacuumEvery time.Duration
	MaxConns    int         // database pool size (Workers + 16); pool_max_conns in the URL wins
	Clock       clock.Clock // defaults to the wall clock
	// DisableIntrospection turns GraphQL introspection off (on by default).
	DisableIntrospection bool
	// DisableGraphiQL stops serving the GraphiQL page at /graphiql (served by default).
	DisableGraphiQL bool
	// DisableConsole stops serving the web console at /console/ (served
	// by default); / then redirects to GraphiQL, if that is served.
	DisableConsole bool
	// Auth requires a bearer token on every GraphQL request (see package
	// auth). Off, every request acts as the dev principal, which may do
	// everything; Run then refuses a non-loopback Addr.
	Auth bool
	// AdminToken, when set, is a bearer token (at least MinAdminTokenLen
	// characters) whose principal "admin" has ADMIN on `*`; for bootstrapping.
	AdminToken string
	// Providers are the model providers agents may name ("openai",
	// "anthropic"); see provider.FromEnv.
	Providers map[string]provider.Provider
	// Prices is the model price table (MODEL_PRICES) spend caps are
	// counted in (G8): a definition with session.maxPerSessionUsd needs
	// its model priced here.
	Prices turns.Prices
	// HTTPAllow are the addresses or CIDR prefixes the http kind may send
	// turns to besides public addresses (loopback, link-local and private
	// ranges are refused otherwise; issue 11). HTTP_ALLOW.
	HTTPAllow []string
	// Limits are the HTTP front's timeouts and caps (issue 10 items 6, 8);
	// zero fields take DefaultLimits.
	Limits Limits
	// DatabaseWait is how long New waits for an unreachable database
	// (connection refused, restarting) before giving up; 0: try once.
	DatabaseWait time.Duration
	// Metrics are the process's Prometheus metrics, served at /metrics
	// (issue 12); nil: New makes them.
	Metrics *observe.Metrics
	// TracerProvider records the spans of GraphQL operations, dispatch
	// batches, turns, model and tool calls and database queries (issue
	// 12); nil: no tracing (observe.NewTracerProvider reads the
	// environment).
	TracerProvider trace.TracerProvider
	// MetricsCacheTTL is how long a reading of the database gauges serves
	// /metrics scrapes (observe.DatabaseTTL when 0; negative: read at every
	// scrape, for tests).
	MetricsCacheTTL time.Duration
	// DebugAddr, when set, serves net/http/pprof there, on a listener of
	// its own; a non-loopback address is refused unless DebugPublic.
	DebugAddr   string
	DebugPublic bool
	// MetricsAddr, when set, serves /metrics, /healthz and /readyz on a
	// listener of its own at this address (METRICS_ADDR), so a worker,
	// which has no API listener, can be scraped and probed too (issue 12).
	// Off when empty; any address is allowed: these routes reveal counts
	// and statuses, never ids, inputs or tokens.
	MetricsAddr string
	// Live tunes the change feed behind subscriptions (issue 12).
	Live LiveConfig
	// MCPAskWait bounds how long an MCP request to an action served over
	// MCP waits for its turn's answer (mcp.DefaultAskWait when 0):
	// MCP_ASK_WAIT.
	MCPAskWait time.Duration
}

// LiveConfig tunes the change feed behind subscriptions (issue 12); zero
// fields take the defaults.
type LiveConfig struct {
	// Buffer is how many notifications each feed subscriber (a
	// ledgerEvents follower, a shared reader of sessionUpdates or
	// inboxUpdates) holds while it is busy, and how many updates a shared
	// reader queues for each subscriber (ledger.DefaultFeedBuffer); past
	// it, the subscriber catches up or ends with SUBSCRIPTION_LAGGED.
	Buffer int
	// Tail keeps the newest ledger events in memory for ledgerEvents
	// subscribers (see ledger.TailConfig; its Poll defaults to Config.Poll).
	Tail ledger.TailConfig
	// Recheck is how often, with AUTH on, a stream's bearer token is
	// checked again (DefaultRecheck): a revoked token or changed policies
	// end its subscriptions.
	Recheck time.Duration
}

func (c LiveConfig) recheck() time.Duration {
	if c.Recheck <= 0 {
		return DefaultRecheck
	}
	return c.Recheck
}

// App is a running process's parts.
type App struct {
	Pool       *pgxpool.Pool
	Clock      clock.Clock
	Kinds      *turns.Registry
	Ledger     *ledger.Store
	Actions    *action.Store
	Sessions   *session.Store
	Turns      *turns.Store
	Dispatcher *session.Dispatcher
	Timers     *session.Timers
	// Firings runs the clocks of schedule triggers (A4).
	Firings *action.Firings
	// Parks resumes and expires parked sessions (G4).
	Parks *session.ParkLoop
	// Archiver archives inactive sessions (G6).
	Archiver *session.Archiver
	Executor *turns.Executor
	Tools    *tools.Service
	Auth     *auth.Store
	// Authorities resolves what running action versions may reach (issue 11).
	Authorities *auth.Authorities
	// Feed fans out the listener's notifications to subscriptions; Tail
	// follows the ledger for ledgerEvents (issue 12).
	Feed     *ledger.Feed
	Tail     *ledger.Tail
	Resolver *graph.Resolver
	// MCP serves tool actions to MCP clients at /mcp (issue 17).
	MCP *mcp.Server
	// Metrics are served at /metrics (issue 12).
	Metrics *observe.Metrics
	cfg     Config
	log     *slog.Logger
	tracer  trace.Tracer
	schema  *migrations.Checker
	wakes   wakes
}

// wakes are the channels that wake the process's loops: by the listener,
// for what any process committed, and by the notifier at once, for what
// this one did (wakes.local).
type wakes struct {
	ledger, turns, timers, executions, firings chan struct{}
}

func newWakes() wakes {
	c := func() chan struct{} { return make(chan struct{}, 1) }
	return wakes{ledger: c(), turns: c(), timers: c(), executions: c(), firings: c()}
}

// local wakes the loop that a notification of this process is for,
// without waiting for its copy through PostgreSQL (ledger.Notifier.Local).
func (w wakes) local(channel, _ string) {
	switch channel {
	case ledger.NotifyChannel:
		nudgeWake(w.ledger)
	case session.TurnsChannel:
		nudgeWake(w.turns)
	case session.TimersChannel:
		nudgeWake(w.timers)
	case session.ExecutionsChannel:
		nudgeWake(w.executions)
	case action.FiringsChannel:
		nudgeWake(w.firings)
	}
}

func nudgeWake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Kinds returns the handler kinds this build offers; c is the service clock
// (the http kind stamps its requests with it), providers the model
// providers agents may name (scripted is always there), tools resolves
// agents' tool references and egress is where the http kind may send turns.
func Kinds(c clock.Clock, providers map[string]provider.Provider, tools agent.ToolDirectory, egress *httpkind.Egress) *turns.Registry {
	return turns.NewRegistry(echo.Kind(), script.Kind(), httpkind.Kind(c, egress),
		agent.Kind(agent.Options{Providers: providers, Tools: tools, Now: c.Now, Egress: egress}))
}

// New migrates the database and builds the parts (nothing runs yet).
func New(ctx context.Context, cfg Config, log *slog.Logger) (*App, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	if cfg.AdminToken != "" && len(cfg.AdminToken) < MinAdminTokenLen {
		return nil, fmt.Errorf("ADMIN_TOKEN is shorter than %d characters", MinAdminTokenLen)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = tracenoop.NewTracerProvider()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = observe.NewMetrics()
	}
	// A database that is restarting (or not up yet) is waited for, so a
	// process started alongside it does not exit at once.
	if err := waitForDatabase(ctx, log, cfg.DatabaseWait, func() error { return migrations.Apply(ctx, cfg.DatabaseURL) }); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		// Turns whose handler began a transaction hold a connection each
		// while they run; the claim, the completer, the heartbeats, the
		// dispatcher, the timers, the writers' group commit and requests
		// share the rest. The driver's default (4 on two cores) starves them.
		pcfg.MaxConns = int32(cfg.MaxConns)
		if pcfg.MaxConns <= 0 {
			pcfg.MaxConns = int32(max(cfg.Workers, 4) + 16)
		}
	}
	pgplan.ConfigurePool(pcfg)
	if observe.Tracing(cfg.TracerProvider) {
		pcfg.ConnConfig.Tracer = observe.PgxTracer(cfg.TracerProvider)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := waitForDatabase(ctx, log, cfg.DatabaseWait, func() error { return pool.Ping(ctx) }); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	egress, err := httpkind.ParseEgress(cfg.HTTPAllow)
	if err != nil {
		pool.Close()
		return nil, err
	}
	schema, err := migrations.NewChecker(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	dir := &toolDirectory{}
	a := &App{Pool: pool, Clock: cfg.Clock, Kinds: Kinds(cfg.Clock, cfg.Providers, dir, egress), cfg: cfg, log: log,
		Metrics: cfg.Metrics, tracer: observe.Tracer(cfg.TracerProvider), schema: schema}
	a.Authorities = auth.NewAuthorities(pool, cfg.Auth, cfg.AdminToken != "")
	a.Ledger = ledger.NewStore(pool, a.Clock)
	// One notifier for the process: what its writes, dispatch batches,
	// claims and turns commit is announced after, in shared statements
	// (issue 14).
	notifier := a.Ledger.Notifier()
	notifier.Log = log
	a.wakes = newWakes()
	notifier.Local = a.wakes.local
	notifier.Origin = "process " + uuid.NewString()
	a.Actions = action.NewStore(pool, a.Clock, a.Kinds)
	a.Actions.BudgetCheck = budgetCheck(a.Kinds, cfg.Prices)
	dir.actions = a.Actions
	a.Sessions = session.NewStore(pool, a.Clock)
	a.Sessions.Actions = a.Actions
	a.Sessions.Log, a.Sessions.Metrics = log, a.Metrics
	a.Turns = turns.NewStore(pool)
	a.Dispatcher = session.NewDispatcher(pool, a.Actions, a.Clock, log)
	a.Dispatcher.Authorities = a.Authorities
	a.Dispatcher.Executions = turns.QueueMatches
	a.Dispatcher.Metrics, a.Dispatcher.Tracer, a.Dispatcher.Notifier = a.Metrics, a.tracer, notifier
	a.Timers = session.NewTimers(pool, a.Actions, a.Clock, log)
	a.Timers.Metrics = a.Metrics
	a.Firings = action.NewFirings(pool, a.Actions, a.Clock, log)
	a.Firings.Metrics = a.Metrics
	a.Parks = session.NewParkLoop(pool, a.Clock, log)
	a.Archiver = session.NewArchiver(pool, a.Clock, log)
	a.Executor = turns.NewExecutor(pool, a.Actions, a.Kinds, a.Clock, log, turns.Config{
		Workers: cfg.Workers, Lease: cfg.Lease, MaxAttempts: cfg.MaxAttempts, Poll: cfg.Poll, LiveDelay: cfg.LiveDelay, Prices: cfg.Prices})
	a.Executor.Metrics, a.Executor.Tracer, a.Executor.Notifier = a.Metrics, a.tracer, notifier
	a.Tools = tools.NewService(pool, a.Actions, a.Kinds, a.Clock, log)
	a.Tools.Authorities = a.Authorities
	a.Tools.Sessions = a.Sessions
	a.Executor.EnvFunc = a.Tools.Env
	a.Auth = auth.NewStore(pool, a.Clock)
	a.Feed = ledger.NewFeed(cfg.Live.Buffer)
	a.Feed.Route(session.SessionsChannel, session.NoteKeys)
	a.Feed.Route(session.InboxChannel, session.NoteKeys)
	a.Feed.Route(turns.TranscriptChannel, turns.LiveKeys)
	tail := cfg.Live.Tail
	if tail.Poll <= 0 {
		tail.Poll = cfg.Poll
	}
	a.Tail = ledger.NewTail(pool, a.Feed, tail)
	a.Resolver = &graph.Resolver{LedgerStore: a.Ledger, ActionStore: a.Actions, SessionStore: a.Sessions,
		TurnStore: a.Turns, Tools: a.Tools, AuthStore: a.Auth, Clock: a.Clock, Log: log, Feed: a.Feed, Tail: a.Tail, DB: pool,
		Replayer: a.Executor.Replay,
		DryRunner: func(ctx context.Context, comp *action.Compiled, author string, from, to int64, limit, turns int) (*session.DryRun, error) {
			return a.Dispatcher.DryRun(ctx, comp, author, from, to, limit, turns, a.Executor.DryRunTurns)
		}}
	lim := cfg.Limits.withDefaults()
	a.MCP = mcp.NewServer(mcp.Options{Actions: a.Actions, Tools: a.Tools, Sessions: a.Sessions, Turns: a.Turns, Feed: a.Feed,
		Log: log, CallTimeout: lim.RequestTimeout, MaxInFlight: lim.MaxStreams, MaxBodyBytes: MaxBodyBytes, Unavailable: unavailable,
		AskWait: cfg.MCPAskWait})
	a.Metrics.WatchDatabase(session.NewGauges(pool, a.Clock).Read, cfg.MetricsCacheTTL)
	a.Metrics.WatchPools(map[string]*pgxpool.Pool{"main": pool, "tools": a.Tools.SessionPool()})
	return a, nil
}

// Close releases the pool.
func (a *App) Close() {
	a.Ledger.Notifier().Flush() // what committed is announced before the pool goes
	_ = a.schema.Close()
	a.Tools.Close()
	a.Pool.Close()
}

// front is the HTTP front a.cfg asks for.
func (a *App) front() Front {
	return Front{Introspection: !a.cfg.DisableIntrospection, GraphiQL: !a.cfg.DisableGraphiQL,
		Console: !a.cfg.DisableConsole, Limits: a.cfg.Limits}
}

// Handler returns the HTTP routes with the dev principal (loopback only).
func (a *App) Handler() http.Handler {
	front := a.front()
	mux := Mux(ObserveGraphQL(a.tracer, a.Metrics, GraphQL(a.Resolver, a.log, front)), front)
	a.observeRoutes(mux)
	a.mcpRoutes(mux, nil)
	return AccessLog(a.log, DevPrincipal(mux))
}

// AuthHandler returns the HTTP routes with bearer-token authentication on
// /graphql (the console's and GraphiQL's pages, /healthz, /readyz and
// /metrics stay open: the pages hold no data, and ask for a token).
func (a *App) AuthHandler() http.Handler {
	front := a.front()
	mux := Mux(ObserveGraphQL(a.tracer, a.Metrics, authenticate(a.Auth, a.cfg.AdminToken, a.log, a.cfg.Live.recheck(), GraphQL(a.Resolver, a.log, front))), front)
	a.observeRoutes(mux)
	a.mcpRoutes(mux, tokenAuthenticator(a.Auth, a.cfg.AdminToken, a.log))
	return AccessLog(a.log, mux)
}

// observeRoutes adds /metrics and /readyz to mux (issue 12); like
// /healthz they need no credentials.
func (a *App) observeRoutes(mux *http.ServeMux) {
	mux.Handle("GET /metrics", a.Metrics.Handler())
	mux.Handle("GET /readyz", Readiness{
		Ping:     a.Pool.Ping,
		Versions: a.schema.Versions,
		Alive:    a.Dispatcher.Alive,
		MaxQuiet: a.maxQuiet(),
	}.Handler())
}

// ObserveHandler returns the routes of MetricsAddr: /metrics, /healthz
// and /readyz, as on the API's listener, and HTTP 404 for anything else.
func (a *App) ObserveHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	a.observeRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, fault.NotFound, "no such route: this listener serves /metrics, /healthz and /readyz")
	})
	return mux
}

// maxQuiet is how long the dispatcher may go without completing a round
// before /readyz reports it dead: five poll intervals, at least 5 s (a
// round waits for a notification or the poll, then dispatches a batch).
func (a *App) maxQuiet() time.Duration { return max(5*a.cfg.Poll, 5*time.Second) }

// Run runs the dispatcher, the session timers, the executor and (with an
// Addr) the HTTP server until ctx ends.
func (a *App) Run(ctx context.Context) error {
	if a.cfg.Addr != "" && !a.cfg.Auth {
		if err := checkLoopback(a.cfg.Addr); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ledgerWake, turnsWake, timersWake := a.wakes.ledger, a.wakes.turns, a.wakes.timers
	execWake, firingsWake := a.wakes.executions, a.wakes.firings
	a.Executor.ExecutionsWake = execWake
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			return pgx.ConnectConfig(ctx, a.Pool.Config().ConnConfig.Copy())
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				a.log.Warn("listener", "err", err)
			}
		},
		ReconnectDelay: time.Second,
	}
	// The feed's channels: each notification goes to the feed; the
	// ledger's also wakes the dispatcher.
	listened := &listenSync{feed: a.Feed, channels: 4}
	l.Handle(ledger.NotifyChannel, feedHandler{feed: a.Feed, wake: ledgerWake, sync: listened})
	l.Handle(session.SessionsChannel, feedHandler{feed: a.Feed, sync: listened})
	l.Handle(session.InboxChannel, feedHandler{feed: a.Feed, sync: listened})
	l.Handle(turns.TranscriptChannel, feedHandler{feed: a.Feed, sync: listened})
	origin := a.Ledger.Notifier().Origin
	l.Handle(session.TurnsChannel, wakeHandler(turnsWake, origin))
	l.Handle(session.TimersChannel, wakeHandler(timersWake, origin))
	l.Handle(action.FiringsChannel, wakeHandler(firingsWake, origin))
	l.Handle(session.ExecutionsChannel, wakeHandler(execWake, origin))
	l.Handle(session.InterruptsChannel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		if sid, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			a.Executor.Interrupt(sid) // G9: the turn running here, if any
		}
		return nil
	}))

	var wg sync.WaitGroup
	errc := make(chan error, 16)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	run("listener", func() error { return l.Listen(ctx) })
	run("ledger tail", func() error { return a.Tail.Run(ctx) })
	run("feed", func() error {
		<-ctx.Done()
		a.Feed.Close() // subscriptions end: the process is stopping
		return nil
	})
	run("dispatcher", func() error { return a.Dispatcher.Run(ctx, ledgerWake, a.cfg.Poll) })
	run("timers", func() error { return a.Timers.Run(ctx, timersWake, a.cfg.Poll) })
	run("schedule triggers", func() error { return a.Firings.Run(ctx, firingsWake, a.cfg.Poll) })
	run("parks", func() error { return a.Parks.Run(ctx, nil, a.cfg.Poll) })
	run("archiver", func() error { return a.Archiver.Run(ctx, max(a.cfg.Poll, 10*time.Second)) })
	run("executor", func() error { return a.Executor.Run(ctx, turnsWake) })
	if a.cfg.VacuumEvery >= 0 {
		k := &pgmaint.Keeper{Pool: a.Pool, Every: a.cfg.VacuumEvery, Log: a.log}
		run("maintenance", func() error { return k.Run(ctx) })
	}
	if a.cfg.DebugAddr != "" {
		ln, err := listenDebug(a.cfg.DebugAddr, a.cfg.DebugPublic)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		a.log.Warn("pprof served (DEBUG_ADDR): profiles show the process's internals; keep it off shared networks", "addr", ln.Addr().String())
		run("debug", func() error { return serveDebug(ctx, ln) })
	}
	if a.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("METRICS_ADDR: %w", err)
		}
		a.log.Info("metrics and health served (METRICS_ADDR)", "url", "http://"+ln.Addr().String()+"/metrics")
		run("metrics", func() error { return Serve(ctx, ln, a.ObserveHandler(), Limits{}) })
	}
	if a.cfg.Addr != "" {
		ln, err := net.Listen("tcp", a.cfg.Addr)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		h := a.Handler()
		if a.cfg.Auth {
			h = a.AuthHandler()
			a.log.Info("authorisation on: every GraphQL request needs a bearer token", "addr", ln.Addr().String(), "admin_token", a.cfg.AdminToken != "")
		} else {
			a.log.Warn("DEV MODE: no credentials are checked; every request acts as the dev principal, which may do everything. Loopback only; set AUTH=on to require tokens.", "addr", ln.Addr().String())
		}
		ready := []any{"url", "http://" + ln.Addr().String() + "/graphql", "introspection", !a.cfg.DisableIntrospection}
		if !a.cfg.DisableGraphiQL {
			ready = append(ready, "graphiql", "http://"+ln.Addr().String()+GraphiQLPath)
			if !console.Built(console.GraphiQL()) {
				a.log.Warn("GraphiQL assets not built: run make build; until then /graphiql answers 503")
			}
		}
		if !a.cfg.DisableConsole {
			ready = append(ready, "console", "http://"+ln.Addr().String()+ConsolePath)
			if !console.Built(console.Console()) {
				a.log.Warn("console assets not built: run make build; until then /console/ answers 503")
			}
		}
		a.log.Info("GraphQL ready", ready...)
		run("http", func() error { return Serve(ctx, ln, h, a.cfg.Limits) })
	}
	if a.cfg.Addr == "" {
		a.log.Info("worker running: dispatcher, session timers and turn executor", "workers", a.cfg.Workers)
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		cancel()
	}
	wg.Wait()
	return err
}

// feedHandler hands a channel's notifications to the feed (issue 12) and,
// when wake is set, wakes a loop too. Once the listener (re)connected and
// listens on every feed channel, the feed resynchronises its subscribers:
// notifications sent while no connection listened are gone.
type feedHandler struct {
	feed *ledger.Feed
	wake chan struct{}
	sync *listenSync
}

func (h feedHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	h.feed.Publish(n.Channel, n.Payload)
	if h.wake != nil {
		nudgeWake(h.wake)
	}
	return nil
}

// HandleBacklog is called by pgxlisten right after each LISTEN.
func (h feedHandler) HandleBacklog(_ context.Context, channel string, conn *pgx.Conn) error {
	h.sync.listened(conn, channel)
	return nil
}

// listenSync tells the feed to resynchronise once a connection listens on
// all its channels.
type listenSync struct {
	feed     *ledger.Feed
	channels int

	mu   sync.Mutex
	conn *pgx.Conn
	seen map[string]bool
}

func (s *listenSync) listened(conn *pgx.Conn, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn != s.conn {
		s.conn, s.seen = conn, map[string]bool{}
	}
	s.seen[channel] = true
	if len(s.seen) == s.channels {
		s.feed.Resync()
	}
}

// wakeHandler wakes ch on each notification but the copies of this
// process's own wake-ups (payload origin), which ledger.Notifier.Local
// delivered when they were queued.
func wakeHandler(ch chan struct{}, origin string) pgxlisten.HandlerFunc {
	return func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		if origin == "" || n.Payload != origin {
			nudgeWake(ch)
		}
		return nil
	}
}

// checkLoopback refuses non-loopback addresses in dev mode: only AUTH=on
// may serve beyond this machine.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ADDR %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("ADDR %q is not a loopback address: serving beyond this machine requires AUTH=on (bearer tokens); without it bind to 127.0.0.1", addr)
}

// waitForDatabase runs f until it succeeds, fails for another reason than
// an unreachable database, or wait has passed since the first failure,
// backing off from 250 ms to 5 s between tries and logging each failure.
func waitForDatabase(ctx context.Context, log *slog.Logger, wait time.Duration, f func() error) error {
	deadline := time.Now().Add(wait)
	delay := 250 * time.Millisecond
	for {
		err := f()
		if err == nil || !unavailable(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		log.Warn("database unreachable; waiting for it", "err", err, "retry_in", delay, "gives_up_after", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// budgetCheck refuses a spend cap (session.maxPerSessionUsd, G8) on a
// handler that calls no model, or whose model the price table lacks: the
// cap could not count anything, or would hold every turn.
func budgetCheck(kinds *turns.Registry, prices turns.Prices) func(kind string, config jsonvalue.Value) error {
	return func(kind string, config jsonvalue.Value) error {
		prov, model, ok := kinds.Model(kind, config)
		if !ok {
			return fmt.Errorf("a spend cap counts model calls, and a %s handler makes none that the server prices", kind)
		}
		if _, ok := prices.Lookup(prov, model); !ok {
			return fmt.Errorf("the model %s/%s has no price in the server's MODEL_PRICES (key %q), so a cap could not count its calls", prov, model, prov+"/"+model)
		}
		return nil
	}
}

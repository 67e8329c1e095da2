// Command actionsledger runs the actionsledger service, and is a command
// line client of a running one.
//
// Server and database commands (DATABASE_URL):
//
//	actionsledger serve     GraphQL server, dispatcher and turn executor (default)
//	actionsledger worker    dispatcher and turn executor only
//	actionsledger migrate   bring the database schema up to date
//	actionsledger token create --admin   print a new admin bearer token (bootstrap)
//	actionsledger demo      a scripted walkthrough on a fresh database
//	actionsledger bench     throughput and latency figures
//	actionsledger bench-clock  idle CPU with clocked sessions, firing lag
//
// Client commands, GraphQL clients of a running server (--server or
// ACTIONSLEDGER_SERVER, --token or ACTIONSLEDGER_TOKEN; package cli):
// apply, actions, sessions, inbox, respond, events, put, append, tokens.
// docs/cli.md lists them with their exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/actionsledger/actionsledger/cli"
	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/mcp"
	"github.com/actionsledger/actionsledger/migrations"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/turns"
)

// grammar is the command line: the client commands and their flags (package
// cli), and the commands that run the service or write to its database.
type grammar struct {
	cli.Globals
	LogLevel  string `env:"LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level of the server and database commands."`
	LogFormat string `env:"LOG_FORMAT" default:"text" enum:"text,json" help:"Log format of the server and database commands: text (key=value) or json (one object a line)."`

	cli.Commands `embed:""`
	Serve        serveCmd      `cmd:"" default:"1" group:"database" help:"Run the GraphQL server, dispatcher and turn executor."`
	Worker       workerCmd     `cmd:"" group:"database" help:"Run the dispatcher and turn executor without HTTP."`
	Migrate      migrateCmd    `cmd:"" group:"database" help:"Bring the database schema up to date (harmless to repeat)."`
	Token        tokenCmd      `cmd:"" group:"database" help:"Create a bearer token by writing to the database directly (bootstrap; the API's equivalent is tokens)."`
	Demo         demoCmd       `cmd:"" group:"database" help:"Create the example monitor, open accounts, write entries, print sessions and turns; then an agent approval and a held turn."`
	Bench        benchCmd      `cmd:"" group:"database" help:"Measure the insert ceiling, write, bulk and end-to-end rates, commit-to-turn latency and the session query's round trips (docs/throughput.md)."`
	BenchClock   benchClockCmd `cmd:"" name:"bench-clock" group:"database" help:"Measure idle CPU with many clocked sessions and firing lag."`
}

// database is the flag of the commands that open the database.
type database struct {
	DatabaseURL string `env:"DATABASE_URL" required:"" help:"PostgreSQL URL."`
}

// Validate refuses an empty URL (DATABASE_URL set to nothing): the driver
// would then pick a database from its defaults (PGHOST, the OS user), and
// migrate would change that one.
func (d *database) Validate() error {
	if strings.TrimSpace(d.DatabaseURL) == "" {
		return errors.New("DATABASE_URL (or --database-url) is empty")
	}
	return nil
}

// modelPrices is the flag of the commands that run turns: the model price
// table that spend caps are counted in (G8; turns.ParsePrices).
type modelPrices struct {
	ModelPrices string       `env:"MODEL_PRICES" name:"model-prices" help:"Model prices for spend caps (session.maxPerSessionUsd): JSON {\"provider/model\": {\"inputPerMTok\": 3, \"outputPerMTok\": 15}}, or the path of a file holding it. Keys: provider/model, provider/* or a model name; US dollars per million tokens."`
	prices      turns.Prices `kong:"-"`
}

// Validate parses the table.
func (m *modelPrices) Validate() error {
	p, err := turns.ParsePrices(m.ModelPrices)
	m.prices = p
	return err
}

// startup is the flag of the commands that run the service.
type startup struct {
	DatabaseWait time.Duration `env:"DATABASE_WAIT" default:"60s" help:"How long to wait at start for an unreachable database (restarting, not up yet) before exiting."`
}

type serveCmd struct {
	database
	startup
	Addr          string        `env:"ADDR" default:"127.0.0.1:8080" help:"HTTP listen address (loopback only unless AUTH=on)."`
	Auth          string        `env:"AUTH" default:"off" enum:"on,off" help:"on: every GraphQL request needs a bearer token; off: loopback dev mode, no credentials."`
	AdminToken    string        `env:"ADMIN_TOKEN" help:"A bearer token (32+ characters) for principal admin with ADMIN on *."`
	Workers       int           `env:"WORKERS" default:"16" help:"Concurrent turns in this process."`
	Lease         time.Duration `env:"TURN_LEASE" default:"30s" help:"How long a claimed turn stays leased without a heartbeat."`
	Attempts      int           `env:"TURN_ATTEMPTS" default:"3" help:"Attempts of a turn (an error, or a worker that stopped while running it) before it fails (1-100; an agent's attempts setting overrides it)."`
	LiveDelay     time.Duration `env:"LIVE_DELAY" name:"live-delay" default:"200ms" help:"How long a turn runs before its transcript entries stream to subscribers; shorter turns' entries arrive with their commit (negative: stream at once)."`
	VacuumEvery   time.Duration `env:"VACUUM_EVERY" name:"vacuum-every" default:"10s" help:"How often to vacuum and analyse the tables whose dead or changed rows piled up (one process at a time; 0: never, leaving it to autovacuum)."`
	Introspection bool          `env:"INTROSPECTION" default:"true" negatable:"" help:"Answer GraphQL introspection queries."`
	GraphiQL      bool          `env:"GRAPHIQL" name:"graphiql" default:"true" negatable:"" help:"Serve the GraphiQL page at /graphiql."`
	Console       bool          `env:"CONSOLE" name:"console" default:"true" negatable:"" help:"Serve the web console at /console/ (/ redirects there)."`
	HTTPAllow     []string      `env:"HTTP_ALLOW" name:"http-allow" sep:"," help:"Addresses or CIDR prefixes the http kind may send turns to besides public addresses (loopback, link-local and private ones are refused otherwise)."`
	HTTP          httpLimits    `embed:"" prefix:"http-"`
	Live          liveLimits    `embed:"" prefix:"live-"`
	MaxMutations  int           `env:"MAX_MUTATION_FIELDS" name:"max-mutation-fields" default:"${max_mutation_fields}" help:"Mutation fields (writes) one GraphQL request may select."`
	DebugAddr     string        `env:"DEBUG_ADDR" name:"debug-addr" help:"Serve net/http/pprof at this address (off when empty; loopback only unless --debug-public)."`
	DebugPublic   bool          `env:"DEBUG_PUBLIC" name:"debug-public" help:"Allow a non-loopback DEBUG_ADDR."`
	modelPrices
	MCPAskWait time.Duration `env:"MCP_ASK_WAIT" name:"mcp-ask-wait" default:"${mcp_ask_wait}" help:"How long an MCP request to an action served over MCP (an agent) waits for its answer before the call returns TIMEOUT with the request's key (the request stands)."`
	metricsListener
}

// metricsListener is the flag of the commands that may serve /metrics,
// /healthz and /readyz on a listener of their own (server.Config.MetricsAddr).
type metricsListener struct {
	MetricsAddr string `env:"METRICS_ADDR" name:"metrics-addr" help:"Also serve /metrics, /healthz and /readyz at this address, on a listener of its own (off when empty)."`
}

// httpLimits are the HTTP server's timeouts and connection cap (issue 10
// item 6); see server.Limits.
type httpLimits struct {
	ReadHeaderTimeout time.Duration `env:"HTTP_READ_HEADER_TIMEOUT" default:"${read_header_timeout}" help:"Time to read a request's line and headers."`
	ReadTimeout       time.Duration `env:"HTTP_READ_TIMEOUT" default:"${read_timeout}" help:"Time to read a whole request, body included (at most the request timeout)."`
	IdleTimeout       time.Duration `env:"HTTP_IDLE_TIMEOUT" default:"${idle_timeout}" help:"How long a kept-alive connection may wait for its next request."`
	RequestTimeout    time.Duration `env:"HTTP_REQUEST_TIMEOUT" default:"${request_timeout}" help:"Time to handle one request; then 503 TIMEOUT and its work is cancelled."`
	MaxConns          int           `env:"HTTP_MAX_CONNS" default:"${max_conns}" help:"Connections served at once; more wait until one closes."`
}

// liveLimits bound the live subscriptions (issue 12): server.Limits'
// stream caps and server.LiveConfig. Each is checked against the bounds in
// liveBounds at start.
type liveLimits struct {
	MaxStreams             int           `env:"LIVE_MAX_STREAMS" help:"Subscription streams (WebSockets and SSE requests) served at once, below HTTP_MAX_CONNS; 0: half of HTTP_MAX_CONNS."`
	MaxSocketSubscriptions int           `env:"LIVE_MAX_SOCKET_SUBSCRIPTIONS" default:"${live_max_socket_subscriptions}" help:"Subscriptions one WebSocket carries at once (1-1000)."`
	Buffer                 int           `env:"LIVE_BUFFER" default:"${live_buffer}" help:"Notifications a subscriber or shared reader holds, and updates queued per subscriber, while it is busy (16-65536); past them it catches up or ends with SUBSCRIPTION_LAGGED."`
	TailEvents             int           `env:"LIVE_TAIL_EVENTS" default:"${live_tail_events}" help:"Newest ledger events kept in memory for ledgerEvents subscribers (16-1000000)."`
	TailBytes              int           `env:"LIVE_TAIL_BYTES" default:"${live_tail_bytes}" help:"Bytes of event data the tail keeps at most (1 MiB-1 GiB)."`
	Recheck                time.Duration `env:"LIVE_RECHECK" default:"${live_recheck}" help:"With AUTH=on, how often a stream's token is checked again (1s-1h)."`
}

// Bounds of the LIVE_* settings: below them a server could not serve its
// subscribers sensibly, above them one process holds too much memory or
// keeps a revoked token working too long.
const (
	liveMaxSocketSubscriptions = 1000
	liveMinBuffer              = 16
	liveMaxBuffer              = 65536
	liveMinTailEvents          = 16
	liveMaxTailEvents          = 1_000_000
	liveMinTailBytes           = 1 << 20
	liveMaxTailBytes           = 1 << 30
	liveMinRecheck             = time.Second
	liveMaxRecheck             = time.Hour
)

// check returns an error naming the first setting out of its bounds;
// maxConns is HTTP_MAX_CONNS.
func (l liveLimits) check(maxConns int) error {
	switch {
	case l.MaxStreams < 0 || (l.MaxStreams > 0 && l.MaxStreams >= maxConns):
		return fmt.Errorf("LIVE_MAX_STREAMS is %d: it is 0 (half of HTTP_MAX_CONNS) or from 1 to HTTP_MAX_CONNS-1 (%d), so ordinary requests keep connections", l.MaxStreams, maxConns-1)
	case l.MaxSocketSubscriptions < 1 || l.MaxSocketSubscriptions > liveMaxSocketSubscriptions:
		return fmt.Errorf("LIVE_MAX_SOCKET_SUBSCRIPTIONS is %d: it is from 1 to %d", l.MaxSocketSubscriptions, liveMaxSocketSubscriptions)
	case l.Buffer < liveMinBuffer || l.Buffer > liveMaxBuffer:
		return fmt.Errorf("LIVE_BUFFER is %d: it is from %d to %d", l.Buffer, liveMinBuffer, liveMaxBuffer)
	case l.TailEvents < liveMinTailEvents || l.TailEvents > liveMaxTailEvents:
		return fmt.Errorf("LIVE_TAIL_EVENTS is %d: it is from %d to %d", l.TailEvents, liveMinTailEvents, liveMaxTailEvents)
	case l.TailBytes < liveMinTailBytes || l.TailBytes > liveMaxTailBytes:
		return fmt.Errorf("LIVE_TAIL_BYTES is %d: it is from %d (1 MiB) to %d (1 GiB)", l.TailBytes, liveMinTailBytes, liveMaxTailBytes)
	case l.Recheck < liveMinRecheck || l.Recheck > liveMaxRecheck:
		return fmt.Errorf("LIVE_RECHECK is %s: it is from %s to %s", l.Recheck, liveMinRecheck, liveMaxRecheck)
	}
	return nil
}

type workerCmd struct {
	database
	startup
	Workers     int           `env:"WORKERS" default:"16" help:"Concurrent turns in this process."`
	Lease       time.Duration `env:"TURN_LEASE" default:"30s" help:"How long a claimed turn stays leased without a heartbeat."`
	Attempts    int           `env:"TURN_ATTEMPTS" default:"3" help:"As for serve."`
	LiveDelay   time.Duration `env:"LIVE_DELAY" name:"live-delay" default:"200ms" help:"How long a turn runs before its transcript entries stream to subscribers; shorter turns' entries arrive with their commit (negative: stream at once)."`
	VacuumEvery time.Duration `env:"VACUUM_EVERY" name:"vacuum-every" default:"10s" help:"How often to vacuum and analyse the tables whose dead or changed rows piled up (one process at a time; 0: never, leaving it to autovacuum)."`
	Auth        string        `env:"AUTH" default:"off" enum:"on,off" help:"on: action versions run with their authors' authority (set it as for serve); off: dev mode."`
	AdminToken  string        `env:"ADMIN_TOKEN" help:"Set as for serve: versions stored with it keep ADMIN on * under AUTH=on."`
	HTTPAllow   []string      `env:"HTTP_ALLOW" name:"http-allow" sep:"," help:"As for serve."`
	modelPrices
	metricsListener
}

type migrateCmd struct{ database }

// Validate checks DATABASE_URL and the price table.
func (c *workerCmd) Validate() error {
	if err := c.database.Validate(); err != nil {
		return err
	}
	if err := checkAttempts(c.Attempts); err != nil {
		return err
	}
	return c.modelPrices.Validate()
}

// checkAttempts bounds TURN_ATTEMPTS.
func checkAttempts(n int) error {
	if n < 1 || n > 100 {
		return fmt.Errorf("TURN_ATTEMPTS is %d: it is from 1 to 100", n)
	}
	return nil
}

// Validate checks DATABASE_URL (as every database command does) and the
// bounds of the LIVE_* settings.
func (c *serveCmd) Validate() error {
	if err := c.database.Validate(); err != nil {
		return err
	}
	if err := c.modelPrices.Validate(); err != nil {
		return err
	}
	if err := checkAttempts(c.Attempts); err != nil {
		return err
	}
	return c.Live.check(c.HTTP.MaxConns)
}

func main() {
	setGCPercent(os.Getenv)
	os.Exit(run(os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}

// defaultGCPercent is the garbage collector's target growth of the heap
// between collections, in percent of the heap left live by the last one,
// when GOGC is not set: 200, twice Go's default. The service's live heap is
// small (tens of MB) and every request allocates its whole decoded body and
// answer, so at 100 collections ran several times a second under load;
// at 200 the service spent 10-15 % less CPU per input in `make bench`, for
// about 50 MB more at its peak (docs/throughput.md, docs/configuration.md).
const defaultGCPercent = 200

// setGCPercent applies defaultGCPercent unless GOGC is set, in which case
// the runtime has applied it already (GOGC=100 is Go's default, GOGC=off
// turns collection off).
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// run runs the command line args and returns the exit code (see package
// cli for the client commands' codes; the other commands exit 1 on error).
func run(args []string, stdio cli.IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var g grammar
	return cli.Execute(ctx, &g, &g.Globals, args, stdio,
		kong.Description("Ledger-native actions and sessions over GraphQL: the service, and a command line client of it."),
		serverVars(),
		kong.BindToProvider(func() (*slog.Logger, error) {
			return observe.NewLogger(stdio.Stderr, g.LogFormat, g.LogLevel)
		}))
}

// serverVars are the defaults the server commands' flags show, taken from
// the packages that apply them.
func serverVars() kong.Vars {
	d := server.DefaultLimits
	return kong.Vars{"read_header_timeout": d.ReadHeaderTimeout.String(), "read_timeout": d.ReadTimeout.String(),
		"idle_timeout": d.IdleTimeout.String(), "request_timeout": d.RequestTimeout.String(),
		"max_conns": strconv.Itoa(d.MaxConns), "max_mutation_fields": strconv.Itoa(d.MaxMutationFields),
		"live_max_socket_subscriptions": strconv.Itoa(d.MaxSocketSubscriptions), "live_buffer": strconv.Itoa(ledger.DefaultFeedBuffer),
		"live_tail_events": strconv.Itoa(ledger.DefaultTailEvents), "live_tail_bytes": strconv.Itoa(ledger.DefaultTailBytes),
		"live_recheck": server.DefaultRecheck.String(), "mcp_ask_wait": mcp.DefaultAskWait.String()}
}

func (c *serveCmd) Run(ctx context.Context, log *slog.Logger) error {
	return runApp(ctx, c.config(os.Getenv), log)
}

// config is the server's configuration from the flags and environment
// (getenv for the model providers).
func (c *serveCmd) config(getenv func(string) string) server.Config {
	return server.Config{DatabaseURL: c.DatabaseURL, DatabaseWait: c.DatabaseWait, Addr: c.Addr, Workers: c.Workers, Lease: c.Lease, MaxAttempts: c.Attempts, LiveDelay: c.LiveDelay, VacuumEvery: vacuumEvery(c.VacuumEvery),
		DisableIntrospection: !c.Introspection, DisableGraphiQL: !c.GraphiQL, DisableConsole: !c.Console, Auth: c.Auth == "on", AdminToken: c.AdminToken,
		Providers: provider.FromEnv(getenv), Prices: c.prices, HTTPAllow: c.HTTPAllow,
		Limits: server.Limits{ReadHeaderTimeout: c.HTTP.ReadHeaderTimeout, ReadTimeout: c.HTTP.ReadTimeout,
			IdleTimeout: c.HTTP.IdleTimeout, RequestTimeout: c.HTTP.RequestTimeout, MaxConns: c.HTTP.MaxConns,
			MaxMutationFields: c.MaxMutations, MaxStreams: c.Live.MaxStreams, MaxSocketSubscriptions: c.Live.MaxSocketSubscriptions},
		Live: server.LiveConfig{Buffer: c.Live.Buffer, Recheck: c.Live.Recheck,
			Tail: ledger.TailConfig{Events: c.Live.TailEvents, Bytes: c.Live.TailBytes}},
		DebugAddr: c.DebugAddr, DebugPublic: c.DebugPublic, MetricsAddr: c.MetricsAddr, MCPAskWait: c.MCPAskWait}
}

func (c *workerCmd) Run(ctx context.Context, log *slog.Logger) error {
	return runApp(ctx, server.Config{DatabaseURL: c.DatabaseURL, DatabaseWait: c.DatabaseWait, Workers: c.Workers, Lease: c.Lease, MaxAttempts: c.Attempts, LiveDelay: c.LiveDelay, VacuumEvery: vacuumEvery(c.VacuumEvery),
		Auth: c.Auth == "on", AdminToken: c.AdminToken, HTTPAllow: c.HTTPAllow, Providers: provider.FromEnv(os.Getenv),
		Prices: c.prices, MetricsAddr: c.MetricsAddr}, log)
}

func runApp(ctx context.Context, cfg server.Config, log *slog.Logger) error {
	tp, shutdown, err := observe.NewTracerProvider(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	if observe.Tracing(tp) {
		log.Info("tracing on: spans go to the OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)")
	}
	cfg.TracerProvider = tp
	app, err := server.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	return app.Run(ctx)
}

func (c *migrateCmd) Run(ctx context.Context, log *slog.Logger) error {
	if err := migrations.Apply(ctx, c.DatabaseURL); err != nil {
		return err
	}
	log.Info("schema up to date")
	return nil
}

// vacuumEvery maps VACUUM_EVERY to server.Config.VacuumEvery: 0 is never.
func vacuumEvery(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

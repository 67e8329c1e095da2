// Command actionsledger runs the actionsledger service and its tools.
//
//	actionsledger serve     GraphQL server, dispatcher and turn executor (default)
//	actionsledger worker    dispatcher and turn executor only
//	actionsledger migrate   bring the database schema up to date
//	actionsledger token create --admin   print a new admin bearer token
//	actionsledger demo      a scripted walkthrough on a fresh database
//	actionsledger bench     throughput and latency figures
//	actionsledger bench-clock  idle CPU with clocked sessions, firing lag
//
// Configuration comes from flags or the environment (DATABASE_URL, ADDR, ...).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/migrations"
	"github.com/actionsledger/actionsledger/server"
)

type globals struct {
	DatabaseURL  string        `env:"DATABASE_URL" required:"" help:"PostgreSQL URL."`
	DatabaseWait time.Duration `env:"DATABASE_WAIT" default:"60s" help:"How long serve and worker wait at start for an unreachable database before exiting."`
	LogLevel     string        `env:"LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level."`
	LogFormat    string        `env:"LOG_FORMAT" default:"text" enum:"text,json" help:"Log format: text (key=value) or json (one object a line)."`
}

type serveCmd struct {
	Addr          string        `env:"ADDR" default:"127.0.0.1:8080" help:"HTTP listen address (loopback only unless AUTH=on)."`
	Auth          string        `env:"AUTH" default:"off" enum:"on,off" help:"on: every GraphQL request needs a bearer token; off: loopback dev mode, no credentials."`
	AdminToken    string        `env:"ADMIN_TOKEN" help:"A bearer token (32+ characters) for principal admin with ADMIN on *."`
	Workers       int           `env:"WORKERS" default:"4" help:"Concurrent turns in this process."`
	Lease         time.Duration `env:"TURN_LEASE" default:"30s" help:"How long a claimed turn stays leased without a heartbeat."`
	Introspection bool          `env:"INTROSPECTION" default:"true" negatable:"" help:"Answer GraphQL introspection queries."`
	GraphiQL      bool          `env:"GRAPHIQL" name:"graphiql" default:"true" negatable:"" help:"Serve the GraphiQL page at /."`
	HTTPAllow     []string      `env:"HTTP_ALLOW" name:"http-allow" sep:"," help:"Addresses or CIDR prefixes the http kind may send turns to besides public addresses (loopback, link-local and private ones are refused otherwise)."`
	HTTP          httpLimits    `embed:"" prefix:"http-"`
	MaxMutations  int           `env:"MAX_MUTATION_FIELDS" name:"max-mutation-fields" default:"${max_mutation_fields}" help:"Mutation fields (writes) one GraphQL request may select."`
	DebugAddr     string        `env:"DEBUG_ADDR" name:"debug-addr" help:"Serve net/http/pprof at this address (off when empty; loopback only unless --debug-public)."`
	DebugPublic   bool          `env:"DEBUG_PUBLIC" name:"debug-public" help:"Allow a non-loopback DEBUG_ADDR."`
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

type workerCmd struct {
	Workers    int           `env:"WORKERS" default:"4" help:"Concurrent turns in this process."`
	Lease      time.Duration `env:"TURN_LEASE" default:"30s" help:"How long a claimed turn stays leased without a heartbeat."`
	Auth       string        `env:"AUTH" default:"off" enum:"on,off" help:"on: action versions run with their authors' authority (set it as for serve); off: dev mode."`
	AdminToken string        `env:"ADMIN_TOKEN" help:"Set as for serve: versions stored with it keep ADMIN on * under AUTH=on."`
	HTTPAllow  []string      `env:"HTTP_ALLOW" name:"http-allow" sep:"," help:"As for serve."`
}

type migrateCmd struct{}

var cli struct {
	globals
	Serve      serveCmd      `cmd:"" default:"1" help:"Run the GraphQL server, dispatcher and turn executor."`
	Worker     workerCmd     `cmd:"" help:"Run the dispatcher and turn executor without HTTP."`
	Migrate    migrateCmd    `cmd:"" help:"Bring the database schema up to date (harmless to repeat)."`
	Token      tokenCmd      `cmd:"" help:"Manage bearer tokens."`
	Demo       demoCmd       `cmd:"" help:"Create the example monitor, open accounts, write entries, print sessions and turns; then an agent approval and a held turn."`
	Bench      benchCmd      `cmd:"" help:"Measure ledger commit rate, end-to-end events/s and event-to-turn latency."`
	BenchClock benchClockCmd `cmd:"" name:"bench-clock" help:"Measure idle CPU with many clocked sessions and firing lag."`
}

func main() {
	d := server.DefaultLimits
	kctx := kong.Parse(&cli, kong.Name("actionsledger"), kong.Description("Ledger-native actions and sessions over GraphQL."),
		kong.Vars{"read_header_timeout": d.ReadHeaderTimeout.String(), "read_timeout": d.ReadTimeout.String(),
			"idle_timeout": d.IdleTimeout.String(), "request_timeout": d.RequestTimeout.String(),
			"max_conns": strconv.Itoa(d.MaxConns), "max_mutation_fields": strconv.Itoa(d.MaxMutationFields)})
	log, err := observe.NewLogger(os.Stderr, cli.LogFormat, cli.LogLevel)
	if err != nil {
		kctx.Fatalf("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cli.DatabaseURL == "" {
		kctx.Fatalf("DATABASE_URL (or --database-url) is empty")
	}
	kctx.BindTo(ctx, (*context.Context)(nil))
	if err := kctx.Run(&cli.globals, log); err != nil {
		fmt.Fprintln(os.Stderr, "actionsledger:", err)
		os.Exit(1)
	}
}

func (c *serveCmd) Run(ctx context.Context, g *globals, log *slog.Logger) error {
	return runApp(ctx, server.Config{DatabaseURL: g.DatabaseURL, DatabaseWait: g.DatabaseWait, Addr: c.Addr, Workers: c.Workers, Lease: c.Lease,
		DisableIntrospection: !c.Introspection, DisableGraphiQL: !c.GraphiQL, Auth: c.Auth == "on", AdminToken: c.AdminToken,
		Providers: provider.FromEnv(os.Getenv), HTTPAllow: c.HTTPAllow,
		Limits: server.Limits{ReadHeaderTimeout: c.HTTP.ReadHeaderTimeout, ReadTimeout: c.HTTP.ReadTimeout,
			IdleTimeout: c.HTTP.IdleTimeout, RequestTimeout: c.HTTP.RequestTimeout, MaxConns: c.HTTP.MaxConns,
			MaxMutationFields: c.MaxMutations}, DebugAddr: c.DebugAddr, DebugPublic: c.DebugPublic}, log)
}

func (c *workerCmd) Run(ctx context.Context, g *globals, log *slog.Logger) error {
	return runApp(ctx, server.Config{DatabaseURL: g.DatabaseURL, DatabaseWait: g.DatabaseWait, Workers: c.Workers, Lease: c.Lease,
		Auth: c.Auth == "on", AdminToken: c.AdminToken, HTTPAllow: c.HTTPAllow, Providers: provider.FromEnv(os.Getenv)}, log)
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

func (migrateCmd) Run(ctx context.Context, g *globals, log *slog.Logger) error {
	if err := migrations.Apply(ctx, g.DatabaseURL); err != nil {
		return err
	}
	log.Info("schema up to date")
	return nil
}

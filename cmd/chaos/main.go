// Command chaos runs the chaos test of actionsledger (issue 10, `make
// chaos`): two serve replicas and a worker on a private PostgreSQL cluster,
// a bounded load of keyed writes under kill -9 and PostgreSQL crash
// restarts, then an invariant checker over the database. It prints the
// figures and exits 0 when every invariant holds, 1 on any violation, 2
// when the run could not be carried out (and 130 when interrupted).
//
//	chaos [--seed N] [--duration 60s] ...   (or CHAOS_SEED=N ...; see --help)
//
// docs/chaos.md explains the run, its options and its invariants.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/actionsledger/actionsledger/chaos"
)

var cli struct {
	Seed        int64         `env:"CHAOS_SEED" help:"Seed of the load plan and the fault schedule (0: from the clock; the seed used is printed)."`
	Duration    time.Duration `env:"CHAOS_DURATION" default:"60s" help:"How long the load runs."`
	Rate        int           `env:"CHAOS_RATE" default:"40" help:"Writes per second over all clients."`
	Clients     int           `env:"CHAOS_CLIENTS" default:"4" help:"Concurrent writers."`
	Accounts    int           `env:"CHAOS_ACCOUNTS" default:"12" help:"Accounts (one session each per monitor action); at least --clients."`
	KillEvery   time.Duration `env:"CHAOS_KILL_EVERY" default:"4s" help:"Mean time between two kill -9s."`
	PGRestarts  int           `env:"CHAOS_PG_RESTARTS" default:"2" help:"PostgreSQL crash restarts during the load (at least 1)."`
	Converge    time.Duration `env:"CHAOS_CONVERGE" default:"60s" help:"How long the system may take to settle after the load."`
	Lease       time.Duration `env:"CHAOS_LEASE" default:"3s" help:"TURN_LEASE of the processes."`
	WriteBudget time.Duration `env:"CHAOS_WRITE_BUDGET" default:"60s" help:"How long one write is retried before it counts as not acknowledged."`
	KeepLogs    bool          `env:"CHAOS_KEEP_LOGS" help:"Keep the logs of a run that passed (a failed run always keeps them)."`
	Bin         string        `env:"CHAOS_BIN" default:"bin/actionsledger" help:"The actionsledger binary (make build)."`
	PGBin       string        `env:"CHAOS_PG_BIN" name:"pg-bin" help:"Folder of initdb and pg_ctl (default: the newest /usr/lib/postgresql/*/bin)."`
}

func main() {
	kong.Parse(&cli, kong.Name("chaos"), kong.Description("Chaos run of actionsledger: replicas, worker and PostgreSQL under kill -9 and crash restarts, then invariants (docs/chaos.md)."))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	rep, err := chaos.Run(ctx, chaos.Config{Seed: cli.Seed, Duration: cli.Duration, Rate: cli.Rate, Clients: cli.Clients,
		Accounts: cli.Accounts, KillEvery: cli.KillEvery, PGRestarts: cli.PGRestarts, Converge: cli.Converge, Lease: cli.Lease,
		WriteBudget: cli.WriteBudget, KeepLogs: cli.KeepLogs, Bin: cli.Bin, PGBin: cli.PGBin, Out: os.Stdout})
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "chaos: interrupted; everything it started is stopped and removed")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "chaos: the run could not be carried out:", err)
		if rep != nil && rep.Kept != "" {
			fmt.Fprintf(os.Stderr, "chaos: seed %d; logs: %s\n", rep.Seed, rep.Kept)
		}
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	if len(rep.Violations) > 0 {
		os.Exit(1)
	}
}

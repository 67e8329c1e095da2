package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/actionsledger/actionsledger/bench"
	"github.com/actionsledger/actionsledger/demo"
	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/server"
)

// The programs that drive the service in this process (packages demo and
// bench); their flags and defaults are here, their work is there.

type demoCmd struct {
	database
	Accounts int           `default:"5" help:"Accounts to open (one session each)."`
	Entries  int           `default:"300" help:"Entries to write, spread round-robin over the accounts."`
	Writers  int           `default:"4" help:"Concurrent putValue callers (more writers, more entries per turn)."`
	Workers  int           `default:"4" help:"Concurrent turns."`
	Timeout  time.Duration `default:"60s" help:"How long to wait for every entry to be taken by a turn, and for each step of the agent part."`
	NoAgent  bool          `help:"Skip the second part (an agent, an approval and a held turn)."`
}

func (c *demoCmd) Run(ctx context.Context, log *slog.Logger) error {
	return demo.Run(ctx, demo.Config{DatabaseURL: c.DatabaseURL, Accounts: c.Accounts, Entries: c.Entries, Writers: c.Writers,
		Workers: c.Workers, Timeout: c.Timeout, NoAgent: c.NoAgent}, os.Stdout, log)
}

type benchCmd struct {
	database
	Clients   int           `default:"8" help:"Keep-alive GraphQL clients writing over HTTP."`
	Accounts  int           `default:"100" help:"Accounts, one session of the seed's monitor each."`
	Workers   int           `default:"16" help:"Concurrent turns (as serve's WORKERS)."`
	Duration  time.Duration `default:"10s" help:"Length of each write pass."`
	Ceiling   time.Duration `default:"5s" help:"Length of each ceiling measurement (whole seconds with pgbench)."`
	BulkSize  int           `default:"500" help:"Events per appendEvents request."`
	BulkMax   int64         `default:"60000" help:"Events of the bulk pass at most."`
	Paced     time.Duration `default:"5s" help:"Length of the paced latency pass."`
	Timeout   time.Duration `default:"3m" help:"Longest wait for a pass's entries to be taken by turns."`
	Turns     int           `default:"50" help:"Turns of the session the seed's session query reads."`
	Runs      int           `default:"1" help:"Measurement runs on the same service (ceilings and passes); the ratios line gives the medians."`
	DebugAddr string        `help:"Serve pprof (/debug/pprof/) on this loopback address while the bench runs, to profile a pass."`
}

func (c *benchCmd) Run(ctx context.Context, log *slog.Logger) error {
	if c.DebugAddr != "" {
		stop, err := server.ServeDebug(c.DebugAddr, false)
		if err != nil {
			return err
		}
		defer stop()
	}
	return bench.Run(ctx, bench.Config{DatabaseURL: c.DatabaseURL, Clients: c.Clients, Accounts: c.Accounts, Workers: c.Workers,
		Duration: c.Duration, Ceiling: c.Ceiling, BulkSize: c.BulkSize, BulkMax: c.BulkMax, Paced: c.Paced, Timeout: c.Timeout,
		Turns: c.Turns, Runs: c.Runs}, os.Stdout, observe.AtLeast(log, slog.LevelWarn))
}

type benchClockCmd struct {
	database
	Sessions     int           `default:"100000" help:"Sessions whose hourly clock starts turns (the idle figure)."`
	Idle         time.Duration `default:"30s" help:"How long idle CPU is measured, before and after the sessions exist."`
	IdleLag      int           `default:"5" help:"Sessions of the idle lag pass (every 1s)."`
	Load         int           `default:"300" help:"Sessions of the loaded lag pass (300 every 2s: 150 firings/s)."`
	LoadEvery    time.Duration `default:"2s" help:"Clock period of the loaded pass's sessions."`
	LagDuration  time.Duration `default:"20s" help:"Length of each lag pass."`
	Workers      int           `default:"16" help:"Concurrent turns (executor workers)."`
	StartTimeout time.Duration `default:"10m" help:"Longest wait for the sessions to start."`
}

func (c *benchClockCmd) Run(ctx context.Context, log *slog.Logger) error {
	return bench.RunClock(ctx, bench.ClockConfig{DatabaseURL: c.DatabaseURL, Sessions: c.Sessions, Idle: c.Idle, IdleLag: c.IdleLag,
		Load: c.Load, LoadEvery: c.LoadEvery, LagDuration: c.LagDuration, Workers: c.Workers, StartTimeout: c.StartTimeout}, os.Stdout, log)
}

package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Config is one chaos run's settings (issue 10, `make chaos`). The zero
// value of a field means its default (see Defaults); cmd/chaos reads each
// from a CHAOS_* environment variable or a flag.
type Config struct {
	// Seed drives the load plan and the fault schedule; 0 picks one from
	// the clock. The seed used is printed, and passing it again replays
	// the run's decisions.
	Seed int64
	// Duration is how long the load runs (default 60s).
	Duration time.Duration
	// Rate is the writes per second over all clients (default 40).
	Rate int
	// Clients is the number of concurrent writers (default 4).
	Clients int
	// Accounts is the number of accounts, each a session of each monitor
	// action (default 12; at least Clients, since each client owns some).
	Accounts int
	// KillEvery is the mean time between two kill -9s (default 4s); each
	// gap is drawn uniformly from [KillEvery/2, 3*KillEvery/2].
	KillEvery time.Duration
	// PGRestarts is how many times PostgreSQL is crash-restarted
	// (`pg_ctl restart -m immediate`) during the load (default 2, at least 1).
	PGRestarts int
	// Converge is how long the system may take, after the load ends, to
	// dispatch every event and take every input (default 60s).
	Converge time.Duration
	// Lease is the processes' TURN_LEASE (default 3s): a turn cut off by a
	// kill is claimed again once its lease expires.
	Lease time.Duration
	// WriteBudget is how long one write is retried before the run gives up
	// on it and reports a violation (default 60s).
	WriteBudget time.Duration
	// Bin is the actionsledger binary (default bin/actionsledger).
	Bin string
	// PGBin is the folder holding initdb and pg_ctl; "" takes the newest
	// /usr/lib/postgresql/*/bin, then the folder of pg_ctl on PATH.
	PGBin string
	// KeepLogs keeps the processes' and PostgreSQL's logs after a run that
	// passed (a run with violations always keeps them).
	KeepLogs bool
	// Out receives progress lines and the figures (default os.Stdout).
	Out io.Writer
}

// Defaults returns the default configuration with the given seed.
func Defaults() Config {
	return Config{
		Duration:    60 * time.Second,
		Rate:        40,
		Clients:     4,
		Accounts:    12,
		KillEvery:   4 * time.Second,
		PGRestarts:  2,
		Converge:    60 * time.Second,
		Lease:       3 * time.Second,
		WriteBudget: 60 * time.Second,
		Bin:         "bin/actionsledger",
		Out:         os.Stdout,
	}
}

// withDefaults fills zero fields from Defaults and checks the result.
func (c Config) withDefaults() (Config, error) {
	d := Defaults()
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.Clients == 0 {
		c.Clients = d.Clients
	}
	if c.Accounts == 0 {
		c.Accounts = d.Accounts
	}
	if c.KillEvery == 0 {
		c.KillEvery = d.KillEvery
	}
	if c.PGRestarts == 0 {
		c.PGRestarts = d.PGRestarts
	}
	if c.Converge == 0 {
		c.Converge = d.Converge
	}
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	if c.WriteBudget == 0 {
		c.WriteBudget = d.WriteBudget
	}
	if c.Bin == "" {
		c.Bin = d.Bin
	}
	if c.Out == nil {
		c.Out = d.Out
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	var errs []error
	if c.Duration < 5*time.Second {
		errs = append(errs, fmt.Errorf("duration %s: at least 5s", c.Duration))
	}
	if c.Rate < 1 || c.Clients < 1 || c.Accounts < c.Clients {
		errs = append(errs, fmt.Errorf("rate %d, clients %d, accounts %d: rate and clients at least 1, accounts at least clients", c.Rate, c.Clients, c.Accounts))
	}
	if c.KillEvery < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("kill interval %s: at least 100ms", c.KillEvery))
	}
	if c.PGRestarts < 1 {
		errs = append(errs, fmt.Errorf("postgres restarts %d: at least 1", c.PGRestarts))
	}
	if c.Converge <= 0 || c.Lease <= 0 || c.WriteBudget <= 0 {
		errs = append(errs, errors.New("converge, lease and write budget must be positive"))
	}
	return c, errors.Join(errs...)
}

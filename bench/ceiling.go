package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The ceiling is what PostgreSQL commits of the simplest write: autocommit
// single-row INSERTs into a scratch table of its own (a bigserial key, a
// type, a small jsonb and a default timestamp, like an event without the
// ledger's work), from 1 and from 8 connections. Every throughput figure is
// reported as a ratio to it, measured in the same run.

const (
	ceilingTable  = "bench_ceiling_events"
	ceilingInsert = `INSERT INTO ` + ceilingTable + ` (type, data) VALUES ('entry.inserted', '{"amount": 1}')`
)

// ceiling measures single-row INSERT commits per second from conns
// connections for d: with the pgbench binary when it is on PATH (how the
// issue measured it), else with as many Go connections doing the same.
// how says which.
type ceiling struct {
	dsn     string
	pgbench string // path, "" for the Go measurement
}

func newCeiling(ctx context.Context, dsn string) (*ceiling, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: ceiling: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ceilingTable+` (id bigserial PRIMARY KEY, type text NOT NULL,
		data jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("bench: ceiling table: %w", err)
	}
	path, _ := exec.LookPath("pgbench")
	return &ceiling{dsn: dsn, pgbench: path}, nil
}

func (c *ceiling) how() string {
	if c.pgbench != "" {
		return "pgbench " + c.pgbench
	}
	return "Go connections (no pgbench on PATH)"
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// measure returns commits per second from conns connections over d.
func (c *ceiling) measure(ctx context.Context, conns int, d time.Duration) (float64, error) {
	if c.pgbench == "" {
		return goCeiling(ctx, c.dsn, conns, d)
	}
	script, err := os.CreateTemp("", "bench-ceiling-*.sql")
	if err != nil {
		return 0, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(ceilingInsert + ";\n"); err != nil {
		return 0, err
	}
	script.Close()
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	cmd := exec.CommandContext(ctx, c.pgbench, "-n", "-c", strconv.Itoa(conns), "-j", strconv.Itoa(min(conns, 2)),
		"-T", strconv.Itoa(secs), "-f", script.Name(), c.dsn)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("bench: pgbench: %w: %s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		// pgbench opens its connections inside -T: on a loaded machine a
		// short run can end before any commits ("processed: 0", no tps).
		// Measure the same INSERT from connections opened beforehand.
		return goCeiling(ctx, c.dsn, conns, d)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// goCeiling runs the ceiling's INSERT from conns connections, each opened
// before the clock starts, for d.
func goCeiling(ctx context.Context, dsn string, conns int, d time.Duration) (float64, error) {
	cs := make([]*pgx.Conn, conns)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	for i := range cs {
		var err error
		if cs[i], err = pgx.Connect(ctx, dsn); err != nil {
			return 0, fmt.Errorf("bench: ceiling: %w", err)
		}
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	deadline := start.Add(d)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := c.Exec(ctx, ceilingInsert); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("bench: ceiling: %w", err)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Config sizes a `make bench` run; cmd/actionsledger's bench command sets
// it from its flags (their defaults are the setting).
type Config struct {
	DatabaseURL string        // a fresh database (make bench creates one)
	Clients     int           // keep-alive GraphQL clients (8)
	Accounts    int           // accounts, one monitor session each (100)
	Workers     int           // concurrent turns of the service
	Duration    time.Duration // each write pass
	Ceiling     time.Duration // each ceiling measurement
	BulkSize    int           // records per putValues request
	BulkMax     int64         // events of the bulk pass at most
	Paced       time.Duration // the paced latency pass
	Timeout     time.Duration // longest wait for a pass's entries to be taken by turns
	Turns       int           // turns of the session the session query reads (50)
	Runs        int           // measurement runs (ceilings and passes) on the same service
}

// result is one run's figures.
type result struct {
	c1, c8               [2]float64 // ceiling before, after
	writes, e2eSingle    float64    // per second
	bulk, e2eBulk        float64    // per second; 0 when skipped
	pacedRate            float64
	paced, saturated     passLatency
	single, bulkW        writes
	singleDone, bulkDone time.Duration
	singleTurns          int
	bulkSkipped          string
	// work of the end-to-end passes, from their first write until every
	// input was taken (the writes included)
	singleWork, bulkWork work
}

func (r result) ceiling1() float64 { return (r.c1[0] + r.c1[1]) / 2 }
func (r result) ceiling8() float64 { return (r.c8[0] + r.c8[1]) / 2 }

// e2e is the end-to-end figure of the ratios line: fed by bulk writes,
// or by single ones when the server has no bulk writes.
func (r result) e2e() float64 {
	if r.e2eBulk > 0 {
		return r.e2eBulk
	}
	return r.e2eSingle
}

// Run measures, on c's database, with the service in this process served
// over HTTP and the seed's monitor active (docs/throughput.md, "Benchmark"):
// the single-row INSERT ceiling of PostgreSQL at 1 and 8 connections
// before and after the service's passes; putValue writes from the keep-alive
// clients; bulk writes with putValues; inputs taken by turns end to end,
// fed by either; the latency from an entry's commit to its turn's commit
// when paced at half the end-to-end rate of single writes; and the round trips of
// the seed's session query. Each figure is printed with its ratio to the
// ceiling, and the last line is
//
//	ratios: writes/ceiling8=0.NN bulk/ceiling8=N.NN e2e/ceiling8=0.NN session_query_round_trips=N
//
// (with several runs, the medians).
func Run(ctx context.Context, c Config, out io.Writer, log *slog.Logger) error {
	if c.Clients < 1 || c.Accounts < 1 || c.Duration <= 0 || c.Ceiling <= 0 || c.BulkSize < 1 || c.Runs < 1 || c.Turns < 1 {
		return errors.New("bench: counts and durations must be positive")
	}
	began := time.Now()
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	ceil, err := newCeiling(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	r, err := newRig(ctx, c.DatabaseURL, c.Workers, c.Clients, c.Accounts, log)
	if err != nil {
		return err
	}
	defer func() { _ = r.stop() }()
	say("bench: the service in this process at %s (%d turn workers), the seed's monitor (agent.echo) with %d account sessions, %d keep-alive GraphQL clients; ceiling by %s",
		r.url, c.Workers, c.Accounts, c.Clients, ceil.how())

	trips, runs, err := r.sessionQueryTrips(ctx, c.DatabaseURL, c.Turns)
	if err != nil {
		return err
	}
	say("session query (examples/session_query.graphql) on a %d-turn session: %d round trips (best of %v; target <= 8)", c.Turns, trips, runs)

	bulkErr := r.probeBulk(ctx)
	if bulkErr != nil && !errors.Is(bulkErr, errNoBulk) {
		return bulkErr
	}
	if bulkErr != nil {
		say("SKIPPED bulk writes: %v", bulkErr)
	}
	var results []result
	for i := range c.Runs {
		say("\nrun %d of %d", i+1, c.Runs)
		res, err := measure(ctx, r, ceil, c, fmt.Sprintf("r%d-%s", i, began.Format("150405")), bulkErr, say)
		if err != nil {
			return err
		}
		res.table(out, trips)
		results = append(results, res)
	}
	if err := r.stop(); err != nil {
		return fmt.Errorf("bench: service: %w", err)
	}
	var writes, bulk, e2e, pgSingle []float64
	for _, res := range results {
		writes = append(writes, res.writes/res.ceiling8())
		bulk = append(bulk, res.bulk/res.ceiling8())
		e2e = append(e2e, res.e2e()/res.ceiling8())
		pgSingle = append(pgSingle, res.singleWork.pgPerInput(res.single.n))
	}
	if len(results) > 1 {
		say("\nover %d runs, min / median / max:", len(results))
		for _, f := range []struct {
			name string
			xs   []float64
		}{{"writes/ceiling8", writes}, {"bulk/ceiling8", bulk}, {"e2e/ceiling8", e2e}, {"pg_ms/input", pgSingle}} {
			if slices.Min(f.xs) < 0 {
				continue // not readable
			}
			lo, hi := f.xs[0], f.xs[0]
			for _, x := range f.xs {
				lo, hi = min(lo, x), max(hi, x)
			}
			say("  %-16s %.2f / %.2f / %.2f", f.name, lo, median(f.xs), hi)
		}
	}
	say("bench: done in %.0fs", time.Since(began).Seconds())
	say("ratios: writes/ceiling8=%.2f bulk/ceiling8=%.2f e2e/ceiling8=%.2f session_query_round_trips=%d",
		median(writes), median(bulk), median(e2e), trips)
	return nil
}

// measure runs one run: the ceiling, the passes, the ceiling again.
func measure(ctx context.Context, r *rig, ceil *ceiling, c Config, prefix string, bulkErr error, say func(string, ...any)) (result, error) {
	var res result
	measureCeiling := func(when string, k int) error {
		var err error
		if res.c1[k], err = ceil.measure(ctx, 1, c.Ceiling); err != nil {
			return err
		}
		if res.c8[k], err = ceil.measure(ctx, 8, c.Ceiling); err != nil {
			return err
		}
		say("  ceiling %s: %.0f commits/s at 1 connection, %.0f at 8 (single-row INSERT, autocommit, %s each)", when, res.c1[k], res.c8[k], c.Ceiling)
		return nil
	}
	if err := measureCeiling("before", 0); err != nil {
		return res, err
	}

	// Single writes, as fast as the clients go; then until every entry is taken.
	base, err := r.consumed(ctx)
	if err != nil {
		return res, err
	}
	meter, err := startWork(ctx, r.app.Pool)
	if err != nil {
		return res, err
	}
	res.single, err = r.singleWrites(ctx, prefix+"-s", c.Duration, 0)
	if err != nil {
		return res, err
	}
	res.writes = res.single.rate()
	say("  writes: %d putValue answered in %.1fs from %d clients: %.0f/s", res.single.n, res.single.took.Seconds(), len(r.clients), res.writes)
	res.singleDone, _, err = r.awaitConsumed(ctx, base+res.single.n, res.single.start, c.Timeout)
	if err != nil {
		return res, err
	}
	if res.singleWork, err = meter.stop(ctx); err != nil {
		return res, err
	}
	res.e2eSingle = float64(res.single.n) / res.singleDone.Seconds()
	if res.saturated, err = r.latency(ctx, res.single.acks, res.single.start); err != nil {
		return res, err
	}
	say("  end to end, fed by single writes: every entry taken by a turn %.1fs after the first write: %.0f/s; %d turns, %.1f inputs per turn",
		res.singleDone.Seconds(), res.e2eSingle, res.saturated.turns, float64(res.single.n)/float64(max(res.saturated.turns, 1)))
	say("  latency, saturated: commit->turn %s; stages p50/p99 ms: dispatch %s, wait for a claim %s, turn %s",
		res.saturated.commit, res.saturated.dispatch.short(), res.saturated.wait.short(), res.saturated.turn.short())
	say("  work per input, fed by single writes: %s", res.singleWork.perInput(res.single.n))

	// Bulk writes over the accounts; then until every event is taken.
	if bulkErr != nil {
		res.bulkSkipped = bulkErr.Error()
	} else {
		if base, err = r.consumed(ctx); err != nil {
			return res, err
		}
		if meter, err = startWork(ctx, r.app.Pool); err != nil {
			return res, err
		}
		if res.bulkW, err = r.bulkWrites(ctx, prefix+"-b", c.BulkSize, c.Duration, c.BulkMax); err != nil {
			return res, err
		}
		res.bulk = res.bulkW.rate()
		say("  bulk writes: %d events in %.1fs, %d per putValues request, from %d clients: %.0f/s",
			res.bulkW.n, res.bulkW.took.Seconds(), c.BulkSize, len(r.clients), res.bulk)
		var got int64
		res.bulkDone, got, err = r.awaitConsumed(ctx, base+res.bulkW.n, res.bulkW.start, c.Timeout)
		if err != nil {
			say("  end to end, fed by bulk writes: %v; rate so far", err)
			res.e2eBulk = float64(got-base) / res.bulkDone.Seconds()
		} else {
			res.e2eBulk = float64(res.bulkW.n) / res.bulkDone.Seconds()
		}
		if res.bulkWork, err = meter.stop(ctx); err != nil {
			return res, err
		}
		say("  end to end, fed by bulk writes over %d sessions: every event taken by a turn %.1fs after the first write: %.0f/s",
			len(r.accounts), res.bulkDone.Seconds(), res.e2eBulk)
		say("  work per input, fed by bulk writes: %s", res.bulkWork.perInput(res.bulkW.n))
	}

	// Latency, paced at half the end-to-end rate of single writes: the
	// paced writes are single writes, so half the bulk-fed rate may be
	// more than they can even be written at.
	res.pacedRate = res.e2eSingle / 2
	if base, err = r.consumed(ctx); err != nil {
		return res, err
	}
	paced, err := r.singleWrites(ctx, prefix+"-p", c.Paced, res.pacedRate)
	if err != nil {
		return res, err
	}
	if _, _, err := r.awaitConsumed(ctx, base+paced.n, paced.start, c.Timeout); err != nil {
		return res, err
	}
	if res.paced, err = r.latency(ctx, paced.acks, paced.start); err != nil {
		return res, err
	}
	say("  latency, paced at %.0f/s (half the end-to-end rate fed by single writes) for %s, %d entries written in %.1fs (%.0f/s), %d turns:",
		res.pacedRate, c.Paced, paced.n, paced.took.Seconds(), paced.rate(), res.paced.turns)
	say("    commit->turn %s; putValue answered->turn %s; stages p50/p99 ms: dispatch %s, wait for a claim %s, turn %s",
		res.paced.commit, res.paced.ack, res.paced.dispatch.short(), res.paced.wait.short(), res.paced.turn.short())

	if err := measureCeiling("after", 1); err != nil {
		return res, err
	}
	return res, nil
}

// baselinePGPerInput is the PostgreSQL backend CPU per consumed input, in
// ms, measured when issue 14 was filed (single writes feeding, a turn per
// input); the target is a third of it.
const baselinePGPerInput = 1.7

// table prints the run's figures with their ratios to the ceiling.
func (res result) table(out io.Writer, trips int64) {
	c1, c8 := res.ceiling1(), res.ceiling8()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  figure\tvalue\tratio\ttarget (issue 14)\n")
	fmt.Fprintf(tw, "  ceiling, 1 connection (mean of before and after)\t%.0f/s\t\t\n", c1)
	fmt.Fprintf(tw, "  ceiling, 8 connections (mean of before and after)\t%.0f/s\t\t\n", c8)
	fmt.Fprintf(tw, "  putValue writes, 8 clients\t%.0f/s\twrites/ceiling8=%.2f, /ceiling1=%.2f\t>= 0.40 of ceiling8, >= 1 of ceiling1\n", res.writes, res.writes/c8, res.writes/c1)
	if res.bulkSkipped != "" {
		fmt.Fprintf(tw, "  bulk writes (putValues)\tskipped\tbulk/ceiling8=0.00\t>= 2\n")
	} else {
		fmt.Fprintf(tw, "  bulk writes (putValues)\t%.0f/s\tbulk/ceiling8=%.2f\t>= 2\n", res.bulk, res.bulk/c8)
		fmt.Fprintf(tw, "  end to end, fed by bulk writes\t%.0f/s\te2e/ceiling8=%.2f\t>= 0.50\n", res.e2eBulk, res.e2eBulk/c8)
	}
	fmt.Fprintf(tw, "  end to end, fed by single writes\t%.0f/s\t%.2f of ceiling8\t>= 0.30\n", res.e2eSingle, res.e2eSingle/c8)
	fmt.Fprintf(tw, "  commit->turn, saturated (single writes)\t%s ms p50/p99\t\t\n", res.saturated.commit.short())
	fmt.Fprintf(tw, "  commit->turn, paced at %.0f/s\t%s ms p50/p99\t%.2f of ceiling8 paced\tp50 <= 10, p99 <= 50\n", res.pacedRate, res.paced.commit.short(), res.pacedRate/c8)
	fmt.Fprintf(tw, "  session query round trips\t%d\t\t<= 8\n", trips)
	if pg := res.singleWork.pgPerInput(res.single.n); pg >= 0 {
		fmt.Fprintf(tw, "  PostgreSQL CPU per input, fed by single writes\t%.3f ms\t%.2f of issue 14's 1.7 ms\t<= 0.33\n", pg, pg/baselinePGPerInput)
	}
	if pg := res.bulkWork.pgPerInput(res.bulkW.n); pg >= 0 && res.bulkSkipped == "" {
		fmt.Fprintf(tw, "  PostgreSQL CPU per input, fed by bulk writes\t%.3f ms\t\t\n", pg)
	}
	_ = tw.Flush()
	if res.bulkSkipped != "" {
		fmt.Fprintf(out, "  (e2e/ceiling8 is fed by single writes: %s)\n", strings.TrimSuffix(res.bulkSkipped, "."))
	}
}

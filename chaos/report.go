package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// invariantCount is how many invariants a run checks: Check's and the
// three of Run.
var invariantCount = len(checks) + 3

// Print writes the figures, then PASS or each violation.
func (rep *Report) Print(w io.Writer) {
	f, c := rep.Figures, rep.Config
	fmt.Fprintf(w, "\nchaos figures (seed %d; replay: CHAOS_SEED=%d make chaos)\n", rep.Seed, rep.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("load", "%s at %d writes/s over %d clients, %d accounts", f.Load.Round(100*time.Millisecond), c.Rate, c.Clients, c.Accounts)
	row("writes attempted", "%d (%d accounts, %d entries, %d entry updates)", f.Attempted, f.Accounts, f.Entries, f.Updates)
	row("writes acknowledged", "%d", f.Acked)
	row("writes retried", "%d (%d requests sent again: %s)", f.Retried, f.RetryAttempts, causes(f.RetryCauses))
	kills := 0
	var per []string
	for _, name := range processNames {
		kills += f.Kills[name]
		per = append(per, fmt.Sprintf("%s %d", name, f.Kills[name]))
	}
	row("kills (kill -9)", "%d (%s); %d skipped, process already down", kills, strings.Join(per, ", "), f.KillsSkipped)
	row("postgres restarts", "%d (pg_ctl restart -m immediate)", f.PGRestarts)
	row("failed starts", "%d (exited while starting, e.g. postgres down; started again)", f.FailedStarts)
	row("events", "%d", f.DB.Events)
	row("sessions", "%d", f.DB.Sessions)
	row("turns", "%d (%d executions ran again after a kill or restart)", f.DB.Turns, f.DB.Replayed)
	row("inputs", "%d", f.DB.Inputs)
	row("convergence", "%s after the load (limit %s)", f.Convergence.Round(time.Millisecond), c.Converge)
	row("run time", "%s", f.Total.Round(100*time.Millisecond))
	_ = tw.Flush()
	if len(rep.Violations) == 0 {
		if rep.Kept != "" {
			fmt.Fprintf(w, "logs: %s\n", rep.Kept)
		}
		fmt.Fprintf(w, "PASS: %d invariants hold (seed %d)\n", invariantCount, rep.Seed)
		return
	}
	fmt.Fprintf(w, "FAIL: %d of %d invariants violated (seed %d)\n", len(rep.Violations), invariantCount, rep.Seed)
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(v.String(), "\n", "\n  "))
	}
	if rep.Kept != "" {
		fmt.Fprintf(w, "logs and a pg_dump of the database: %s\n", rep.Kept)
	}
}

// causes lists retried requests by cause, most frequent first.
func causes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// latencies are a sample's nearest-rank percentiles.
type latencies struct {
	n                   int
	p50, p90, p99, pmax time.Duration
}

func newLatencies(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return latencies{len(ds), at(0.50), at(0.90), at(0.99), ds[len(ds)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s / p90 %s / p99 %s / max %s ms", ms(l.p50), ms(l.p90), ms(l.p99), ms(l.pmax))
}

func (l latencies) short() string { return ms(l.p50) + "/" + ms(l.p99) }

// median returns the middle value of xs (the lower of the two middle ones).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// report prints figures as they are measured and collects a final table.
type report struct {
	out  io.Writer
	rows [][3]string // figure, result, how measured
}

func (r *report) say(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }

func (r *report) row(figure, result, how string) {
	r.rows = append(r.rows, [3]string{figure, result, how})
}

func (r *report) table() {
	fmt.Fprintln(r.out)
	tw := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tresult\tmeasured as")
	for _, row := range r.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row[0], row[1], row[2])
	}
	_ = tw.Flush()
}

package bench_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/bench"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// A small `make bench` runs through every pass and ends with the ratios
// line in the issue's format (issue 14). Its figures are not checked: a
// test machine's timings say nothing.
func TestBenchEndsWithRatios(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := bench.Run(context.Background(), bench.Config{DatabaseURL: pgtest.NewDB(t), Clients: 2, Accounts: 3, Workers: 2,
		Duration: 300 * time.Millisecond, Ceiling: time.Second, BulkSize: 10, BulkMax: 100, Paced: 300 * time.Millisecond,
		Timeout: time.Minute, Turns: 3, Runs: 1}, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err, "output:\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Regexp(t, regexp.MustCompile(`^ratios: writes/ceiling8=\d+\.\d\d bulk/ceiling8=\d+\.\d\d e2e/ceiling8=\d+\.\d\d session_query_round_trips=\d+$`),
		lines[len(lines)-1], "output:\n%s", out.String())
	require.Contains(t, out.String(), "session query (examples/session_query.graphql) on a 3-turn session")
}

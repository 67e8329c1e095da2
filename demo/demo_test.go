package demo_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/demo"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// The walkthrough runs to its end on a fresh database: every entry is
// taken once by its account's session (S2, T9), then the agent part's
// approval (P1, P5) and held turn (H1-H3) come out as docs/agents.md says. Run
// returns an error for any deviation it finds.
func TestDemoWalkthrough(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := demo.Run(context.Background(), demo.Config{DatabaseURL: pgtest.NewDB(t), Accounts: 2, Entries: 30, Writers: 3,
		Workers: 2, Timeout: time.Minute}, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err, "output:\n%s", out.String())
	require.Contains(t, out.String(), "demo: 2 sessions, 30 entries")
	require.Contains(t, out.String(), "demo (agent): approval and held turn")
	require.NotContains(t, out.String(), "PROBLEM")
}

package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/turns"
)

// G8: a running turn's reported status shows on its session while it runs
// (the newest line wins, paced), and the outcome's replaces it at commit.
func TestG8AmbientStatusWhileTheTurnRuns(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	b := setup(t, func(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
		req.ReportStatus("reading entry 1")
		req.ReportStatus("reading entry 2") // paced: written after the first, within a second
		close(started)
		<-release
		out, err := countOutcome(req, "")
		out.AmbientStatus = "all entries read"
		return out, err
	})
	ex := b.executor("p", turns.Config{})
	actionID := b.probeMonitor(nil)
	acct := b.openAccount()
	b.entry(acct, 1)
	b.dispatch()
	done := make(chan bool)
	go func() { ran, _ := ex.RunOnce(b.ctx); done <- ran }()
	within(t, started, "the turn to start")
	status := func() string {
		if s := b.session(actionID, acct).AmbientStatus; s != nil {
			return *s
		}
		return ""
	}
	require.Eventually(t, func() bool { return status() == "reading entry 2" }, 30*time.Second, 20*time.Millisecond,
		"the newest reported line shows while the turn runs")
	close(release)
	require.True(t, within(t, done, "the turn to commit"))
	require.Equal(t, "all entries read", status(), "the outcome's status replaces the live one")
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// Issue 12 (observability): `worker` has no API listener; with METRICS_ADDR
// it serves /metrics, /healthz and /readyz on a listener of its own, and
// nothing else there. The built binary runs against a fresh database.
func TestWorkerServesMetricsOnMetricsAddr(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := testBinary(t)
	dsn := pgtest.NewDB(t)
	addr := crashFreeAddr(t)

	logf, err := os.Create(filepath.Join(dir, "worker.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "worker")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "METRICS_ADDR="+addr, "LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() { // before the database is dropped
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("worker log:\n%s", b)
		}
	})

	base := "http://" + addr
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Ready once the database answers, the schema is current and the
	// dispatcher has completed a round.
	deadline := time.Now().Add(60 * time.Second)
	status, body := 0, ""
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the worker exited: %v", err)
		default:
		}
		if status, body = get("/readyz"); status == http.StatusOK {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for readiness
	}
	require.Equal(t, http.StatusOK, status, body)
	var ready struct {
		Ready  bool
		Checks []struct {
			Name string
			OK   bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.True(t, ready.Ready)
	names := map[string]bool{}
	for _, c := range ready.Checks {
		require.True(t, c.OK, c.Name)
		names[c.Name] = true
	}
	require.True(t, names["dispatcher"], "the worker's dispatcher is checked")

	status, body = get("/healthz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok\n", body)

	status, body = get("/metrics")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "actionsledger_dispatch_batches_total")
	require.Contains(t, body, "actionsledger_db_pool_")

	status, body = get("/graphql")
	require.Equal(t, http.StatusNotFound, status, "the metrics listener serves no API")
	require.Contains(t, body, "NOT_FOUND")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, "the worker stops cleanly on SIGTERM")
	stopped = true
}

package main

import (
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
)

// parseServe parses `serve` with args the way run does and returns the
// server configuration it would start with.
func parseServe(t *testing.T, args ...string) server.Config {
	t.Helper()
	var g grammar
	parser, err := kong.New(&g, kong.Name("actionsledger"), cli.Vars, serverVars(), kong.ExplicitGroups(cli.Groups),
		kong.Exit(func(code int) { t.Fatalf("kong exited with %d", code) }))
	require.NoError(t, err)
	_, err = parser.Parse(append([]string{"serve", "--database-url", "postgres://x/y"}, args...))
	require.NoError(t, err)
	return g.Serve.config(func(string) string { return "" })
}

// Issue 12: the live subscription limits are settings of serve (LIVE_*
// environment variables or --live-* flags, docs/configuration.md) and
// reach the server's Limits and LiveConfig; unset, they are the defaults
// the server applies (streams: half of HTTP_MAX_CONNS).
func TestLiveLimitsFromEnvironment(t *testing.T) {
	def := parseServe(t)
	require.Zero(t, def.Limits.MaxStreams, "0: the server takes half of HTTP_MAX_CONNS")
	require.Equal(t, server.MaxConnSubscriptions, def.Limits.MaxSocketSubscriptions)
	require.Equal(t, ledger.DefaultFeedBuffer, def.Live.Buffer)
	require.Equal(t, ledger.TailConfig{Events: ledger.DefaultTailEvents, Bytes: ledger.DefaultTailBytes}, def.Live.Tail)
	require.Equal(t, server.DefaultRecheck, def.Live.Recheck)

	t.Setenv("LIVE_MAX_STREAMS", "40")
	t.Setenv("LIVE_MAX_SOCKET_SUBSCRIPTIONS", "7")
	t.Setenv("LIVE_BUFFER", "1024")
	t.Setenv("LIVE_TAIL_EVENTS", "5000")
	t.Setenv("LIVE_TAIL_BYTES", "2097152")
	t.Setenv("LIVE_RECHECK", "10s")
	t.Setenv("HTTP_MAX_CONNS", "100")
	cfg := parseServe(t)
	require.Equal(t, 100, cfg.Limits.MaxConns)
	require.Equal(t, 40, cfg.Limits.MaxStreams)
	require.Equal(t, 7, cfg.Limits.MaxSocketSubscriptions)
	require.Equal(t, 1024, cfg.Live.Buffer)
	require.Equal(t, ledger.TailConfig{Events: 5000, Bytes: 2 << 20}, cfg.Live.Tail)
	require.Equal(t, 10*time.Second, cfg.Live.Recheck)
}

// Issue 12: a LIVE_* value out of its bounds stops serve before it starts
// (exit 1), naming the setting and its bounds.
func TestLiveLimitsOutOfBounds(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://127.0.0.1:1/none")
	for _, c := range []struct{ env, value, says string }{
		{"LIVE_MAX_STREAMS", "-1", "LIVE_MAX_STREAMS is -1"},
		{"LIVE_MAX_STREAMS", "512", "from 1 to HTTP_MAX_CONNS-1 (511)"},
		{"LIVE_MAX_SOCKET_SUBSCRIPTIONS", "0", "LIVE_MAX_SOCKET_SUBSCRIPTIONS is 0: it is from 1 to 1000"},
		{"LIVE_MAX_SOCKET_SUBSCRIPTIONS", "1001", "from 1 to 1000"},
		{"LIVE_BUFFER", "15", "LIVE_BUFFER is 15: it is from 16 to 65536"},
		{"LIVE_BUFFER", "65537", "LIVE_BUFFER is 65537"},
		{"LIVE_TAIL_EVENTS", "15", "LIVE_TAIL_EVENTS is 15"},
		{"LIVE_TAIL_EVENTS", "1000001", "LIVE_TAIL_EVENTS is 1000001"},
		{"LIVE_TAIL_BYTES", "1048575", "LIVE_TAIL_BYTES is 1048575"},
		{"LIVE_TAIL_BYTES", "1073741825", "LIVE_TAIL_BYTES is 1073741825"},
		{"LIVE_RECHECK", "999ms", "LIVE_RECHECK is 999ms"},
		{"LIVE_RECHECK", "61m", "LIVE_RECHECK is 1h1m0s"},
	} {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			code, _, stderr := runArgs(t, "serve")
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, c.says)
		})
	}
	// The bound of the streams follows HTTP_MAX_CONNS.
	t.Setenv("HTTP_MAX_CONNS", "1000")
	t.Setenv("LIVE_MAX_STREAMS", "999")
	require.Equal(t, 999, parseServe(t).Limits.MaxStreams)
}

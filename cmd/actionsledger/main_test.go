package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
)

// binary is the service built once for the tests that run it as a
// process of its own (the crash tests, the tutorial, the worker): each
// build took 6 s of the package's time.
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// testBinary returns the path of the binary, building it on first use.
func testBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "actionsledger-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "actionsledger")
		if out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// Issue 12 CLI: --help lists the client commands (as the acceptance
// script reads them: at the start of a line) apart from the server and
// database commands, and says which is which.
func TestHelpListsClientAndDatabaseCommands(t *testing.T) {
	code, out, _ := runArgs(t, "--help")
	require.Equal(t, cli.ExitOK, code)
	for _, c := range []string{"apply", "actions", "sessions", "inbox", "respond", "events", "put", "append", "tokens",
		"serve", "worker", "migrate", "token", "demo", "bench", "bench-clock"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\s+`+c+`\b`), out, c)
	}
	client := strings.Index(out, "Client commands: GraphQL clients of a running server")
	database := strings.Index(out, "Server and database commands")
	require.True(t, client > 0 && database > client, "two groups, client commands first:\n%s", out)
	require.Regexp(t, `token create --database-url`, out)
	require.Contains(t, out, "writing to the database directly")
}

// Issue 12 CLI: only the database commands need DATABASE_URL; the client
// commands never open the database.
func TestOnlyDatabaseCommandsNeedDatabaseURL(t *testing.T) {
	// Should a command get past the check, the driver's defaults lead
	// nowhere (no database of anyone's is touched).
	t.Setenv("PGHOST", "/nonexistent")
	t.Setenv("PGPORT", "1")
	t.Setenv("PGDATABASE", "nonexistent")
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{{"migrate"}, {"token", "create", "--admin"}, {"serve"}, {"worker"}} {
		code, _, errOut := runArgs(t, args...)
		require.Equal(t, cli.ExitUsage, code, "%v", args)
		require.Contains(t, errOut, "DATABASE_URL (or --database-url) is empty", "%v", args)
	}
	os.Unsetenv("DATABASE_URL") // t.Setenv restores it afterwards
	code, _, errOut := runArgs(t, "migrate")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errOut, "--database-url")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	code, _, errOut = runArgs(t, "--server", down, "actions", "list")
	require.Equal(t, cli.ExitUnreachable, code, errOut)
}

// Issue 14: without GOGC the process collects at defaultGCPercent; GOGC,
// which the runtime reads itself, is left alone.
func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	setGCPercent(func(string) string { return "" })
	require.Equal(t, defaultGCPercent, debug.SetGCPercent(100))

	setGCPercent(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	require.Equal(t, 100, debug.SetGCPercent(100))
}

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestReadmeTutorial runs the README's tutorial as a newcomer does (issue 12,
// the newcomer's path; SPEC I2: the examples run unchanged): the built binary
// serves a fresh database, and every shell block of the tutorial runs with
// bash, in order, from the repository root, with the CLI and curl against
// that server. The only changes are the ones a newcomer makes too: the
// server's address (the test picks a free port) and the folder of the
// binary (the test builds its own).
//
// Each block runs in a fresh shell after the first block's export lines, as
// in a new terminal. A block that is only `actionsledger sessions watch`
// runs in a terminal of its own: the test waits for the session's first
// line, runs the next block (the entry that starts a turn), waits for the
// live update showing that turn committed, and stops the watch with
// Ctrl-C, which must exit 0. Before each block the test waits until the
// server has settled (every event dispatched, every input taken, no turn
// running), which a person's reading time gives them; within a block
// nothing waits.
//
// Along the way the test asserts what the README says happens: the same
// monitor applied twice, sessions started by the account records, the
// agent's approvals answered once from `inbox` + `respond` and once with
// curl, and the tool's record written.
func TestReadmeTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README tutorial")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (CI is set: .ci/run must provide it)", tool)
			}
			t.Skipf("%s is missing: the tutorial needs it", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	blocks := tutorialBlocks(t, filepath.Join(root, "README.md"))

	p, _ := startCrashService(t)
	server := "http://" + p.addr
	conn, err := pgx.Connect(t.Context(), p.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	// The first block names the server and the binary's folder for every
	// terminal; the test's server and binary take their place.
	exports := blocks[0]
	require.Contains(t, exports, `export PATH="$PWD/bin:$PATH" ACTIONSLEDGER_SERVER=http://127.0.0.1:8080`)
	exports = strings.ReplaceAll(exports, "http://127.0.0.1:8080", server)
	exports = strings.ReplaceAll(exports, `"$PWD/bin:$PATH"`, `"`+filepath.Dir(p.bin)+`:$PATH"`)
	sh := &tutorialShell{t: t, root: root, exports: exports}

	ran := map[string]bool{}
	for i := 1; i < len(blocks); i++ {
		block := blocks[i]
		crashDrain(t, conn, 30*time.Second)
		if isWatchBlock(block) {
			require.Less(t, i+1, len(blocks), "a watch block must be followed by the write it shows")
			w := sh.start(block)
			w.waitFor(t, regexp.MustCompile(`session \S+ OPEN, turn 2 COMPLETED`), "the session as it is")
			i++
			sh.run(blocks[i])
			// Only a live watch prints a running turn's transcript entries
			// and then its commit.
			w.waitFor(t, regexp.MustCompile(`turn 3 entry \d+ reply`), "a transcript entry of the running turn")
			w.waitFor(t, regexp.MustCompile(`turn 3 COMPLETED, 0 pending`), "the turn's commit")
			require.NoError(t, syscall.Kill(-w.cmd.Process.Pid, syscall.SIGINT)) // Ctrl-C
			require.NoError(t, w.wait(), "the watch stops with exit 0 on Ctrl-C:\n%s", w.out.String())
			ran["watch live"] = true
			continue
		}
		out := sh.run(block)
		if strings.Contains(block, "curl ") {
			require.NotContains(t, out, `"errors"`, "a curl block answered with errors:\n%s", out)
			require.Contains(t, out, `"data"`)
		}
		for _, step := range []string{"actionsledger inbox", "actionsledger respond", "respondToSession", "actionsledger events tail"} {
			if strings.Contains(block, step) {
				ran[step] = true
			}
		}
		if strings.Contains(block, "actionsledger respond") {
			require.Contains(t, out, "answered ")
		}
		if strings.HasPrefix(strings.TrimSpace(block), "actionsledger sessions get $MONITOR") {
			require.Contains(t, out, `state:    {"count":2,"last_turn":2}`)
		}
		if strings.Contains(block, "events tail --after 0") {
			require.Contains(t, out, "action_session.responded")
			require.Contains(t, out, "frozen.inserted")
		}
	}
	for _, step := range []string{"watch live", "actionsledger inbox", "actionsledger respond", "respondToSession", "actionsledger events tail"} {
		require.True(t, ran[step], "the tutorial no longer runs %q", step)
	}

	// What the tutorial built: the monitor counted the three entries of the
	// first account; the agent's session took two approvals (turns 1 and 3
	// asked, turns 2 and 4 ran the tool), and nothing waits any more.
	crashDrain(t, conn, 30*time.Second)
	var state string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT state::text FROM sessions
		WHERE action_id = '4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34' AND id = '3f0c9f8e-0000-4000-8000-000000000001'`).Scan(&state))
	require.JSONEq(t, `{"count": 3, "last_turn": 3}`, state)
	var status string
	var turns int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT status, turn_count, state::text FROM sessions
		WHERE action_id = '6a0c2d6e-8f1b-4c1a-9e2d-3b4c5d6e7f80' AND id = '3f0c9f8e-0000-4000-8000-000000000002'`).Scan(&status, &turns, &state))
	require.Equal(t, "OPEN", status)
	require.Equal(t, 4, turns)
	require.JSONEq(t, `{"frozen": true}`, state)
	require.Equal(t, 2, crashCount(t, conn, `SELECT version::int FROM kv_values WHERE namespace = 'frozen' AND key = '3f0c9f8e-0000-4000-8000-000000000002'`))
	require.Equal(t, 2, crashCount(t, conn, `SELECT count(*) FROM session_interrupts WHERE status = 'ANSWERED'`))
	require.Equal(t, 0, crashCount(t, conn, `SELECT count(*) FROM session_interrupts WHERE status = 'PENDING'`))
}

// tutorialBlocks returns the sh blocks of the README's Tutorial section, in
// order.
func tutorialBlocks(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "\n## Tutorial\n")
	require.Positive(t, start, "the README has no Tutorial section")
	end := strings.Index(readme[start+1:], "\n## ")
	require.Positive(t, end, "the Tutorial section does not end")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(readme[start:start+1+end], -1) {
		blocks = append(blocks, m[1])
	}
	require.GreaterOrEqual(t, len(blocks), 8, "the tutorial's shell blocks")
	return blocks
}

// isWatchBlock reports whether block is a lone `sessions watch`: a command
// that runs in a terminal of its own until stopped.
func isWatchBlock(block string) bool {
	b := strings.TrimSpace(block)
	return !strings.Contains(b, "\n") && strings.HasPrefix(b, "actionsledger sessions watch ")
}

// tutorialShell runs blocks as a newcomer's terminal does: bash in the
// repository root, after the export lines.
type tutorialShell struct {
	t       *testing.T
	root    string
	exports string
}

func (s *tutorialShell) command(ctx context.Context, block string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", s.exports+"\n"+block)
	cmd.Dir = s.root
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs block to its end (at most a minute) and returns its output
// (standard output and error); a failing block fails the test.
func (s *tutorialShell) run(block string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	out, err := s.command(ctx, block).CombinedOutput()
	require.NoError(s.t, err, "block:\n%s\noutput:\n%s", block, out)
	s.t.Logf("$ %s\n%s", strings.TrimSpace(block), out)
	return string(out)
}

// start starts block in the background, as in a terminal of its own.
func (s *tutorialShell) start(block string) *tutorialProc {
	s.t.Helper()
	p := &tutorialProc{cmd: s.command(context.Background(), block), changed: make(chan struct{}, 1), done: make(chan error, 1)}
	p.out.changed = p.changed
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	require.NoError(s.t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	s.t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		s.t.Logf("$ %s\n%s", strings.TrimSpace(block), p.out.String())
	})
	return p
}

type tutorialProc struct {
	cmd     *exec.Cmd
	out     notifyBuffer
	changed chan struct{}
	done    chan error
	exited  bool
	err     error
}

// waitFor waits until the output matches re (at most 30 s).
func (p *tutorialProc) waitFor(t *testing.T, re *regexp.Regexp, what string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for !re.MatchString(p.out.String()) {
		select {
		case <-p.changed:
		case err := <-p.done:
			p.exited, p.err = true, err
			require.Regexp(t, re, p.out.String(), "the watch ended (%v) before it printed %s", err, what)
			return
		case <-timeout:
			t.Fatalf("the watch did not print %s within 30s:\n%s", what, p.out.String())
		}
	}
}

func (p *tutorialProc) wait() error {
	if p.exited {
		return p.err
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		return context.DeadlineExceeded
	}
}

// notifyBuffer is a bytes.Buffer safe for a writer and a reader, which
// signals changed after each write.
type notifyBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return n, err
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

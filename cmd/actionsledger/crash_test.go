package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// Crash safety across real processes (HARD-PARTS 2 and 3; S6, T1, T2, T6,
// T7). The built binary serves a fresh database with two copies of the
// example monitor (the example verbatim, and one whose echo turns take
// 50ms). Each round writes a batch of entries through GraphQL and kills the
// process with SIGKILL at a random moment (during the writes, a dispatch or
// a turn), then starts it again. Writes cut off by a kill are retried with
// the same idempotency key. Once everything has drained, the database must
// show every account event as the origin of its session (S2), every entry
// delivered once and every input consumed once, by one completed turn, with
// the state committed together with the consumption.
//
// The kill moments come from a seeded RNG; the seed is logged, and
// CRASH_SEED=<seed> replays it.
func TestCrashSafetyUnderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	const (
		accounts = 4
		rounds   = 6
		batch    = 20
	)
	rng := crashRNG(t)
	p, gql := startCrashService(t)

	example := examples.CreateMonitor
	slow := strings.Replace(example, "sleep_ms: 0", "sleep_ms: 50", 1)
	slow = strings.Replace(slow, `name: "early-fraud-detector"`, `name: "early-fraud-detector-slow"`, 1)
	require.NotEqual(t, example, slow)
	actionIDs := []uuid.UUID{uuid.New(), uuid.New()}
	for i, q := range []string{example, slow} {
		require.NoError(t, gql.do(q, map[string]any{"id": actionIDs[i]}))
	}

	// Every write the test makes, in order, each with its idempotency key.
	var writes []crashWrite
	accts := make([]string, accounts)
	for i := range accts {
		accts[i] = uuid.NewString()
		writes = append(writes, crashWrite{ns: "account", key: accts[i], value: map[string]any{"account_id": accts[i]}})
	}
	for n := range rounds * batch {
		writes = append(writes, crashWrite{ns: "entry", key: uuid.NewString(),
			value: map[string]any{"account_id": accts[rng.IntN(accounts)], "n": n}})
	}

	next := 0
	for round := range rounds {
		end := accounts + (round+1)*batch // the accounts, then a batch of entries per round
		written := make(chan int, 1)
		go func(from, to int) {
			i := from
			for ; i < to; i++ {
				if gql.put(writes[i]) != nil {
					break // the process is gone; the write is retried with its key
				}
			}
			written <- i
		}(next, end)
		// The random moment of the kill: during the writes, a dispatch or a turn.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		p.kill()
		next = <-written
		t.Logf("round %d: killed after %d of %d writes", round, next, len(writes))
		p.start()
	}
	for ; next < len(writes); next++ {
		require.NoError(t, gql.put(writes[next]))
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	crashDrain(t, conn, 90*time.Second)
	p.kill() // nothing may change while we look

	entries := len(writes) - accounts
	require.Equal(t, entries, crashCount(t, conn, `SELECT count(*) FROM events WHERE type = 'entry.inserted'`),
		"every write committed once (idempotency keys)")
	require.Equal(t, len(writes), crashCount(t, conn, `SELECT count(*) FROM kv_values`))
	for _, id := range actionIDs {
		require.Equal(t, accounts, crashCount(t, conn, `SELECT count(*) FROM sessions WHERE action_id = $1`, id))
		// S2, S3: each account event created its account's session of each
		// action and is that session's origin ...
		require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events e
			WHERE e.type = 'account.inserted' AND (SELECT count(*) FROM sessions s
				WHERE s.action_id = $1 AND s.origin_event_id = e.id AND s.id = e.data->>'account_id') <> 1`, id),
			"an account event is not the origin of its session")
		// ... not one of its inputs (S2, S6); and every entry event is an input
		// of exactly one session of each action, once (S6, HARD-PARTS 2).
		require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM events e
			WHERE e.type IN ('account.inserted', 'entry.inserted') AND (SELECT count(*) FROM session_inputs i
				JOIN sessions s ON s.sid = i.sid WHERE s.action_id = $1 AND i.event_id = e.id)
				<> CASE e.type WHEN 'entry.inserted' THEN 1 ELSE 0 END`, id),
			"an entry was not delivered, or delivered twice, or an account event was delivered as an input")
	}
	// T1, T6, HARD-PARTS 3: every input CONSUMED once, by one COMPLETED turn.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_inputs i
		WHERE i.status <> 'CONSUMED' OR i.turn IS NULL
		   OR (SELECT count(*) FROM turn_inputs ti WHERE ti.sid = i.sid AND ti.seq = i.seq) <> 1
		   OR NOT EXISTS (SELECT 1 FROM turn_inputs ti JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn
		                   WHERE ti.sid = i.sid AND ti.seq = i.seq AND ti.turn = i.turn AND t.status = 'COMPLETED')`),
		"an input not consumed exactly once by one completed turn")
	// T1: turns numbered 1..N per session, no gaps (the key forbids duplicates).
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM sessions s
		WHERE s.turn_count <> (SELECT count(*) FROM session_turns t WHERE t.sid = s.sid)
		   OR s.turn_count <> coalesce((SELECT max(number) FROM session_turns t WHERE t.sid = s.sid), 0)
		   OR (s.turn_count > 0 AND (SELECT min(number) FROM session_turns t WHERE t.sid = s.sid) <> 1)`),
		"turn numbers are not 1..N")
	// T6: the echo state counts the inputs consumed: state committed with consumption.
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM sessions s
		WHERE (s.state->>'count')::bigint IS DISTINCT FROM
		      (SELECT count(*) FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'CONSUMED')
		   OR (s.state->>'last_turn')::int IS DISTINCT FROM s.turn_count`),
		"a session's state does not match its consumed inputs")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM session_turns WHERE status <> 'COMPLETED'`), "a turn left RUNNING or failed")
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM executions WHERE status <> 'SUCCEEDED'`))
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM sessions WHERE status <> 'OPEN'`))
	require.Zero(t, crashCount(t, conn, `SELECT count(*) FROM intake_records`))
	t.Logf("%d turns; %d replayed after a kill (attempts > 1)",
		crashCount(t, conn, `SELECT count(*) FROM session_turns`),
		crashCount(t, conn, `SELECT count(*) FROM executions WHERE attempts > 1`))
}

// crashProcess is one `actionsledger serve` at a time on a fixed address.
type crashProcess struct {
	t                       *testing.T
	bin, dsn, addr, logPath string
	cmd                     *exec.Cmd
	exited                  chan struct{}
}

// start runs the binary and waits until /healthz answers.
// crashRNG returns the RNG that picks kill moments, seeded from the clock
// or from CRASH_SEED; the seed is logged so a run can be replayed.
func crashRNG(t *testing.T) *rand.Rand {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CRASH_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "CRASH_SEED")
	}
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(uint64(seed), 0))
}

// startCrashService builds the binary, starts it on a fresh database and
// returns the process and a GraphQL client for it. The process is killed
// when the test ends (before the database is dropped); a failing test logs
// the tail of its log.
func startCrashService(t *testing.T) (*crashProcess, crashClient) {
	dir := t.TempDir()
	bin := testBinary(t)

	dsn := pgtest.NewDB(t)
	p := &crashProcess{t: t, bin: bin, dsn: dsn, addr: crashFreeAddr(t), logPath: filepath.Join(dir, "server.log")}
	t.Cleanup(p.kill) // registered after NewDB's cleanup, so it runs before the drop
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", p.logTail())
		}
	})
	p.start()
	return p, crashClient{url: "http://" + p.addr + "/graphql", http: &http.Client{Timeout: 10 * time.Second}}
}

func (p *crashProcess) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(p.t, err)
	cmd := exec.Command(p.bin, "serve")
	// Kills at random moments cost the turns running then an attempt each
	// (T7 counts a worker that stopped as one): a session caught running
	// by three kills would fail with the default 3 and hold its inputs for
	// good. These tests are about nothing lost and nothing doubled, so
	// turns get attempts to spare; exhaustion has tests of its own (turns).
	cmd.Env = append(os.Environ(), "DATABASE_URL="+p.dsn, "ADDR="+p.addr, "TURN_LEASE=1s", "TURN_ATTEMPTS=20", "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(p.t, cmd.Start())
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}(p.exited)

	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			p.t.Fatalf("the server exited at start:\n%s", p.logTail())
		default:
		}
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness
	}
	p.t.Fatalf("the server did not answer /healthz within 30s:\n%s", p.logTail())
}

// kill sends SIGKILL and waits for the process to be gone. Harmless when
// nothing runs.
func (p *crashProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}

func (p *crashProcess) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func crashFreeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// crashWrite is one putValue the test makes; its key doubles as the
// idempotency key, so a retry after a kill cannot write twice (L3).
type crashWrite struct {
	ns, key string
	value   map[string]any
}

type crashClient struct {
	url  string
	http *http.Client
}

const crashPut = `mutation Put($ns: String!, $key: String!, $value: JSON!, $idem: String) {
  ledger { putValue(namespace: $ns, key: $key, value: $value, idempotencyKey: $idem) { version } }
}`

func (c crashClient) put(w crashWrite) error {
	return c.do(crashPut, map[string]any{"ns": w.ns, "key": w.key, "value": w.value, "idem": "crash-" + w.key})
}

// do posts a GraphQL operation and fails on any GraphQL error.
func (c crashClient) do(query string, vars map[string]any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	resp, err := c.http.Post(c.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if len(out.Errors) > 0 {
		return errors.New(string(out.Errors[0]))
	}
	return nil
}

// crashDrain waits until every event is dispatched, every input consumed
// and no turn runs.
func crashDrain(t *testing.T, conn *pgx.Conn, within time.Duration) {
	t.Helper()
	const q = `SELECT (SELECT position FROM ledger_head) - (SELECT position FROM dispatch_state),
		(SELECT count(*) FROM session_inputs WHERE status <> 'CONSUMED'),
		(SELECT count(*) FROM session_turns WHERE status = 'RUNNING')`
	deadline := time.Now().Add(within)
	var undispatched, pending, running int64
	for time.Now().Before(deadline) {
		require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&undispatched, &pending, &running))
		if undispatched == 0 && pending == 0 && running == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling for an asynchronous outcome
	}
	// Which sessions hold the inputs, and why none runs them.
	rows, err := conn.Query(t.Context(), `SELECT s.id, s.status, coalesce(s.reason, ''), coalesce(s.wait, ''), coalesce(s.next_turn_at::text, 'null'),
			coalesce(s.lease_expires_at::text, 'null'), i.status, i.kind, count(*), min(i.seq), max(i.seq),
			(SELECT count(*) FROM session_interrupts x WHERE x.sid = s.sid AND x.status = 'PENDING')
		FROM session_inputs i JOIN sessions s ON s.sid = i.sid WHERE i.status <> 'CONSUMED'
		GROUP BY s.sid, i.status, i.kind ORDER BY s.sid LIMIT 20`)
	if err == nil {
		for rows.Next() {
			var id, st, reason, wait, next, lease, ist, kind string
			var n, lo, hi, waits int64
			if rows.Scan(&id, &st, &reason, &wait, &next, &lease, &ist, &kind, &n, &lo, &hi, &waits) == nil {
				t.Logf("session %s %s (%s) wait=%q next_turn_at=%s lease=%s: %d %s %s inputs %d-%d, %d interrupts pending", id, st, reason, wait, next, lease, n, ist, kind, lo, hi, waits)
			}
		}
		rows.Close()
	}
	t.Fatalf("not drained after %s: %d events undispatched, %d inputs pending, %d turns running", within, undispatched, pending, running)
}

func crashCount(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

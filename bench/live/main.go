// Command live measures subscriptions (issue 12): how much memory one
// process spends per idle subscriber, over SSE and over graphql-transport-ws,
// and what one ledger notification costs with many subscribers (time until
// every subscriber has the event, and the server's CPU per notification).
//
// It runs the service in this process (server.New, App.Run as a worker for
// the listener and change feed, server.Serve on a loopback port) against
// DATABASE_URL, and runs the subscribers in a child process (this program
// with -client), so the memory it reads (VmRSS, Go heap and stacks) is the
// server's alone. `make bench-live` runs it on a fresh database.
//
// Every subscriber follows ledgerEvents(type: "bench") from just before a
// first event, so each receives it at once: that is how the client knows
// all are in place. Memory is read after a settling pause and a GC.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/server"
)

const query = `subscription($after: String) { ledgerEvents(after: $after, type: "bench") { position } }`

func main() {
	client := flag.Bool("client", false, "run as the subscribers' process (internal)")
	url := flag.String("url", "", "client: the server's base URL")
	transport := flag.String("transport", "sse", "client: sse or ws")
	n := flag.Int("n", 1000, "client: subscribers")
	after := flag.String("after", "0", "client: the position subscribers start after")
	idle := flag.String("subscribers", "1000,10000", "idle subscribers to measure, comma-separated")
	fan := flag.Int("fanout", 1000, "subscribers for the notification cost")
	events := flag.Int("events", 50, "notifications to time")
	transports := flag.String("transports", "sse,ws", "transports to measure")
	flag.Parse()
	if *client {
		if err := runClient(*url, *transport, *n, *after); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*idle, *fan, *events, *transports); err != nil {
		fmt.Fprintln(os.Stderr, "bench-live:", err)
		os.Exit(1)
	}
}

// bench is the in-process service.
type bench struct {
	app *server.App
	url string
}

func run(idle string, fan, events int, transports string) error {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is not set")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lim := server.Limits{MaxConns: 25_000, MaxStreams: 25_000}
	app, err := server.New(ctx, server.Config{DatabaseURL: url, Limits: lim}, log)
	if err != nil {
		return err
	}
	ran := make(chan struct{})
	go func() { // worker: listener, change feed, dispatcher
		defer close(ran)
		_ = app.Run(ctx)
	}()
	defer func() {
		cancel()
		<-ran
		app.Close()
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = server.Serve(ctx, ln, app.Handler(), lim) }()
	b := &bench{app: app, url: "http://" + ln.Addr().String()}

	fmt.Printf("# bench-live: %s, GOMAXPROCS %d, %s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| transport | idle subscribers | RSS per subscriber | Go heap+stacks per subscriber | goroutines per subscriber |")
	fmt.Println("|---|---|---|---|---|")
	var sizes []int
	for _, s := range strings.Split(idle, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-subscribers: %w", err)
		}
		sizes = append(sizes, v)
	}
	tps := strings.Split(transports, ",")
	for _, tp := range tps {
		for _, size := range sizes {
			if err := b.idle(ctx, tp, size); err != nil {
				return err
			}
		}
	}
	fmt.Println()
	fmt.Println("| transport | subscribers | notifications | commit to last delivery p50 / p99 / max | server CPU per notification |")
	fmt.Println("|---|---|---|---|---|")
	for _, tp := range tps {
		if err := b.fanout(ctx, tp, fan, events); err != nil {
			return err
		}
	}
	return nil
}

// append writes one bench event and returns its position and when its
// append returned (committed).
func (b *bench) append(ctx context.Context, i int) (int64, time.Time, error) {
	ev, err := b.app.Ledger.AppendEvent(ctx, "bench", jsonvalue.MustEncode(map[string]any{"i": i}), "")
	return ev.Position, time.Now(), err
}

// child is the subscribers' process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func (b *bench) start(ctx context.Context, transport string, n int) (*child, error) {
	pos, _, err := b.append(ctx, -1)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-client", "-url", b.url, "-transport", transport,
		"-n", strconv.Itoa(n), "-after", strconv.FormatInt(pos-1, 10))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	if line, err := c.next(); err != nil || line != "ready" {
		c.stop()
		return nil, fmt.Errorf("client: %q %v", line, err)
	}
	return c, nil
}

func (c *child) next() (string, error) {
	if !c.lines.Scan() {
		if err := c.lines.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return c.lines.Text(), nil
}

func (c *child) stop() {
	_ = c.in.Close()
	_ = c.cmd.Wait()
}

// memory returns the process's resident set, its Go heap in use plus
// goroutine stacks, and its goroutines, after a GC.
func memory() (rss, heap uint64, goroutines int) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	raw, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return rss, ms.HeapInuse + ms.StackInuse, runtime.NumGoroutine()
}

func (b *bench) idle(ctx context.Context, transport string, n int) error {
	rss0, heap0, g0 := memory()
	c, err := b.start(ctx, transport, n)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the connections settle
	rss1, heap1, g1 := memory()
	if p := os.Getenv("BENCH_LIVE_HEAPPROFILE"); p != "" {
		if f, err := os.Create(p + "." + transport); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	c.stop()
	per := func(a, b uint64) string { return kib(float64(int64(b)-int64(a)) / float64(n)) }
	fmt.Printf("| %s | %d | %s | %s | %.1f |\n", transport, n, per(rss0, rss1), per(heap0, heap1), float64(g1-g0)/float64(n))
	// Wait for the server to close the streams before the next round.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, g := memory(); g <= g0+10 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func kib(bytes float64) string { return fmt.Sprintf("%.1f KiB", bytes/1024) }

func (b *bench) fanout(ctx context.Context, transport string, n, events int) error {
	c, err := b.start(ctx, transport, n)
	if err != nil {
		return err
	}
	defer c.stop()
	time.Sleep(time.Second)
	if p := os.Getenv("BENCH_LIVE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p + "." + transport); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	var lat []time.Duration
	var cpu time.Duration
	for i := 0; i < events; i++ {
		before := cpuTime()
		pos, committed, err := b.append(ctx, i)
		if err != nil {
			return err
		}
		line, err := c.next()
		if err != nil {
			return err
		}
		after := cpuTime()
		var got, last int64
		if _, err := fmt.Sscanf(line, "got %d %d", &got, &last); err != nil || got != pos {
			return fmt.Errorf("client: %q (want position %d)", line, pos)
		}
		cpu += after - before
		lat = append(lat, time.Unix(0, last).Sub(committed))
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	fmt.Printf("| %s | %d | %d | %v / %v / %v | %v |\n", transport, n, events, q(0.5), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond),
		(cpu / time.Duration(events)).Round(10*time.Microsecond))
	return nil
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClient opens n subscriptions, prints "ready" once each has its first
// event, then for each later event "got <position> <unix ns of the last
// subscriber's receipt>" once all have it; it ends when stdin closes.
func runClient(url, transport string, n int, after string) error {
	type seen struct {
		count int
		last  int64
	}
	var mu sync.Mutex
	events := map[int64]*seen{}
	out := bufio.NewWriter(os.Stdout)
	var ready atomic.Int64
	readyc := make(chan struct{})
	recv := func(pos int64) {
		now := time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		s := events[pos]
		if s == nil {
			s = &seen{}
			events[pos] = s
		}
		s.count++
		s.last = max(s.last, now)
		if s.count == n && len(events) > 1 {
			fmt.Fprintf(out, "got %d %d\n", pos, s.last)
			_ = out.Flush()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := func() error {
		first := true
		on := func(pos int64) {
			if first {
				first = false
				if ready.Add(1) == int64(n) {
					close(readyc)
				}
			}
			recv(pos)
		}
		if transport == "ws" {
			return subscribeWS(ctx, url, after, on)
		}
		return subscribeSSE(ctx, url, after, on)
	}
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errc <- sub() }()
		if i%100 == 99 {
			time.Sleep(10 * time.Millisecond) // keep under the listen backlog
		}
	}
	select {
	case <-readyc:
	case err := <-errc:
		return err
	}
	fmt.Fprintln(out, "ready")
	_ = out.Flush()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}

func subscribeSSE(ctx context.Context, url, after string, on func(int64)) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"after": after}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("SSE: HTTP %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			on(position(data))
		}
	}
}

func subscribeWS(ctx context.Context, url, after string, on func(int64)) error {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	if err := send(map[string]any{"type": "connection_init"}); err != nil {
		return err
	}
	if err := send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": map[string]any{"after": after}}}); err != nil {
		return err
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return nil
		}
		var m struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "ping":
			_ = send(map[string]any{"type": "pong"})
		case "next":
			on(position(string(m.Payload)))
		}
	}
}

// position reads ledgerEvents.position from a result.
func position(data string) int64 {
	var r struct {
		Data struct {
			LedgerEvents struct{ Position string }
		}
	}
	_ = json.Unmarshal([]byte(data), &r)
	p, _ := strconv.ParseInt(r.Data.LedgerEvents.Position, 10, 64)
	return p
}

// Command live measures subscriptions (issue 12): how much memory one
// process spends per idle subscriber, over SSE and over graphql-transport-ws,
// and what one notification costs with many subscribers (time until every
// subscriber has the update, the server's CPU and its database round trips
// per notification), for each of ledgerEvents, sessionUpdates and
// inboxUpdates.
//
// It runs the service in this process (server.New, App.Run as a worker for
// the listener, change feed, dispatcher and executor, server.Serve on a
// loopback port) against DATABASE_URL, and runs the subscribers in a child
// process (this program with -client), so the memory and CPU it reads are
// the server's alone. `make bench-live` runs it on a fresh database.
//
// What a notification is, per subscription:
//
//   - ledgerEvents(type: "bench"): an appended event;
//   - sessionUpdates of one session every subscriber watches: an input
//     delivered to it (a record its start trigger matches, which runs no
//     turn), so the dispatcher's transaction is the one change;
//   - inboxUpdates (the console's selection): a held turn raised (an entry
//     whose turn a scripted agent refuses) or answered (SKIP, through the
//     GraphQL API), alternately.
//
// The subscribers of a round all receive their first update at once (the
// event just before, the session, the inbox count): that is how the client
// knows all are in place. Memory is read after a settling pause and a GC.
// CPU and pool acquisitions are counted from the trigger until the last
// subscriber has the update, so they include the trigger's own work (the
// append, the dispatch, the turn, the mutation): the rows with one
// subscriber are that baseline.
package main

import (
	"bufio"
	"bytes"
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
	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/server"
)

// The subscriptions measured and what their subscribers select.
var queries = map[string]string{
	"ledgerEvents": `subscription($after: String) { ledgerEvents(after: $after, type: "bench") { position } }`,
	// The console's session screen's selection.
	"sessionUpdates": `subscription($a: UUID!, $s: String!) { sessionUpdates(actionId: $a, id: $s) {
  kind pendingInputs session { status running updatedAt } turn { number status } turnNumber attempt
  transcriptEntry { sequence kind data at } } }`,
	// The console's inbox badge and list's selection.
	"inboxUpdates": `subscription { inboxUpdates { kind pending item {
  interruptId kind actionName raisedAt
  action { id }
  session { id status }
  approval { tool toolVersion input status response { decision reason responder at } }
  hold { cause category explanation turn status skipRefusal response { decision note responder at } } } } }`,
}

var kinds = []string{"ledgerEvents", "sessionUpdates", "inboxUpdates"}

func main() {
	client := flag.Bool("client", false, "run as the subscribers' process (internal)")
	url := flag.String("url", "", "client: the server's base URL")
	transport := flag.String("transport", "sse", "client: sse or ws")
	n := flag.Int("n", 1000, "client: subscribers")
	sub := flag.String("subscription", "ledgerEvents", "client: the subscription")
	vars := flag.String("vars", "{}", "client: the subscription's variables (JSON)")
	idle := flag.String("subscribers", "1000,10000", "idle subscribers to measure, comma-separated")
	fan := flag.String("fanout", "1,1000", "subscribers for the notification cost, comma-separated")
	events := flag.Int("events", 50, "notifications to time per row")
	transports := flag.String("transports", "sse,ws", "transports to measure")
	subs := flag.String("subscriptions", strings.Join(kinds, ","), "subscriptions to measure")
	flag.Parse()
	if *client {
		if err := runClient(*url, *transport, *sub, *vars, *n); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*idle, *fan, *events, *transports, *subs); err != nil {
		fmt.Fprintln(os.Stderr, "bench-live:", err)
		os.Exit(1)
	}
}

// bench is the in-process service.
type bench struct {
	app  *server.App
	url  string
	http *http.Client

	// sessionUpdates: the watched session and its pending input count.
	watchAction, watchAccount string
	pending                   int
	// inboxUpdates: the agent whose turns are held, its session, and the
	// hold raised last (answered by the next notification).
	holdAction, holdAccount, hold string
}

func ints(list, flagName string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-%s: %w", flagName, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func run(idle, fan string, events int, transports, subs string) error {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is not set")
	}
	sizes, err := ints(idle, "subscribers")
	if err != nil {
		return err
	}
	fans, err := ints(fan, "fanout")
	if err != nil {
		return err
	}
	names := strings.Split(subs, ",")
	for _, k := range names {
		if _, ok := queries[k]; !ok {
			return fmt.Errorf("-subscriptions: %q is not one of %s", k, strings.Join(kinds, ", "))
		}
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
	go func() { // worker: listener, change feed, dispatcher, executor
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
	b := &bench{app: app, url: "http://" + ln.Addr().String(), http: &http.Client{}}
	if err := b.setup(ctx); err != nil {
		return err
	}

	fmt.Printf("# bench-live: %s, GOMAXPROCS %d, %s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| subscription | transport | idle subscribers | RSS per subscriber | Go heap+stacks per subscriber | goroutines per subscriber |")
	fmt.Println("|---|---|---|---|---|---|")
	tps := strings.Split(transports, ",")
	for _, k := range names {
		for _, tp := range tps {
			for _, size := range sizes {
				if err := b.idle(ctx, k, tp, size); err != nil {
					return fmt.Errorf("%s idle over %s: %w", k, tp, err)
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("| subscription | transport | subscribers | notifications | trigger to last delivery p50 / p99 / max | server CPU per notification | pool acquisitions per notification |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, k := range names {
		for _, tp := range tps {
			for _, n := range fans {
				if err := b.fanout(ctx, k, tp, n, events); err != nil {
					return fmt.Errorf("%s fan-out over %s: %w", k, tp, err)
				}
			}
		}
	}
	return nil
}

// gql sends one GraphQL request to the service and decodes its data into
// out (when not nil); errors in the answer are an error.
func (b *bench) gql(ctx context.Context, query string, vars map[string]any, out any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("graphql: %s", r.Errors[0].Message)
	}
	if out != nil {
		return json.Unmarshal(r.Data, out)
	}
	return nil
}

const createAction = `mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { actionId } } }`

// The actions of the bench: an echo action whose sessions only collect
// inputs (nothing names its start trigger in turns.on), and a scripted
// agent that refuses every entry, so each entry's turn is held.
func watchAction() map[string]any {
	return map[string]any{
		"name": "bench-watch", "kind": "agent.echo", "config": map[string]any{"agent_id": "bench", "sleep_ms": 0},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "bench_watch.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "bench_watch_entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session": map[string]any{"id": "string(session.input.account_id)", "turns": map[string]any{"on": []any{"entry"}, "maxInputs": 100}},
	}
}

func holdAction() map[string]any {
	return map[string]any{
		"name": "bench-holds", "kind": "agent",
		"config": map[string]any{"provider": "scripted", "system": "You hold every turn.",
			"script": []any{map[string]any{"step": 0, "refusal": map[string]any{"category": "bench", "explanation": "held for the bench"}}}},
		"triggers": []any{
			map[string]any{"name": "opened", "event": `event.type == "bench_hold.inserted"`,
				"session": map[string]any{"start": map[string]any{"input": map[string]any{"account_id": "string(event.data.account_id)"}}}},
			map[string]any{"name": "entry", "event": `event.type == "bench_hold_entry.inserted"`,
				"session": map[string]any{"resume": map[string]any{"id": "string(event.data.account_id)"}}},
		},
		"session": map[string]any{"id": "string(session.input.account_id)", "turns": map[string]any{"on": []any{"entry"}}},
	}
}

// setup creates the two actions and their sessions.
func (b *bench) setup(ctx context.Context) error {
	b.watchAction, b.watchAccount = uuid.NewString(), "watched"
	b.holdAction, b.holdAccount = uuid.NewString(), "held"
	for id, def := range map[string]map[string]any{b.watchAction: watchAction(), b.holdAction: holdAction()} {
		if err := b.gql(ctx, createAction, map[string]any{"id": id, "input": def}, nil); err != nil {
			return fmt.Errorf("create action: %w", err)
		}
	}
	if err := b.put(ctx, "bench_watch", b.watchAccount); err != nil {
		return err
	}
	if err := b.put(ctx, "bench_hold", b.holdAccount); err != nil {
		return err
	}
	for _, s := range [][2]string{{b.watchAction, b.watchAccount}, {b.holdAction, b.holdAccount}} {
		deadline := time.Now().Add(time.Minute)
		for {
			var out struct {
				Actions struct {
					Action struct{ Session *struct{ Status string } }
				}
			}
			err := b.gql(ctx, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status } } } }`,
				map[string]any{"a": s[0], "s": s[1]}, &out)
			if err != nil {
				return err
			}
			if out.Actions.Action.Session != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("session %s of %s did not start", s[1], s[0])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// put writes a record of namespace ns naming account (a new key each time).
func (b *bench) put(ctx context.Context, ns, account string) error {
	_, err := b.app.Ledger.PutValue(ctx, ns, uuid.NewString(), jsonvalue.MustEncode(map[string]any{"account_id": account}), "")
	return err
}

// vars are the variables of subscription k.
func (b *bench) vars(k string, after int64) map[string]any {
	switch k {
	case "ledgerEvents":
		return map[string]any{"after": strconv.FormatInt(after, 10)}
	case "sessionUpdates":
		return map[string]any{"a": b.watchAction, "s": b.watchAccount}
	}
	return map[string]any{}
}

// notify makes one notification of subscription k happen and returns the
// key of the update every subscriber must receive (see key).
func (b *bench) notify(ctx context.Context, k string, i int) (func(string) bool, error) {
	switch k {
	case "ledgerEvents":
		ev, err := b.app.Ledger.AppendEvent(ctx, "bench", jsonvalue.MustEncode(map[string]any{"i": i}), "")
		want := "pos:" + strconv.FormatInt(ev.Position, 10)
		return func(key string) bool { return key == want }, err
	case "sessionUpdates":
		b.pending++
		want := "pending:" + strconv.Itoa(b.pending)
		return func(key string) bool { return key == want }, b.put(ctx, "bench_watch", b.watchAccount)
	}
	if b.hold == "" {
		return func(key string) bool { return strings.HasPrefix(key, "RAISED:") }, b.put(ctx, "bench_hold_entry", b.holdAccount)
	}
	want := "ANSWERED:" + b.hold
	b.hold = ""
	err := b.gql(ctx, `mutation($a: UUID!, $s: String!, $i: String!) { actions { respondToSession(actionId: $a, id: $s,
  interruptId: $i, response: { hold: { decision: SKIP, note: "bench" } }) { identity } } }`,
		map[string]any{"a": b.holdAction, "s": b.holdAccount, "i": strings.TrimPrefix(want, "ANSWERED:")}, nil)
	return func(key string) bool { return key == want }, err
}

// seen records the update key a notification produced.
func (b *bench) seen(k, key string) {
	if id, ok := strings.CutPrefix(key, "RAISED:"); ok && k == "inboxUpdates" {
		b.hold = id
	}
}

// child is the subscribers' process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func (b *bench) start(ctx context.Context, k, transport string, n int) (*child, error) {
	var after int64
	if k == "ledgerEvents" {
		ev, err := b.app.Ledger.AppendEvent(ctx, "bench", jsonvalue.MustEncode(map[string]any{"i": -1}), "")
		if err != nil {
			return nil, err
		}
		after = ev.Position - 1
	}
	vars, _ := json.Marshal(b.vars(k, after))
	cmd := exec.CommandContext(ctx, os.Args[0], "-client", "-url", b.url, "-transport", transport,
		"-n", strconv.Itoa(n), "-subscription", k, "-vars", string(vars))
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

func (b *bench) idle(ctx context.Context, k, transport string, n int) error {
	rss0, heap0, g0 := memory()
	c, err := b.start(ctx, k, transport, n)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the connections settle
	rss1, heap1, g1 := memory()
	if p := os.Getenv("BENCH_LIVE_HEAPPROFILE"); p != "" {
		if f, err := os.Create(p + "." + k + "." + transport); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	c.stop()
	per := func(a, b uint64) string { return kib(float64(int64(b)-int64(a)) / float64(n)) }
	fmt.Printf("| %s | %s | %d | %s | %s | %.1f |\n", k, transport, n, per(rss0, rss1), per(heap0, heap1), float64(g1-g0)/float64(n))
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

func (b *bench) fanout(ctx context.Context, k, transport string, n, events int) error {
	c, err := b.start(ctx, k, transport, n)
	if err != nil {
		return err
	}
	defer c.stop()
	time.Sleep(time.Second)
	if p := os.Getenv("BENCH_LIVE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p + "." + k + "." + transport + "." + strconv.Itoa(n)); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	var lat []time.Duration
	var cpu time.Duration
	var acquired int64
	for i := 0; i < events; i++ {
		before, acq := cpuTime(), b.app.Pool.Stat().AcquireCount()
		start := time.Now()
		want, err := b.notify(ctx, k, i)
		if err != nil {
			return err
		}
		line, err := c.next()
		if err != nil {
			return err
		}
		after, acq2 := cpuTime(), b.app.Pool.Stat().AcquireCount()
		var key string
		var last int64
		if _, err := fmt.Sscanf(line, "got %s %d", &key, &last); err != nil || !want(key) {
			return fmt.Errorf("client: %q", line)
		}
		b.seen(k, key)
		cpu += after - before
		acquired += acq2 - acq
		lat = append(lat, time.Unix(0, last).Sub(start))
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	fmt.Printf("| %s | %s | %d | %d | %v / %v / %v | %v | %.1f |\n", k, transport, n, events, q(0.5), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond),
		(cpu / time.Duration(events)).Round(10*time.Microsecond), float64(acquired)/float64(events))
	return nil
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// key names the update of a result: what the bench waits for every
// subscriber to have.
func key(sub string, data []byte) (string, error) {
	var r struct {
		Data struct {
			LedgerEvents   *struct{ Position string }
			SessionUpdates *struct {
				Kind          string
				PendingInputs int
			}
			InboxUpdates *struct {
				Kind string
				Item *struct{ InterruptID string }
			}
		}
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return "", err
	}
	if len(r.Errors) > 0 {
		return "", fmt.Errorf("%s: %s %v", sub, r.Errors[0].Message, r.Errors[0].Extensions["code"])
	}
	switch d := r.Data; {
	case d.LedgerEvents != nil:
		return "pos:" + d.LedgerEvents.Position, nil
	case d.SessionUpdates != nil:
		if d.SessionUpdates.Kind != "SESSION" {
			return d.SessionUpdates.Kind + ":", nil
		}
		return "pending:" + strconv.Itoa(d.SessionUpdates.PendingInputs), nil
	case d.InboxUpdates != nil:
		id := ""
		if d.InboxUpdates.Item != nil {
			id = d.InboxUpdates.Item.InterruptID
		}
		return d.InboxUpdates.Kind + ":" + id, nil
	}
	return "", fmt.Errorf("%s: no data in %s", sub, data)
}

// runClient opens n subscriptions, prints "ready" once each has its first
// update, then "got <key> <unix ns of the last subscriber's receipt>" for
// each later update once all have it (keys: pos:<position>,
// pending:<pendingInputs> for SESSION updates, <kind>:<interruptId>), and
// "error <message>" if a subscriber is refused or ended with an error; it
// ends when stdin closes.
func runClient(url, transport, sub, varsJSON string, n int) error {
	query := queries[sub]
	var vars map[string]any
	if err := json.Unmarshal([]byte(varsJSON), &vars); err != nil {
		return err
	}
	type seen struct {
		count int
		last  int64
	}
	var mu sync.Mutex
	keys := map[string]*seen{}
	out := bufio.NewWriter(os.Stdout)
	print := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	var ready atomic.Int64
	readyc := make(chan struct{})
	recv := func(k string) {
		now := time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		s := keys[k]
		if s == nil {
			s = &seen{}
			keys[k] = s
		}
		s.count++
		s.last = max(s.last, now)
		if s.count == n {
			print("got %s %d", k, s.last)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribe := func() error {
		first := true
		on := func(data []byte) error {
			k, err := key(sub, data)
			if err != nil {
				mu.Lock()
				print("error %v", err)
				mu.Unlock()
				return err
			}
			if first {
				first = false
				if ready.Add(1) == int64(n) {
					close(readyc)
				}
				return nil
			}
			if !strings.HasPrefix(k, "TRANSCRIPT:") {
				recv(k)
			}
			return nil
		}
		if transport == "ws" {
			return subscribeWS(ctx, url, query, vars, on)
		}
		return subscribeSSE(ctx, url, query, vars, on)
	}
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errc <- subscribe() }()
		if i%100 == 99 {
			time.Sleep(10 * time.Millisecond) // keep under the listen backlog
		}
	}
	select {
	case <-readyc:
	case err := <-errc:
		return err
	}
	print("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}

func subscribeSSE(ctx context.Context, url, query string, vars map[string]any, on func([]byte) error) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
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
			if err := on([]byte(data)); err != nil {
				return err
			}
		}
	}
}

func subscribeWS(ctx context.Context, url, query string, vars map[string]any, on func([]byte) error) error {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	if err := send(map[string]any{"type": "connection_init"}); err != nil {
		return err
	}
	if err := send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
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
			if err := on(m.Payload); err != nil {
				return err
			}
		case "error":
			return on([]byte(`{"errors":` + string(m.Payload) + `}`))
		}
	}
}

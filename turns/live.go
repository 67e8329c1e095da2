package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// TranscriptChannel carries the transcript entries of running turns as
// their handlers add them (issue 12: sessionUpdates). A running turn's
// transcript is kept in memory and written only when the turn commits
// (Transcript), so its entries are published on this channel from a pool
// connection, outside the turn's transaction: an entry is "what was
// written" even if the attempt that wrote it never commits.
//
// The payload is "<sid>|<JSON LiveEntry>", under 8000 bytes: an entry whose
// data would not fit is sent with Truncated set and Data replaced by
// {"truncated": true, "bytes": <size of the data>, "prefix": "<its JSON
// text, cut>"}; the committed transcript has it whole.
const TranscriptChannel = "actionsledger_transcript"

// maxLivePayload keeps a payload under PostgreSQL's 8000-byte limit.
const maxLivePayload = 7900

// LiveEntry is one transcript entry as TranscriptChannel carries it.
type LiveEntry struct {
	Turn        int       `json:"turn"`
	Attempt     int       `json:"attempt"`
	ExecutionID uuid.UUID `json:"execution_id"`
	Entry
	Truncated bool `json:"truncated,omitempty"`
}

// MarshalJSON writes the entry with lower-case keys.
func (e LiveEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(liveWire{Turn: e.Turn, Attempt: e.Attempt, ExecutionID: e.ExecutionID, Seq: e.Seq,
		Kind: e.Kind, At: e.At, Data: json.RawMessage(e.Data), Truncated: e.Truncated})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *LiveEntry) UnmarshalJSON(b []byte) error {
	var w liveWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = LiveEntry{Turn: w.Turn, Attempt: w.Attempt, ExecutionID: w.ExecutionID, Truncated: w.Truncated,
		Entry: Entry{Seq: w.Seq, Kind: w.Kind, Data: jsonvalue.Value(w.Data), At: w.At.UTC()}}
	return nil
}

type liveWire struct {
	Turn        int             `json:"turn"`
	Attempt     int             `json:"attempt"`
	ExecutionID uuid.UUID       `json:"execution_id"`
	Seq         int             `json:"sequence"`
	Kind        string          `json:"kind"`
	At          time.Time       `json:"at"`
	Data        json.RawMessage `json:"data"`
	Truncated   bool            `json:"truncated,omitempty"`
}

// LivePayload encodes a TranscriptChannel payload for session sid, cutting
// the entry's data to fit.
func LivePayload(sid int64, e LiveEntry) string {
	prefix := strconv.FormatInt(sid, 10) + "|"
	b, err := json.Marshal(e)
	if err == nil && len(prefix)+len(b) <= maxLivePayload {
		return prefix + string(b)
	}
	raw := string(e.Data)
	e.Truncated = true
	e.Kind = text.Store(e.Kind, 200)
	keep := maxLivePayload - len(prefix) - 400
	for range 8 {
		d, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(raw), "prefix": text.Prefix(raw, keep)})
		e.Data = d
		if b, err = json.Marshal(e); err == nil && len(prefix)+len(b) <= maxLivePayload {
			return prefix + string(b)
		}
		// Escapes made the text longer than its bytes: cut more.
		keep = max(keep-(len(prefix)+len(b)-maxLivePayload)-64, 0)
	}
	e.Data = jsonvalue.Value(`{"truncated":true}`)
	b, _ = json.Marshal(e)
	return prefix + string(b)
}

// ParseLive reads a TranscriptChannel payload.
func ParseLive(payload string) (sid int64, e LiveEntry, err error) {
	s, body, ok := strings.Cut(payload, "|")
	if !ok {
		return 0, e, fmt.Errorf("turns: live entry: no session key")
	}
	if sid, err = strconv.ParseInt(s, 10, 64); err != nil {
		return 0, e, fmt.Errorf("turns: live entry: %w", err)
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return 0, e, fmt.Errorf("turns: live entry: %w", err)
	}
	return sid, e, nil
}

// LiveKeys routes TranscriptChannel notes in a ledger.Feed by session key
// (session.SIDKey).
func LiveKeys(payload string) ([]string, bool) {
	s, _, _ := strings.Cut(payload, "|")
	return []string{s}, false
}

// publisher sends live transcript entries in the order they were added,
// batched: entries queue up while one statement is in flight and go out
// together in the next. A goroutine runs only while entries wait.
type publisher struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu      sync.Mutex
	queue   []string
	running bool
	queued  uint64        // entries ever queued
	sent    uint64        // entries ever handed to PostgreSQL (or given up)
	changed chan struct{} // closed and replaced when sent grows
}

// Limits of the publisher: entries waiting (more are dropped and logged;
// subscribers see the gap in sequence numbers) and entries per statement.
const (
	maxLiveQueue = 10_000
	maxLiveBatch = 200
)

func newPublisher(pool *pgxpool.Pool, log *slog.Logger) *publisher {
	return &publisher{pool: pool, log: log, changed: make(chan struct{})}
}

func (p *publisher) add(payload string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) >= maxLiveQueue {
		p.log.Warn("live transcript: queue full, entry not published (subscribers see the gap)")
		return
	}
	p.queue = append(p.queue, payload)
	p.queued++
	if !p.running {
		p.running = true
		go p.drain()
	}
}

func (p *publisher) drain() {
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		n := min(len(p.queue), maxLiveBatch)
		batch := p.queue[:n:n]
		p.queue = p.queue[n:]
		p.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// unnest keeps the array's order, and NOTIFY keeps the order of
		// its calls. Its commit does not wait for a WAL flush (as
		// ledger.Notifier's): live entries are announcements, and a crash
		// loses the turn's attempt with them.
		_, err := p.pool.Exec(ctx, `SELECT pg_notify($1, x)
			  FROM set_config('synchronous_commit', 'off', true), unnest($2::text[]) AS x`, TranscriptChannel, batch)
		cancel()
		if err != nil && !errors.Is(err, puddle.ErrClosedPool) {
			p.log.Warn("live transcript: entries not published (subscribers see the gap)", "entries", n, "err", err)
		}
		p.mu.Lock()
		p.sent += uint64(n)
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// flush waits, at most timeout, until every entry queued so far is
// published, so a turn's entries reach subscribers before its commit does.
func (p *publisher) flush(timeout time.Duration) {
	p.mu.Lock()
	target := p.queued
	p.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		done, ch := p.sent >= target, p.changed
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// liveGate holds a turn's live transcript entries back until its attempt
// has run for the executor's LiveDelay (issue 14). A turn that finishes
// sooner publishes nothing: its transcript commits with it, and
// subscribers read the entries from there (graph's sessionUpdates reader
// reads the committed transcript of each turn that settles). So the
// thousands of short turns a busy pipeline runs per second neither encode
// nor send an entry, nor wait for one to be sent before they commit, while
// a long turn (a model or an HTTP call) still streams. An attempt that
// ends without its transcript being committed (a failed attempt) publishes
// what it held, as does a turn whose commit failed: every entry written
// is seen.
type liveGate struct {
	pub   interface{ add(payload string) } // the executor's publisher
	delay time.Duration

	mu      sync.Mutex
	open    bool // entries go to the publisher as they come
	stopped bool // the attempt ended: the timer no longer opens the gate
	held    []liveItem
	timer   *time.Timer
	sent    bool // an entry of the turn went to the publisher
}

func newLiveGate(pub interface{ add(string) }, delay time.Duration) *liveGate {
	return &liveGate{pub: pub, delay: delay}
}

// begin starts an attempt: closed until delay has passed (open at once for
// a delay of zero or less). What an earlier attempt held is published.
func (g *liveGate) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.publishHeld()
	g.stopTimer()
	g.open, g.stopped = g.delay <= 0, false
	if !g.open {
		g.timer = time.AfterFunc(g.delay, g.timeUp)
	}
}

// liveItem is an entry of session sid's turn, encoded (LivePayload) only
// if it is published.
type liveItem struct {
	sid int64
	e   LiveEntry
}

// add publishes the entry when the gate is open, else holds it.
func (g *liveGate) add(sid int64, e LiveEntry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		g.pub.add(LivePayload(sid, e))
		g.sent = true
		return
	}
	g.held = append(g.held, liveItem{sid, e})
}

// timeUp opens the gate once the delay has passed, unless the attempt has
// ended meanwhile.
func (g *liveGate) timeUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped {
		g.open = true
		g.publishHeld()
	}
}

// stop ends the attempt that is to commit: nothing more is published
// unless release is called. It reports whether any entry of the turn was
// published, which the commit then waits for (entries reach subscribers
// before the commit does).
func (g *liveGate) stop() (published bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopTimer()
	g.open, g.stopped = false, true
	return g.sent
}

// drop forgets what the gate holds: the turn committed, and its committed
// transcript has it.
func (g *liveGate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = nil
}

// release publishes what the gate holds: an attempt whose transcript will
// not be committed with it.
func (g *liveGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.publishHeld()
}

func (g *liveGate) publishHeld() {
	for _, it := range g.held {
		g.pub.add(LivePayload(it.sid, it.e))
		g.sent = true
	}
	g.held = nil
}

func (g *liveGate) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

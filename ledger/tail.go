package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TailConfig tunes a Tail. Zero fields take the defaults in parentheses.
type TailConfig struct {
	// Events is how many of the newest events the tail keeps in memory
	// (1024); a follower further behind reads from the database.
	Events int
	// Bytes bounds the kept events' data, in bytes (16 MiB).
	Bytes int
	// Poll is how often the tail reads without a notification while it has
	// followers (1s): a safety net, notifications normally wake it.
	Poll time.Duration
}

// Defaults of TailConfig.
const (
	DefaultTailEvents = 1024
	DefaultTailBytes  = 16 << 20
)

func (c *TailConfig) defaults() {
	if c.Events <= 0 {
		c.Events = DefaultTailEvents
	}
	if c.Bytes <= 0 {
		c.Bytes = DefaultTailBytes
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
}

// Tail follows the ledger for subscribers of ledgerEvents (issue 12). While
// anyone follows, one reader per process reads each newly committed event
// once, woken by the ledger's notifications (NotifyChannel, through a
// Feed), and keeps the newest ones in memory; followers take events from
// there by position. A follower behind the kept events, or resuming from an
// old cursor, reads them from the database by position instead (a
// catch-up), so it never misses one however slow it is: positions are
// gapless and follow commit order (package doc), so "every event after P up
// to the head the tail has read" is exact. Safe for concurrent use.
type Tail struct {
	pool *pgxpool.Pool
	feed *Feed
	cfg  TailConfig

	mu        sync.Mutex
	ring      []Event // consecutive positions, oldest first
	ringBytes int
	head      int64 // the newest position read; valid while users > 0
	users     int
	changed   chan struct{} // closed and replaced when head advances
	closed    bool

	catchUps atomic.Int64
}

// NewTail returns a Tail reading through pool, woken by feed.
func NewTail(pool *pgxpool.Pool, feed *Feed, cfg TailConfig) *Tail {
	cfg.defaults()
	return &Tail{pool: pool, feed: feed, cfg: cfg, changed: make(chan struct{})}
}

// CatchUps returns how many times a follower read from the database
// because the events it wanted were no longer (or not yet) kept in memory.
func (t *Tail) CatchUps() int64 { return t.catchUps.Load() }

// Run reads new events while the tail has followers, until ctx ends or the
// feed closes; then every follower's Next returns ErrFeedClosed.
func (t *Tail) Run(ctx context.Context) error {
	sub := t.feed.Subscribe(Topic{Channel: NotifyChannel})
	defer sub.Close()
	defer t.close()
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-sub.C():
			if !ok {
				return nil
			}
			sub.Lost() // a dropped wake-up changes nothing: the read goes by position
		case <-tick.C:
		}
		// A failed read is tried again at the next wake-up or tick;
		// followers wait meanwhile.
		_ = t.read(ctx)
	}
}

func (t *Tail) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	close(t.changed)
	t.ring, t.ringBytes = nil, 0
}

// read appends the events committed after head to the ring.
func (t *Tail) read(ctx context.Context) error {
	t.mu.Lock()
	if t.users == 0 || t.closed {
		t.mu.Unlock()
		return nil
	}
	head := t.head
	t.mu.Unlock()
	for {
		evs, err := ReadAfter(ctx, t.pool, head, MaxPage, "")
		if err != nil || len(evs) == 0 {
			return err
		}
		t.mu.Lock()
		if t.closed || t.users == 0 || t.head != head {
			t.mu.Unlock()
			return nil // restarted meanwhile
		}
		for _, ev := range evs {
			t.ring = append(t.ring, ev)
			t.ringBytes += len(ev.Data)
		}
		drop := 0
		for len(t.ring)-drop > t.cfg.Events || (t.ringBytes > t.cfg.Bytes && len(t.ring)-drop > 1) {
			t.ringBytes -= len(t.ring[drop].Data)
			drop++
		}
		if drop > 0 {
			t.ring = append([]Event(nil), t.ring[drop:]...)
		}
		head = evs[len(evs)-1].Position
		t.head = head
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
		if len(evs) < MaxPage {
			return nil
		}
	}
}

// Acquire makes the caller a follower and returns the newest committed
// position, where a follower that wants only events committed from now on
// starts. Call Release when done. Errors: ErrFeedClosed, database errors.
func (t *Tail) Acquire(ctx context.Context) (int64, error) {
	head, err := Head(ctx, t.pool)
	if err != nil {
		return 0, fmt.Errorf("ledger: tail: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrFeedClosed
	}
	if t.users == 0 {
		t.head, t.ring, t.ringBytes = head, nil, 0
	}
	t.users++
	return head, nil
}

// Release ends one Acquire. The last follower gone, the tail stops reading
// and drops the events it kept.
func (t *Tail) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.users--
	if t.users == 0 {
		t.ring, t.ringBytes = nil, 0
	}
}

// Next returns up to limit events with position > after (of type typ when
// typ is not empty), in position order, waiting until there is one; and
// the position the follower has seen up to (the last event returned, or
// further when events of other types came after it). Errors: ctx's error,
// ErrFeedClosed, database errors.
func (t *Tail) Next(ctx context.Context, after int64, typ string, limit int) ([]Event, int64, error) {
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, after, ErrFeedClosed
		}
		head, changed := t.head, t.changed
		if after >= head {
			t.mu.Unlock()
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, after, ctx.Err()
			}
		}
		if len(t.ring) > 0 && after >= t.ring[0].Position-1 {
			out, seen := pick(t.ring[after-(t.ring[0].Position-1):], typ, limit, after)
			t.mu.Unlock()
			if len(out) > 0 {
				return out, seen, nil
			}
			after = seen
			continue
		}
		t.mu.Unlock()
		t.catchUps.Add(1)
		evs, err := readRange(ctx, t.pool, after, head, typ, limit)
		if err != nil {
			return nil, after, err
		}
		seen := head
		if len(evs) == limit {
			seen = evs[len(evs)-1].Position
		}
		if len(evs) > 0 {
			return evs, seen, nil
		}
		after = seen
	}
}

// pick takes up to limit events of type typ from evs (consecutive, after
// position after) and the position it looked up to.
func pick(evs []Event, typ string, limit int, after int64) ([]Event, int64) {
	var out []Event
	seen := after
	for _, ev := range evs {
		seen = ev.Position
		if typ == "" || ev.Type == typ {
			out = append(out, ev)
			if len(out) == limit {
				break
			}
		}
	}
	return out, seen
}

// readRange reads up to limit events with after < position <= upTo,
// optionally of one type, in position order.
func readRange(ctx context.Context, q Querier, after, upTo int64, typ string, limit int) ([]Event, error) {
	var rows pgx.Rows
	var err error
	if typ == "" {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE position > $1 AND position <= $2
			ORDER BY position LIMIT $3`, after, upTo, limit)
	} else {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE type = $4 AND position > $1 AND position <= $2
			ORDER BY position LIMIT $3`, after, upTo, limit, typ)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
}

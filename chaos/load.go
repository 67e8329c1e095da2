package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Record namespaces the load writes; their events are what the monitor
// actions' triggers match (account.inserted starts a session, entry.inserted
// resumes it, entry.updated matches nothing).
const (
	AccountNS = "account"
	EntryNS   = "entry"
)

// Write is one putValue the load makes, under an idempotency key of its own.
type Write struct {
	Namespace, Key string
	// Value is the JSON written; every write's value is distinct (entries
	// carry their write id), so a value names its write.
	Value json.RawMessage
	// IdemKey is the write's idempotency key, the same on every retry.
	IdemKey string
	// Version is the record version the service acknowledged; 0 while the
	// write is not acknowledged.
	Version int64
	// Attempts counts the requests sent for this write (1 = no retry).
	Attempts int
	// Err says why the write was given up, when it was.
	Err string

	update bool // an update of an earlier entry
}

// Acked reports whether the service acknowledged the write.
func (w *Write) Acked() bool { return w.Version > 0 }

// accountIDs draws n account ids (UUIDs, as the monitor's inputSchema
// requires) from rng, so a seed names the same accounts every time.
func accountIDs(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		id, _ := uuid.NewRandomFromReader(rngReader{rng}) // rngReader never fails
		out[i] = id.String()
	}
	return out
}

// loader is one client's plan: it owns the accounts i with i%clients == id,
// opens them over time and writes entries (and entry updates) for the
// accounts it has opened. Its decisions come from its own rng.
type loader struct {
	id       int
	seed     int64
	rng      *rand.Rand
	owned    []string // accounts not yet opened, in order
	opened   []string // accounts whose account write was acknowledged
	entries  []*Write // acknowledged entry inserts, for updates
	revs     map[string]int
	n        int
	interval time.Duration
}

// next returns the loader's next write.
func (l *loader) next() *Write {
	l.n++
	idem := fmt.Sprintf("chaos-%d-c%d-w%d", l.seed, l.id, l.n)
	if len(l.owned) > 0 && (len(l.opened) == 0 || l.rng.IntN(4) == 0) {
		acct := l.owned[0]
		return &Write{Namespace: AccountNS, Key: acct, IdemKey: idem,
			Value: mustJSON(map[string]any{"account_id": acct})}
	}
	if len(l.entries) > 0 && l.rng.IntN(10) == 0 {
		e := l.entries[l.rng.IntN(len(l.entries))]
		l.revs[e.Key]++
		var v map[string]any
		_ = json.Unmarshal(e.Value, &v)
		v["w"], v["rev"] = fmt.Sprintf("c%d-w%d", l.id, l.n), l.revs[e.Key]
		return &Write{Namespace: EntryNS, Key: e.Key, IdemKey: idem, Value: mustJSON(v), update: true}
	}
	acct := l.opened[l.rng.IntN(len(l.opened))]
	key := fmt.Sprintf("c%d-e%d", l.id, l.n)
	return &Write{Namespace: EntryNS, Key: key, IdemKey: idem,
		Value: mustJSON(map[string]any{"account_id": acct, "w": fmt.Sprintf("c%d-w%d", l.id, l.n), "amount": l.rng.IntN(100000)})}
}

// done records an acknowledged write: an opened account, an entry to update.
func (l *loader) done(w *Write) {
	switch {
	case w.Namespace == AccountNS:
		l.owned = l.owned[1:]
		l.opened = append(l.opened, w.Key)
	case w.Version == 1:
		l.entries = append(l.entries, w)
	}
}

// loadResult is what the load did: every write it attempted, in order per
// client, and the retried attempts by cause.
type loadResult struct {
	writes []*Write
	causes map[string]int
}

// runLoad runs cfg.Clients loaders for cfg.Duration at cfg.Rate writes per
// second in total. A write under way when the time is up is finished
// (retried until acknowledged or out of budget). A loader stops early after
// a write that is refused or runs out of budget: later writes may depend on
// it (an entry needs its account), and the run reports the write.
func runLoad(ctx context.Context, cfg Config, c *client, accounts []string, progress func(string, ...any)) loadResult {
	loaders := make([]*loader, cfg.Clients)
	for i := range loaders {
		l := &loader{id: i, seed: cfg.Seed, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(100+i))),
			revs: map[string]int{}, interval: time.Duration(cfg.Clients) * time.Second / time.Duration(cfg.Rate)}
		for a := i; a < len(accounts); a += cfg.Clients {
			l.owned = append(l.owned, accounts[a])
		}
		loaders[i] = l
	}
	end := time.Now().Add(cfg.Duration)
	results := make([][]*Write, len(loaders))
	var wg sync.WaitGroup
	for i, l := range loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(l.interval)
			defer tick.Stop()
			for time.Now().Before(end) {
				w := l.next()
				results[i] = append(results[i], w)
				err := c.put(ctx, w, cfg.WriteBudget)
				if err != nil {
					if ctx.Err() == nil {
						progress("client %d gives up on %s/%s: %v", l.id, w.Namespace, w.Key, err)
					}
					return
				}
				l.done(w)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	wg.Wait()
	var out loadResult
	for _, r := range results {
		out.writes = append(out.writes, r...)
	}
	out.causes = c.retryCauses()
	return out
}

// mustJSON encodes a write's value: maps of strings and integers, which
// always encode.
func mustJSON(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

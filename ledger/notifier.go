package ledger

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier sends the LISTEN/NOTIFY notifications of transactions that
// have committed, outside them (issue 14).
//
// A NOTIFY queued in a transaction is sent at its commit, and PostgreSQL
// serialises such commits on one lock held through each one's WAL flush:
// with every write, dispatch batch, claim and turn notifying, the
// pipeline's commits queued on that lock one disk flush at a time. So the
// hot paths commit without notifying and hand their notifications to the
// process's Notifier, which sends everything queued meanwhile in one
// autocommit statement: one NOTIFY transaction at a time per process,
// carrying many notifications, identical ones once. Its sender runs only
// while there is something to send, so an idle process costs nothing.
//
// Notifications stay wake-ups, as before: every loop they wake also polls,
// and readers read what changed from the database. What changes is a crash
// window: a process that dies between a commit and its notification's send
// (a round trip) leaves the notification unsent; pollers catch up at their
// next poll, and subscribers with the next change of what they watch
// (docs/subscriptions.md).
type Notifier struct {
	pool *pgxpool.Pool
	// Log, when set, reports a send that failed (the notifications of
	// that statement are dropped: they are wake-ups).
	Log *slog.Logger
	// Local, when set, is also handed each notification as it is queued,
	// so that the loops of this process wake without waiting for the
	// round trip through PostgreSQL (they get the sent copy too, later).
	// Set it before the first notification; it must not block.
	Local func(channel, payload string)
	// Origin, when set, is the payload of Wake's notifications: a token of
	// this process, so that its listener can skip the copies of its own
	// wake-ups, which Local has delivered already (an executor woken twice
	// for one delivery claims twice, the second time for nothing).
	Origin string

	mu      sync.Mutex
	pending []notification
	seen    map[notification]bool
	head    int64 // the newest ledger position to announce on NotifyChannel; 0: none
	sent    int64 // the newest position announced
	sending bool
	idle    *sync.Cond // signalled when a send ends with nothing pending
}

type notification struct{ channel, payload string }

// notifyTimeout bounds one send.
const notifyTimeout = 10 * time.Second

// NewNotifier returns a Notifier sending through pool.
func NewNotifier(pool *pgxpool.Pool) *Notifier {
	n := &Notifier{pool: pool, seen: map[notification]bool{}}
	n.idle = sync.NewCond(&n.mu)
	return n
}

// Notify queues a notification on channel with payload, sent soon after
// with the others queued meanwhile. Call it once the transaction it
// announces has committed. It never blocks; a nil Notifier drops it.
func (n *Notifier) Notify(channel, payload string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	k := notification{channel, payload}
	if !n.seen[k] {
		n.seen[k] = true
		n.pending = append(n.pending, k)
	}
	n.startLocked()
	n.mu.Unlock()
	if n.Local != nil {
		n.Local(channel, payload)
	}
}

// Wake queues a wake-up on channel, one whose listeners read no payload:
// its payload is Origin.
func (n *Notifier) Wake(channel string) {
	if n == nil {
		return
	}
	n.Notify(channel, n.Origin)
}

// Head queues the ledger's notification (NotifyChannel) that the head
// reached position: of the heads queued before a send, only the newest is
// sent, and none older than one sent before, as readers read everything up
// to it.
func (n *Notifier) Head(position int64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.head = max(n.head, position)
	n.startLocked()
	n.mu.Unlock()
	if n.Local != nil {
		n.Local(NotifyChannel, strconv.FormatInt(position, 10))
	}
}

// startLocked starts the sender unless it runs (n.mu held).
func (n *Notifier) startLocked() {
	if !n.sending {
		n.sending = true
		go n.send()
	}
}

// Flush waits until everything queued before it has been sent (or its
// send failed). For tests and shutdown.
func (n *Notifier) Flush() {
	if n == nil {
		return
	}
	n.mu.Lock()
	for n.sending {
		n.idle.Wait()
	}
	n.mu.Unlock()
}

// send sends what is queued, one statement at a time, until nothing is.
func (n *Notifier) send() {
	for {
		n.mu.Lock()
		batch := n.pending
		if n.head > n.sent {
			batch = append(batch, notification{NotifyChannel, strconv.FormatInt(n.head, 10)})
			n.sent = n.head
		}
		n.pending, n.head = nil, 0
		clear(n.seen)
		if len(batch) == 0 {
			n.sending = false
			n.idle.Broadcast()
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		channels, payloads := make([]string, len(batch)), make([]string, len(batch))
		for i, x := range batch {
			channels[i], payloads[i] = x.channel, x.payload
		}
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		// unnest keeps the arrays' order, and NOTIFY keeps the order of a
		// transaction's notifications. NOTIFY gives its transaction an id,
		// so its commit would wait for a WAL flush like a write's; what it
		// announces has committed already, and a wake-up lost in a crash is
		// one the pollers make up for, so it commits without waiting
		// (synchronous_commit off for this statement's transaction alone).
		_, err := n.pool.Exec(ctx, `SELECT pg_notify(x.c, x.p)
			  FROM set_config('synchronous_commit', 'off', true), unnest($1::text[], $2::text[]) AS x (c, p)`, channels, payloads)
		cancel()
		if err != nil && n.Log != nil {
			n.Log.Warn("notifications not sent (wake-ups only: pollers catch up)", "count", len(batch), "err", err)
		}
	}
}

package turns

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// heartbeats keeps the leases of an executor's running turns alive: every
// third of the lease, one statement extends all of them (session.Extend).
// A turn whose lease is gone (taken over after it expired) has its run
// cancelled and its lost channel closed. A goroutine runs only while some
// turn runs.
type heartbeats struct {
	e *Executor
	// mu is held while a beat is in flight, so that remove waits for it.
	mu      sync.Mutex
	held    map[int64]*beat
	running bool
}

type beat struct {
	lease  session.Lease
	cancel context.CancelFunc
	lost   chan struct{}
}

// add keeps l alive until remove; cancel is called, and the returned
// channel closed, when the lease turns out lost.
func (h *heartbeats) add(l session.Lease, cancel context.CancelFunc) <-chan struct{} {
	b := &beat{lease: l, cancel: cancel, lost: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[l.SID] = b
	if !h.running {
		h.running = true
		go h.loop()
	}
	return b.lost
}

// remove stops keeping l alive, waiting for a beat in flight.
func (h *heartbeats) remove(l session.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.held[l.SID]; b != nil && b.lease == l {
		delete(h.held, l.SID)
	}
}

func (h *heartbeats) loop() {
	t := time.NewTicker(h.e.cfg.Lease / 3)
	defer t.Stop()
	for range t.C {
		h.mu.Lock()
		if len(h.held) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.beat()
		h.mu.Unlock()
	}
}

// beat extends every lease held; called with mu held.
func (h *heartbeats) beat() {
	leases := make([]session.Lease, 0, len(h.held))
	for _, b := range h.held {
		leases = append(leases, b.lease)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(h.e.cfg.Lease, 10*time.Second))
	defer cancel()
	lost, err := session.Extend(ctx, h.e.pool, leases, h.e.clock.Now().Add(h.e.cfg.Lease))
	if err != nil {
		return // transient; the next beat tries again
	}
	for _, sid := range lost {
		if b := h.held[sid]; b != nil {
			delete(h.held, sid)
			close(b.lost)
			b.cancel()
		}
	}
}

// touchedEnv is a handler's Env that notes whether the handler reached
// the ledger, a session or a tool through it: only then can the turn's
// writer have begun a transaction, in which the turn must commit.
type touchedEnv struct {
	Env
	touched *atomic.Bool
}

func (t touchedEnv) LedgerGet(ctx context.Context, namespace, key string) (jsonvalue.Value, bool, error) {
	t.touched.Store(true)
	return t.Env.LedgerGet(ctx, namespace, key)
}

func (t touchedEnv) LedgerPut(ctx context.Context, namespace, key string, value jsonvalue.Value) (int64, error) {
	t.touched.Store(true)
	return t.Env.LedgerPut(ctx, namespace, key, value)
}

func (t touchedEnv) Session(ctx context.Context, actionID, id string) (*SessionView, error) {
	t.touched.Store(true)
	return t.Env.Session(ctx, actionID, id)
}

func (t touchedEnv) CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	t.touched.Store(true)
	return t.Env.CallTool(ctx, actionID, input)
}

// MayCall begins no transaction (tools.Service reads it outside the turn's).
func (t touchedEnv) MayCall(ctx context.Context, actionID string) (bool, error) {
	return t.Env.MayCall(ctx, actionID)
}

func (t touchedEnv) CallApprovedTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	t.touched.Store(true)
	return t.Env.CallApprovedTool(ctx, actionID, input)
}

package turns

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// heartbeats keeps the leases of an executor's running turns (and
// executions without a session) alive: every third of the lease, one
// statement extends all the sessions' (session.Extend) and one all the
// executions'.
// A turn whose lease is gone (taken over after it expired) has its run
// cancelled and its lost channel closed. A goroutine runs only while some
// turn runs.
type heartbeats struct {
	e *Executor
	// mu is held while a beat is in flight, so that remove waits for it.
	mu   sync.Mutex
	held map[int64]*beat
	// jobs are the leases of running executions without a session
	// (issue 15), by execution.
	jobs    map[uuid.UUID]*jobBeat
	running bool
}

type jobBeat struct {
	token  int64
	cancel context.CancelFunc
	lost   chan struct{}
}

// addJob keeps the lease of execution id (fencing token token) alive
// until removeJob, as add does for a session's.
func (h *heartbeats) addJob(id uuid.UUID, token int64, cancel context.CancelFunc) <-chan struct{} {
	b := &jobBeat{token: token, cancel: cancel, lost: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs[id] = b
	h.start()
	return b.lost
}

// removeJob stops keeping execution id's lease alive, waiting for a beat
// in flight.
func (h *heartbeats) removeJob(id uuid.UUID, token int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.jobs[id]; b != nil && b.token == token {
		delete(h.jobs, id)
	}
}

// start starts the loop if it is not running; called with mu held.
func (h *heartbeats) start() {
	if !h.running {
		h.running = true
		go h.loop()
	}
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
	h.start()
	return b.lost
}

// interrupt cancels the run of sid's turn, when this executor runs it
// (G9); its settlement, which reads the interrupt, ends it.
func (h *heartbeats) interrupt(sid int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.held[sid]; b != nil {
		b.cancel()
		return true
	}
	return false
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
		if len(h.held) == 0 && len(h.jobs) == 0 {
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
	h.beatJobs()
	if len(h.held) == 0 {
		return
	}
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

// beatJobs extends the leases of the running executions without a
// session in one statement; one whose lease is gone has its run cancelled.
// Called with mu held.
func (h *heartbeats) beatJobs() {
	if len(h.jobs) == 0 {
		return
	}
	ids, tokens := make([]uuid.UUID, 0, len(h.jobs)), make([]int64, 0, len(h.jobs))
	for id, b := range h.jobs {
		ids, tokens = append(ids, id), append(tokens, b.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(h.e.cfg.Lease, 10*time.Second))
	defer cancel()
	until := h.e.clock.Now().Add(h.e.cfg.Lease)
	rows, err := h.e.pool.Query(ctx, `
		WITH u AS (
			UPDATE executions x SET lease_expires_at = $3, available_at = $3
			  FROM unnest($1::uuid[], $2::bigint[]) AS l (id, token)
			 WHERE x.id = l.id AND x.lease_token = l.token AND x.status = 'RUNNING'
			RETURNING x.id)
		SELECT l.id FROM unnest($1::uuid[]) AS l (id) WHERE l.id NOT IN (SELECT id FROM u)`, ids, tokens, until)
	if err != nil {
		return // transient; the next beat tries again
	}
	lost, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return
	}
	for _, id := range lost {
		if b := h.jobs[id]; b != nil {
			delete(h.jobs, id)
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

// SendToSession delegates to an Env that is a Messenger (G1).
func (t touchedEnv) SendToSession(ctx context.Context, actionID, id, message, key string) (int64, error) {
	m, ok := t.Env.(Messenger)
	if !ok {
		return 0, Permanent(errors.New("this server's handlers cannot message other sessions"))
	}
	t.touched.Store(true)
	return m.SendToSession(ctx, actionID, id, message, key)
}

// MayCall begins no transaction (tools.Service reads it outside the turn's).
func (t touchedEnv) MayCall(ctx context.Context, actionID string) (bool, error) {
	return t.Env.MayCall(ctx, actionID)
}

func (t touchedEnv) CallApprovedTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	t.touched.Store(true)
	return t.Env.CallApprovedTool(ctx, actionID, input)
}

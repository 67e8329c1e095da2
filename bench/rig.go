package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/server"
)

// rig is the service running in this process and served over HTTP on a
// loopback port, the seed's monitor with its account sessions open, and
// the keep-alive GraphQL clients that drive it. Everything the benchmark
// writes and reads goes through the GraphQL API.
type rig struct {
	app      *server.App
	stopApp  func() error
	stopHTTP func() error
	url      string
	clients  []*client
	actionID uuid.UUID
	accounts []string
}

// newRig starts the service on dsn with workers turn workers, makes
// clients clients, creates the monitor with the seed's CreateMonitor
// operation and opens accounts accounts, waiting until each has its
// session.
func newRig(ctx context.Context, dsn string, workers, clients, accounts int, log *slog.Logger) (_ *rig, err error) {
	r := &rig{}
	defer func() {
		if err != nil {
			_ = r.stop()
		}
	}()
	if r.app, r.stopApp, err = server.Start(ctx, server.Config{DatabaseURL: dsn, Workers: workers}, log); err != nil {
		return nil, err
	}
	if r.url, r.stopHTTP, err = serve(ctx, r.app); err != nil {
		return nil, err
	}
	for range clients {
		r.clients = append(r.clients, newClient(r.url))
	}
	r.actionID = uuid.New()
	if err := r.clients[0].do(ctx, examples.CreateMonitor, map[string]any{"id": r.actionID}, nil); err != nil {
		return nil, fmt.Errorf("bench: CreateMonitor: %w", err)
	}
	for range accounts {
		acct := uuid.NewString()
		if err := r.put(ctx, r.clients[0], "account", acct, map[string]any{"account_id": acct}, nil); err != nil {
			return nil, err
		}
		r.accounts = append(r.accounts, acct)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ss, err := r.sessions(ctx)
		if err != nil {
			return nil, err
		}
		if len(ss) >= accounts {
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: %d of %d account sessions started", len(ss), accounts)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// stop stops serving and the service; calling it again is harmless.
func (r *rig) stop() error {
	for _, c := range r.clients {
		c.close()
	}
	var errs []error
	if r.stopHTTP != nil {
		errs = append(errs, r.stopHTTP())
	}
	if r.stopApp != nil {
		errs = append(errs, r.stopApp())
	}
	return errors.Join(errs...)
}

// serve serves app's GraphQL API over HTTP on a loopback port until stop
// is called, and returns its URL; stop returns what the server did.
func serve(ctx context.Context, app *server.App) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, app.Handler(), server.Limits{}) }()
	var once sync.Once
	var serveErr error
	return "http://" + ln.Addr().String() + "/graphql", func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}, nil
}

const putValueOp = `mutation($ns: String!, $k: String!, $v: JSON!, $ik: String) {
  ledger { putValue(namespace: $ns, key: $k, value: $v, idempotencyKey: $ik) { event { id } } } }`

// put writes a record with putValue (its key doubles as its idempotency
// key) and stores its event's id in id when id is not nil.
func (r *rig) put(ctx context.Context, c *client, ns, key string, value any, id *uuid.UUID) error {
	var out struct {
		Ledger struct {
			PutValue struct{ Event struct{ ID uuid.UUID } }
		}
	}
	if err := c.do(ctx, putValueOp, map[string]any{"ns": ns, "k": key, "v": value, "ik": key}, &out); err != nil {
		return fmt.Errorf("bench: putValue: %w", err)
	}
	if id != nil {
		*id = out.Ledger.PutValue.Event.ID
	}
	return nil
}

// sessionState is a monitor session as the benchmark polls it: the echo
// handler keeps the count of inputs its turns took in the state.
type sessionState struct {
	ID    string
	State struct{ Count int64 }
}

const sessionsOp = `query($a: UUID!, $after: String) { actions { action(id: $a) {
  sessions(first: 500, after: $after) { nodes { id state } pageInfo { hasNextPage endCursor } } } } }`

// sessions lists the monitor's sessions.
func (r *rig) sessions(ctx context.Context) ([]sessionState, error) {
	var all []sessionState
	var after *string
	for {
		var out struct {
			Actions struct {
				Action struct {
					Sessions struct {
						Nodes    []sessionState
						PageInfo struct {
							HasNextPage bool
							EndCursor   *string
						}
					}
				}
			}
		}
		if err := r.clients[0].do(ctx, sessionsOp, map[string]any{"a": r.actionID, "after": after}, &out); err != nil {
			return nil, fmt.Errorf("bench: sessions: %w", err)
		}
		s := out.Actions.Action.Sessions
		all = append(all, s.Nodes...)
		if !s.PageInfo.HasNextPage {
			return all, nil
		}
		after = s.PageInfo.EndCursor
	}
}

// consumed returns how many inputs the monitor's turns have taken in all.
func (r *rig) consumed(ctx context.Context) (int64, error) {
	ss, err := r.sessions(ctx)
	var n int64
	for _, s := range ss {
		n += s.State.Count
	}
	return n, err
}

// awaitConsumed polls every 20 ms until the monitor's turns have taken
// want inputs in all and returns the time since start when they had; after
// timeout it returns the time so far, how many were taken, and an error.
func (r *rig) awaitConsumed(ctx context.Context, want int64, start time.Time, timeout time.Duration) (time.Duration, int64, error) {
	for {
		got, err := r.consumed(ctx)
		if err != nil {
			return 0, 0, err
		}
		if got >= want {
			return time.Since(start), got, nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), got, fmt.Errorf("bench: after %s, %d inputs were still not taken by a turn", timeout.Round(time.Second), want-got)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return 0, 0, err
		}
	}
}

// turnsOp pages a session's turns, newest first, with what the latency
// figures need.
const turnsOp = `query($a: UUID!, $id: String!, $after: String) { actions { action(id: $a) { session(id: $id) {
  turns(first: 100, after: $after) { pageInfo { hasNextPage endCursor }
    nodes { number startedAt finishedAt inputs { deliveredAt event { id commitTime } } } } } } } }`

// turnView is one turn as turnsOp reads it.
type turnView struct {
	Number     int
	StartedAt  time.Time
	FinishedAt *time.Time
	Inputs     []struct {
		DeliveredAt time.Time
		Event       *struct {
			ID         uuid.UUID
			CommitTime time.Time
		}
	}
}

// passLatency is where a pass's entries spent their time, from the
// commit of an entry's event to the commit of the turn that took it.
type passLatency struct {
	commit, ack          latencies // commit -> turn commit; putValue answered -> turn commit
	dispatch, wait, turn latencies // commit -> delivered; delivered -> turn start; turn start -> turn commit
	turns                int       // turns that took the pass's entries
}

// latency reads the turns of every account session that started since
// `since` and measures the entries of ids (event id -> when its write was
// answered; the zero time when unknown).
func (r *rig) latency(ctx context.Context, ids map[uuid.UUID]time.Time, since time.Time) (passLatency, error) {
	var mu sync.Mutex
	var commit, ack, dispatch, wait, run []time.Duration
	turns := 0
	jobs := make(chan string, len(r.accounts))
	for _, a := range r.accounts {
		jobs <- a
	}
	close(jobs)
	errs := make(chan error, len(r.clients))
	var wg sync.WaitGroup
	for _, c := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for acct := range jobs {
				ts, err := r.turnsSince(ctx, c, acct, since)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, t := range ts {
					took := false
					for _, in := range t.Inputs {
						if in.Event == nil || t.FinishedAt == nil {
							continue
						}
						acked, ok := ids[in.Event.ID]
						if !ok {
							continue
						}
						took = true
						commit = append(commit, t.FinishedAt.Sub(in.Event.CommitTime))
						if !acked.IsZero() {
							ack = append(ack, t.FinishedAt.Sub(acked))
						}
						dispatch = append(dispatch, in.DeliveredAt.Sub(in.Event.CommitTime))
						wait = append(wait, t.StartedAt.Sub(in.DeliveredAt))
						run = append(run, t.FinishedAt.Sub(t.StartedAt))
					}
					if took {
						turns++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return passLatency{}, err
	}
	if len(commit) != len(ids) {
		return passLatency{}, fmt.Errorf("bench: latency: %d of %d entries found in a turn", len(commit), len(ids))
	}
	return passLatency{commit: newLatencies(commit), ack: newLatencies(ack), dispatch: newLatencies(dispatch),
		wait: newLatencies(wait), turn: newLatencies(run), turns: turns}, nil
}

// turnsSince returns a session's turns that started at or after since.
func (r *rig) turnsSince(ctx context.Context, c *client, acct string, since time.Time) ([]turnView, error) {
	var out []turnView
	var after *string
	for {
		var page struct {
			Actions struct {
				Action struct {
					Session *struct {
						Turns struct {
							Nodes    []turnView
							PageInfo struct {
								HasNextPage bool
								EndCursor   *string
							}
						}
					}
				}
			}
		}
		if err := c.do(ctx, turnsOp, map[string]any{"a": r.actionID, "id": acct, "after": after}, &page); err != nil {
			return nil, fmt.Errorf("bench: turns: %w", err)
		}
		s := page.Actions.Action.Session
		if s == nil {
			return nil, fmt.Errorf("bench: no session for account %s", acct)
		}
		for _, t := range s.Turns.Nodes {
			if t.StartedAt.Before(since) {
				return out, nil
			}
			out = append(out, t)
		}
		if !s.Turns.PageInfo.HasNextPage {
			return out, nil
		}
		after = s.Turns.PageInfo.EndCursor
	}
}

// entry is the value of the n-th entry of the account.
func entry(acct string, n int) map[string]any {
	return map[string]any{"account_id": acct, "amount": json.Number(strconv.Itoa(100 + n%90000))}
}

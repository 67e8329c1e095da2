package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/internal/pgproxy"
	"github.com/actionsledger/actionsledger/server"
)

// sessionQueryTrips builds a session of the monitor with turns turns (one
// entry each, written once the last is taken) and counts what the seed's
// session query (examples/session_query.graphql) costs on it in database
// round trips: a second instance of the service, whose connections go
// through a proxy counting Sync and Query messages (package pgproxy, as the
// acceptance counts them), answers it five times, 300 ms apart; the best
// run counts (a first run prepares its statements, and a connection idle
// for a second is pinged before use). It returns the best and every run.
func (r *rig) sessionQueryTrips(ctx context.Context, dsn string, turns int) (int64, []int64, error) {
	acct := uuid.NewString()
	c := r.clients[0]
	if err := r.put(ctx, c, "account", acct, map[string]any{"account_id": acct}, nil); err != nil {
		return 0, nil, err
	}
	for i := range turns {
		if err := r.put(ctx, c, "entry", fmt.Sprintf("trips-%s-%d", acct, i), entry(acct, i), nil); err != nil {
			return 0, nil, err
		}
		if err := r.awaitTurns(ctx, acct, i+1); err != nil {
			return 0, nil, err
		}
	}

	proxy, err := pgproxy.Start(dsn)
	if err != nil {
		return 0, nil, err
	}
	defer proxy.Close()
	app, err := server.New(ctx, server.Config{DatabaseURL: proxy.URL}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, nil, err
	}
	defer app.Close()
	h := app.Handler()
	body, err := json.Marshal(map[string]any{"query": examples.SessionQuery, "variables": map[string]any{"actionId": r.actionID, "id": acct}})
	if err != nil {
		return 0, nil, err
	}
	best := int64(-1)
	var runs []int64
	for range 5 {
		if err := sleepCtx(ctx, 300*time.Millisecond); err != nil {
			return 0, nil, err
		}
		before := proxy.RoundTrips()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		n := proxy.RoundTrips() - before
		var ans struct {
			Data struct {
				Actions struct {
					Action struct {
						Session struct {
							Turns struct{ Nodes []struct{ Number int } }
						}
					}
				}
			}
			Errors []gqlError
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || len(ans.Errors) > 0 {
			return 0, nil, fmt.Errorf("bench: session query: HTTP %d: %s", rec.Code, rec.Body.Bytes())
		}
		if got := len(ans.Data.Actions.Action.Session.Turns.Nodes); got != turns {
			return 0, nil, fmt.Errorf("bench: session query listed %d turns, want %d", got, turns)
		}
		runs = append(runs, n)
		if best < 0 || n < best {
			best = n
		}
	}
	return best, runs, nil
}

// awaitTurns waits until the account's session has at least n turns and
// its newest one has ended.
func (r *rig) awaitTurns(ctx context.Context, acct string, n int) error {
	const op = `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) { turns(first: 1) { nodes { number status } } } } } }`
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out struct {
			Actions struct {
				Action struct {
					Session *struct {
						Turns struct {
							Nodes []struct {
								Number int
								Status string
							}
						}
					}
				}
			}
		}
		if err := r.clients[0].do(ctx, op, map[string]any{"a": r.actionID, "id": acct}, &out); err != nil {
			return fmt.Errorf("bench: session: %w", err)
		}
		if s := out.Actions.Action.Session; s != nil && len(s.Turns.Nodes) > 0 && s.Turns.Nodes[0].Number >= n && s.Turns.Nodes[0].Status != "RUNNING" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: turn %d of account %s did not come", n, acct)
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

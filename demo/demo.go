package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/server"
)

// The operations printed in seed 004, byte for byte (SPEC I2: they run unchanged).
var (
	createMonitorOp = examples.CreateMonitor
	sessionQueryOp  = examples.SessionQuery
)

// Config sizes a demo run; cmd/actionsledger's demo command sets it from
// its flags.
type Config struct {
	DatabaseURL string        // a fresh database (make demo creates one)
	Accounts    int           // accounts to open, one session each
	Entries     int           // entries to write, round-robin over the accounts
	Writers     int           // concurrent putValue callers
	Workers     int           // concurrent turns
	Timeout     time.Duration // longest wait for every entry to be taken, and for each step of the agent part
	NoAgent     bool          // skip the second part (an agent, an approval and a held turn)
}

// Operations of the demo's own (the seed has no putValue or listing example).
const (
	putValueOp = `mutation PutValue($namespace: String!, $key: String!, $value: JSON!, $idempotencyKey: String) {
  ledger {
    putValue(namespace: $namespace, key: $key, value: $value, idempotencyKey: $idempotencyKey) {
      namespace key version
      event { position commitTime }
    }
  }
}`
	demoSessionOp = `query DemoSession($actionId: UUID!, $id: String!, $after: String) {
  actions {
    action(id: $actionId) {
      session(id: $id) {
        id status reason input state
        origin { eventType position }
        turns(first: 1) { nodes { number status } }
        inputs(first: 500, after: $after, status: CONSUMED) {
          nodes { sequence kind triggers turn event { eventType record { ... on KVValue { namespace key value } } } }
          pageInfo { hasNextPage endCursor }
        }
      }
    }
  }
}`
	demoChecksOp = `query DemoChecks($actionId: UUID!, $after: String) {
  actions {
    action(id: $actionId) {
      sessions(first: 100, after: $after) { nodes { id status } pageInfo { hasNextPage endCursor } }
      intakeRecords(first: 20) { nodes { trigger sessionId reason message } }
      triggerDiagnostics { trigger count lastMessage }
    }
  }
}`
)

// Run walks through the seed's example on c's database, printing to out:
// the early-fraud-detector monitor, accounts whose account.inserted events
// create its sessions (each session's origin, not one of its inputs: S2),
// entries that resume them, and the turns that take the entries; then,
// unless c.NoAgent, the agent walkthrough of docs/agents.md: an approval, then a
// held turn, answered with the seed's operations. It runs the service in
// this process and talks to it only through GraphQL. A deviation from
// what the walkthrough expects is printed as a PROBLEM and makes Run
// return an error.
func Run(ctx context.Context, c Config, out io.Writer, log *slog.Logger) error {
	if c.Accounts < 1 || c.Entries < 1 || c.Writers < 1 {
		return errors.New("demo: --accounts, --entries and --writers must be at least 1")
	}
	began := time.Now()
	app, stop, err := server.Start(ctx, server.Config{DatabaseURL: c.DatabaseURL, Workers: c.Workers}, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := stop(); err != nil {
			log.Error("demo: service stopped with an error", "err", err)
		}
	}()
	gql := gqlClient{h: app.Handler()}

	actionID := uuid.New()
	summary, err := createMonitor(ctx, gql, actionID)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "created action", summary)
	accounts := make([]string, c.Accounts)
	opened := make([]string, c.Accounts) // event position of each account.inserted
	for i := range accounts {
		accounts[i] = uuid.NewString()
		pos, err := putValue(ctx, gql, "account", accounts[i], map[string]any{"account_id": accounts[i]})
		if err != nil {
			return err
		}
		opened[i] = pos
		fmt.Fprintf(out, "opened account %d: %s (event position %s, the origin of its session)\n", i+1, accounts[i], pos)
	}

	entries, span, err := writeEntries(ctx, gql, accounts, c.Entries, c.Writers)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d entries from %d writers (event positions %d-%d) in %.1fs\n", c.Entries, c.Writers, span.first, span.last, span.took.Seconds())

	sessions, err := waitConsumed(ctx, gql, actionID, accounts, entries, c.Timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "every entry was taken by a turn %.1fs after the first write\n\n", time.Since(span.start).Seconds())

	problems := checkDemo(sessions, accounts, opened, entries)
	checks, err := demoChecks(ctx, gql, actionID, len(accounts))
	if err != nil {
		return err
	}
	problems = append(problems, checks...)

	turnsTotal := 0
	for _, s := range sessions {
		turnsTotal += s.turns
		fmt.Fprintf(out, "session %s  %-7s  %3d turns  %4d inputs taken (%d entries)  state %s\n",
			s.ID, s.Status, s.turns, len(s.consumed), s.entryCount(), compact(s.State))
	}
	fmt.Fprintln(out)
	if err := printNewestTurns(ctx, out, gql, actionID, accounts[0], 2); err != nil {
		return err
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(out, "PROBLEM:", p)
		}
		return fmt.Errorf("demo: %d problem(s), see above", len(problems))
	}
	fmt.Fprintf(out, "demo: %d sessions, %d entries, %d turns in %.1fs\n", len(sessions), c.Entries, turnsTotal, time.Since(began).Seconds())
	if c.NoAgent {
		return nil
	}

	fmt.Fprintln(out, "\nagents: an approval, then a held turn (the walkthrough of docs/agents.md)")
	agent := &agentDemo{gql: gql, out: out, timeout: c.Timeout}
	problems, err = agent.run(ctx)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(out, "PROBLEM:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo: %d problem(s) in the agent part, see above", len(problems))
	}
	return nil
}

// createMonitor runs the seed's CreateMonitor mutation unchanged and
// returns a one-line summary of the created action.
func createMonitor(ctx context.Context, gql gqlClient, id uuid.UUID) (string, error) {
	var resp struct {
		Actions struct {
			CreateAction struct {
				ActionID   string
				Definition struct {
					Session struct {
						ID    string
						Turns struct {
							On        []string
							MaxInputs int
						}
					}
				}
			}
		}
	}
	if err := gql.do(ctx, "CreateMonitor", createMonitorOp, map[string]any{"id": id}, &resp); err != nil {
		return "", err
	}
	a := resp.Actions.CreateAction
	return fmt.Sprintf("early-fraud-detector %s (session id %s, turns on %v, maxInputs %d)",
		a.ActionID, a.Definition.Session.ID, a.Definition.Session.Turns.On, a.Definition.Session.Turns.MaxInputs), nil
}

// writeSpan describes a run of writes: the event positions they got and how long they took.
type writeSpan struct {
	first, last int64
	start       time.Time
	took        time.Duration
}

// writeEntries writes n entries with putValue from writers goroutines,
// entry i for account i mod len(accounts), and returns entry key -> account.
// Amounts are deterministic so runs are comparable.
func writeEntries(ctx context.Context, gql gqlClient, accounts []string, n, writers int) (map[string]string, writeSpan, error) {
	keys := make([]string, n)
	positions := make([]int64, n)
	jobs := make(chan int, n)
	for i := range n {
		keys[i] = uuid.NewString()
		jobs <- i
	}
	close(jobs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				pos, err := putValue(ctx, gql, "entry", keys[i], map[string]any{"account_id": accounts[i%len(accounts)], "amount": 100 + (i*7919)%90000})
				if err == nil {
					positions[i], err = strconv.ParseInt(pos, 10, 64)
				}
				if err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, writeSpan{}, err
	}
	span := writeSpan{first: slices.Min(positions), last: slices.Max(positions), start: start, took: time.Since(start)}
	entries := make(map[string]string, n)
	for i, key := range keys {
		entries[key] = accounts[i%len(accounts)]
	}
	return entries, span, nil
}

func putValue(ctx context.Context, gql gqlClient, ns, key string, value any) (string, error) {
	var resp struct {
		Ledger struct {
			PutValue struct {
				Event struct{ Position string }
			}
		}
	}
	err := gql.do(ctx, "PutValue", putValueOp, map[string]any{
		"namespace": ns, "key": key, "value": value, "idempotencyKey": "demo/" + ns + "/" + key}, &resp)
	return resp.Ledger.PutValue.Event.Position, err
}

// demoSession is one session as the demo reads it back.
type demoSession struct {
	ID     string
	Status string
	Reason *string
	Input  json.RawMessage
	State  json.RawMessage
	Origin *struct {
		EventType string
		Position  string
	}
	Turns struct {
		Nodes []struct {
			Number int
			Status string
		}
	}
	Inputs struct {
		Nodes    []demoInput
		PageInfo struct {
			HasNextPage bool
			EndCursor   *string
		}
	}

	turns    int         // newest turn number
	consumed []demoInput // every CONSUMED input, in delivery order
}

type demoInput struct {
	Sequence int
	Kind     string
	Triggers []string
	Turn     *int
	Event    *struct {
		EventType string
		Record    *struct {
			Namespace string
			Key       string
			Value     json.RawMessage
		}
	}
}

func (s *demoSession) entryCount() int {
	n := 0
	for _, in := range s.consumed {
		if in.Event != nil && in.Event.EventType == "entry.inserted" {
			n++
		}
	}
	return n
}

// readSession reads a session with all its consumed inputs, or nil.
func readSession(ctx context.Context, gql gqlClient, actionID uuid.UUID, id string) (*demoSession, error) {
	var s *demoSession
	var after *string
	for {
		var resp struct {
			Actions struct {
				Action *struct{ Session *demoSession }
			}
		}
		if err := gql.do(ctx, "DemoSession", demoSessionOp, map[string]any{"actionId": actionID, "id": id, "after": after}, &resp); err != nil {
			return nil, err
		}
		if resp.Actions.Action == nil {
			return nil, fmt.Errorf("demo: action %s not found", actionID)
		}
		page := resp.Actions.Action.Session
		if page == nil {
			return nil, nil
		}
		if s == nil {
			s = page
			if len(s.Turns.Nodes) > 0 {
				s.turns = s.Turns.Nodes[0].Number
			}
		}
		s.consumed = append(s.consumed, page.Inputs.Nodes...)
		if !page.Inputs.PageInfo.HasNextPage {
			return s, nil
		}
		after = page.Inputs.PageInfo.EndCursor
	}
}

// waitConsumed polls the accounts' sessions until every entry is among their
// consumed inputs, a session fails, or the timeout passes.
func waitConsumed(ctx context.Context, gql gqlClient, actionID uuid.UUID, accounts []string, entries map[string]string, timeout time.Duration) ([]*demoSession, error) {
	deadline := time.Now().Add(timeout)
	for {
		sessions := make([]*demoSession, len(accounts))
		taken := 0
		var final []string
		for i, acct := range accounts {
			s, err := readSession(ctx, gql, actionID, acct)
			if err != nil {
				return nil, err
			}
			if s == nil {
				s = &demoSession{ID: acct, Status: "(none)"}
			}
			sessions[i] = s
			taken += s.entryCount()
			if s.Status != "OPEN" && s.Status != "WAITING" && s.Status != "(none)" {
				final = append(final, fmt.Sprintf("session %s is %s (%s)", s.ID, s.Status, deref(s.Reason)))
			}
		}
		if taken >= len(entries) || len(final) > 0 {
			if len(final) > 0 {
				return nil, fmt.Errorf("demo: %s", strings.Join(final, "; "))
			}
			return sessions, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("demo: after %s only %d of %d entries were taken by a turn", timeout, taken, len(entries))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkDemo lists what is missing or inconsistent: a session whose origin
// is not its account's account.inserted event (at position opened[i]), or
// that took that event as an input as well (S2: the start that creates a
// session is its origin only); an entry not taken, or taken by another
// account's session, or taken twice; a session whose state does not count
// its inputs (the echo handler keeps that count).
func checkDemo(sessions []*demoSession, accounts, opened []string, entries map[string]string) []string {
	var problems []string
	seen := map[string]int{}
	for i, s := range sessions {
		var input struct {
			AccountID string `json:"account_id"`
		}
		if err := json.Unmarshal(s.Input, &input); err != nil || input.AccountID != accounts[i] {
			problems = append(problems, fmt.Sprintf("session %s has input %s, want account_id %s", s.ID, compact(s.Input), accounts[i]))
		}
		if s.Origin == nil || s.Origin.EventType != "account.inserted" || s.Origin.Position != opened[i] {
			problems = append(problems, fmt.Sprintf("session %s has origin %+v, want the account.inserted event at position %s", s.ID, s.Origin, opened[i]))
		}
		for _, in := range s.consumed {
			if in.Event == nil || in.Event.Record == nil {
				problems = append(problems, fmt.Sprintf("session %s input %d has no event record", s.ID, in.Sequence))
				continue
			}
			switch in.Event.EventType {
			case "account.inserted":
				problems = append(problems, fmt.Sprintf("session %s took account.inserted %s as an input; it is the session's origin", s.ID, in.Event.Record.Key))
			case "entry.inserted":
				key := in.Event.Record.Key
				seen[key]++
				if want, ok := entries[key]; !ok || want != s.ID {
					problems = append(problems, fmt.Sprintf("entry %s was taken by session %s, want %s", key, s.ID, want))
				}
			}
		}
		var st struct {
			Count    int `json:"count"`
			LastTurn int `json:"last_turn"`
		}
		if err := json.Unmarshal(s.State, &st); err != nil || st.Count != len(s.consumed) || st.LastTurn != s.turns {
			problems = append(problems, fmt.Sprintf("session %s state %s, want count %d and last_turn %d", s.ID, compact(s.State), len(s.consumed), s.turns))
		}
	}
	var missing []string
	for key := range entries {
		switch seen[key] {
		case 0:
			missing = append(missing, key)
		case 1:
		default:
			problems = append(problems, fmt.Sprintf("entry %s was taken %d times", key, seen[key]))
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		problems = append(problems, fmt.Sprintf("entry %s (account %s) was not taken by any turn", key, entries[key]))
	}
	return problems
}

// demoChecks reports intake records and predicate failures (there should be
// none) and a session count other than one per account.
func demoChecks(ctx context.Context, gql gqlClient, actionID uuid.UUID, accounts int) ([]string, error) {
	var problems []string
	var after *string
	n := 0
	for {
		var resp struct {
			Actions struct {
				Action struct {
					Sessions struct {
						Nodes    []struct{ ID, Status string }
						PageInfo struct {
							HasNextPage bool
							EndCursor   *string
						}
					}
					IntakeRecords struct {
						Nodes []struct {
							Trigger, Reason, Message string
							SessionID                *string
						}
					}
					TriggerDiagnostics []struct {
						Trigger, LastMessage string
						Count                int
					}
				}
			}
		}
		if err := gql.do(ctx, "DemoChecks", demoChecksOp, map[string]any{"actionId": actionID, "after": after}, &resp); err != nil {
			return nil, err
		}
		a := resp.Actions.Action
		n += len(a.Sessions.Nodes)
		if after == nil {
			for _, r := range a.IntakeRecords.Nodes {
				problems = append(problems, fmt.Sprintf("intake record: trigger %s, session %s: %s (%s)", r.Trigger, deref(r.SessionID), r.Reason, r.Message))
			}
			for _, d := range a.TriggerDiagnostics {
				problems = append(problems, fmt.Sprintf("trigger %s predicate failed %d times: %s", d.Trigger, d.Count, d.LastMessage))
			}
		}
		if !a.Sessions.PageInfo.HasNextPage {
			break
		}
		after = a.Sessions.PageInfo.EndCursor
	}
	if n != accounts {
		problems = append(problems, fmt.Sprintf("the action has %d sessions, want one per account (%d)", n, accounts))
	}
	return problems, nil
}

// printNewestTurns runs the seed's Session query unchanged and prints the
// newest n turns: number, inputs and output.
func printNewestTurns(ctx context.Context, out io.Writer, gql gqlClient, actionID uuid.UUID, id string, n int) error {
	var resp struct {
		Actions struct {
			Action struct {
				Session struct {
					Status string
					State  json.RawMessage
					Turns  struct {
						Nodes []struct {
							Number int
							Status string
							Inputs []struct {
								Event *struct {
									EventType string
									Record    *struct {
										Namespace, Key string
										Value          json.RawMessage
									}
								}
							}
							Checkpoint *struct {
								State  json.RawMessage
								Status string
							}
							Execution struct {
								Invocation struct {
									Output     json.RawMessage
									Transcript struct{ Nodes []struct{ Kind string } }
								}
							}
						}
					}
				}
			}
		}
	}
	if err := gql.do(ctx, "Session", sessionQueryOp, map[string]any{"actionId": actionID, "id": id}, &resp); err != nil {
		return err
	}
	s := resp.Actions.Action.Session
	fmt.Fprintf(out, "session %s (example Session query): %s, state %s; newest %d turns:\n", id, s.Status, compact(s.State), n)
	nodes := s.Turns.Nodes
	if len(nodes) > n {
		nodes = nodes[:n]
	}
	for _, t := range nodes {
		cp := "(none)"
		if t.Checkpoint != nil {
			cp = t.Checkpoint.Status + " " + compact(t.Checkpoint.State)
		}
		fmt.Fprintf(out, "  turn %d  %s  %d inputs  checkpoint %s  transcript %d entries\n", t.Number, t.Status, len(t.Inputs), cp, len(t.Execution.Invocation.Transcript.Nodes))
		for _, in := range t.Inputs {
			if in.Event == nil || in.Event.Record == nil {
				fmt.Fprintln(out, "    (input without a record)")
				continue
			}
			r := in.Event.Record
			fmt.Fprintf(out, "    %-16s %s/%s %s\n", in.Event.EventType, r.Namespace, r.Key, compact(r.Value))
		}
		fmt.Fprintf(out, "    output: %s\n", clip(compact(t.Execution.Invocation.Output), 600))
	}
	fmt.Fprintln(out)
	return nil
}

// gqlClient runs GraphQL operations against the service's handler in
// process, exactly as an HTTP client would send them.
type gqlClient struct{ h http.Handler }

// do posts one operation and decodes its data into out (numbers kept
// exact). GraphQL errors become one error naming their codes.
func (c gqlClient) do(ctx context.Context, op, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"operationName": op, "query": query, "variables": vars})
	if err != nil {
		return err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	var resp struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	dec := json.NewDecoder(rec.Body)
	dec.UseNumber()
	if err := dec.Decode(&resp); err != nil {
		return fmt.Errorf("%s: HTTP %d: %w", op, rec.Code, err)
	}
	if len(resp.Errors) > 0 {
		msgs := make([]string, len(resp.Errors))
		for i, e := range resp.Errors {
			msgs[i] = fmt.Sprintf("%s (code %v, field %v)", e.Message, e.Extensions["code"], e.Extensions["field"])
		}
		return fmt.Errorf("%s: %s", op, strings.Join(msgs, "; "))
	}
	if rec.Code != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", op, rec.Code)
	}
	dec = json.NewDecoder(bytes.NewReader(resp.Data))
	dec.UseNumber()
	return dec.Decode(out)
}

// compact prints JSON on one line; empty and null print as null.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if len(v) == 0 || json.Compact(&b, v) != nil {
		return "null"
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", text.Prefix(s, n), len(s))
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

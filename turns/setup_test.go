package turns_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/examples"
	"github.com/actionsledger/actionsledger/handlers/echo"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// epoch is the manual clock's reading when a test starts.
var epoch = time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)

// probeKind is the handler kind whose behaviour each test supplies.
const probeKind = "test.probe"

// testLease is long enough that no heartbeat (a third of the lease, in real
// time) fires during a test; lease expiry is driven by the manual clock.
const testLease = time.Hour

// runFunc is a test handler.
type runFunc func(ctx context.Context, req *turns.Request) (*turns.Outcome, error)

func (f runFunc) Run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	return f(ctx, req)
}

// bundle is one test's world: a fresh database, the app's parts on a manual
// clock, and an action store and registry that also know probeKind.
type bundle struct {
	t       *testing.T
	ctx     context.Context
	app     *server.App
	clock   *clock.Manual
	kinds   *turns.Registry
	actions *action.Store
	log     *slog.Logger
}

// setup builds a bundle whose probeKind runs run.
func setup(t *testing.T, run runFunc) *bundle {
	t.Helper()
	ctx := t.Context()
	clk := clock.NewManual(epoch)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	app, err := server.New(ctx, server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clk}, log)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	kinds := turns.NewRegistry(echo.Kind(), turns.Kind{Name: probeKind, New: func(turns.Spec) (turns.Handler, error) {
		return run, nil
	}})
	return &bundle{t: t, ctx: ctx, app: app, clock: clk, kinds: kinds, actions: action.NewStore(app.Pool, clk, kinds), log: log}
}

// monitor returns the definition of the seed's CreateMonitor operation,
// read from its input argument.
func monitor(t *testing.T) action.Definition {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: examples.CreateMonitor})
	require.NoError(t, err)
	actions := doc.Operations[0].SelectionSet[0].(*ast.Field)
	create := actions.SelectionSet[0].(*ast.Field)
	require.Equal(t, "createAction", create.Name)
	v, err := create.Arguments.ForName("input").Value.Value(nil)
	require.NoError(t, err)
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var def action.Definition
	require.NoError(t, json.Unmarshal(raw, &def))
	return def
}

// probeMonitor creates the example monitor running probeKind, after edit
// (may be nil) changes its definition, and returns the action id.
func (b *bundle) probeMonitor(edit func(*action.Definition)) uuid.UUID {
	b.t.Helper()
	def := monitor(b.t)
	def.Kind = probeKind
	if edit != nil {
		edit(&def)
	}
	id := uuid.New()
	_, err := b.actions.Create(b.ctx, id, def)
	require.NoError(b.t, err)
	return id
}

// executor returns an executor of this bundle's kinds with the given owner
// name (a "process"), on the test lease unless cfg sets one.
func (b *bundle) executor(owner string, cfg turns.Config) *turns.Executor {
	cfg.Owner = owner
	if cfg.Lease == 0 {
		cfg.Lease = testLease
	}
	return turns.NewExecutor(b.app.Pool, b.actions, b.kinds, b.clock, b.log, cfg)
}

// openAccount writes an account record and returns the account id, which
// is also the session id. Its account.inserted event creates the session and
// is its origin, not one of its inputs (S2): startAgain gives the session a
// start input.
func (b *bundle) openAccount() string {
	b.t.Helper()
	id := uuid.NewString()
	_, err := b.app.Ledger.PutValue(b.ctx, "account", id, jsonvalue.MustEncode(map[string]any{"account_id": id}), "")
	require.NoError(b.t, err)
	return id
}

// entry writes an entry record for account (entry.inserted resumes its
// session) and returns the identity its input gets.
func (b *bundle) entry(account string, n int) string {
	b.t.Helper()
	return b.entryValue(map[string]any{"account_id": account, "n": n})
}

func (b *bundle) entryValue(v map[string]any) string {
	b.t.Helper()
	kv, err := b.app.Ledger.PutValue(b.ctx, "entry", uuid.NewString(), jsonvalue.MustEncode(v), "")
	require.NoError(b.t, err)
	return "event/" + kv.EventID.String()
}

// dispatch delivers every committed event.
func (b *bundle) dispatch() {
	b.t.Helper()
	for {
		n, err := b.app.Dispatcher.DispatchOnce(b.ctx)
		require.NoError(b.t, err)
		if n == 0 {
			return
		}
	}
}

// runOnce runs one turn with ex and reports whether there was one.
func (b *bundle) runOnce(ex *turns.Executor) bool {
	b.t.Helper()
	ran, err := ex.RunOnce(b.ctx)
	require.NoError(b.t, err)
	return ran
}

func (b *bundle) session(actionID uuid.UUID, id string) *session.Session {
	b.t.Helper()
	s, err := b.app.Sessions.Get(b.ctx, actionID, id)
	require.NoError(b.t, err)
	require.NotNil(b.t, s, "session %q", id)
	return s
}

func (b *bundle) inputs(sid int64) []session.Input {
	b.t.Helper()
	ins, err := b.app.Sessions.Inputs(b.ctx, sid, "", 1000, nil)
	require.NoError(b.t, err)
	return ins
}

func (b *bundle) turnInputs(sid int64, turn int) []string {
	b.t.Helper()
	ins, err := b.app.Sessions.TurnInputs(b.ctx, sid, turn)
	require.NoError(b.t, err)
	return identities(ins)
}

func (b *bundle) turn(sid int64, number int) *turns.Turn {
	b.t.Helper()
	tu, err := b.app.Turns.Turn(b.ctx, sid, number)
	require.NoError(b.t, err)
	require.NotNil(b.t, tu, "turn %d", number)
	return tu
}

func (b *bundle) execution(id uuid.UUID) *turns.Execution {
	b.t.Helper()
	x, err := b.app.Turns.Execution(b.ctx, id)
	require.NoError(b.t, err)
	require.NotNil(b.t, x)
	return x
}

func (b *bundle) transcript(id uuid.UUID) []turns.Entry {
	b.t.Helper()
	es, err := b.app.Turns.Transcript(b.ctx, id, 0, 1000)
	require.NoError(b.t, err)
	return es
}

// count runs a SELECT count(*) style query.
func (b *bundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.app.Pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func identities(ins []session.Input) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Identity
	}
	return out
}

func viewIdentities(ins []turns.InputView) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Identity
	}
	return out
}

// calls records the requests a handler receives, in order.
type calls struct {
	mu   sync.Mutex
	reqs []turns.Request
}

func (c *calls) add(req *turns.Request) {
	r := *req
	r.Transcript = nil
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
}

func (c *calls) all() []turns.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]turns.Request(nil), c.reqs...)
}

// tally is the state countOutcome keeps.
type tally struct {
	Count int    `json:"count"`
	By    string `json:"by,omitempty"`
}

func readTally(t *testing.T, v jsonvalue.Value) tally {
	t.Helper()
	var st tally
	if len(v) > 0 {
		require.NoError(t, json.Unmarshal(v, &st))
	}
	return st
}

// countOutcome is a well-behaved turn: it adds the turn's inputs to the
// count in the state, writes a transcript entry per input and a reply, and
// keeps the session OPEN.
func countOutcome(req *turns.Request, by string) (*turns.Outcome, error) {
	var st tally
	if len(req.State) > 0 {
		if err := json.Unmarshal(req.State, &st); err != nil {
			return nil, turns.Permanent(err)
		}
	}
	st.Count += len(req.Inputs)
	st.By = by
	for _, in := range req.Inputs {
		req.Transcript.Add("input", in.Identity)
	}
	req.Transcript.Add("reply", map[string]any{"by": by})
	return &turns.Outcome{
		State:  jsonvalue.MustEncode(st),
		Status: "OPEN",
		Output: jsonvalue.MustEncode(map[string]any{"turn": req.Turn, "by": by}),
	}, nil
}

// within waits for a value from ch, failing the test after a generous deadline.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func ptr[T any](v T) *T { return &v }

package session_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/session"
)

// epoch is the manual clock's reading when a test starts.
var epoch = time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)

// fixture is one test's world: a fresh database and the app's parts on a
// manual clock. Nothing runs in the background: tests step the dispatcher.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	app   *server.App
	clock *clock.Manual
	log   *slog.Logger
}

func setup(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewManual(epoch)
	log := slog.New(slog.DiscardHandler)
	app, err := server.New(ctx, server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clk}, log)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	return &fixture{t: t, ctx: ctx, app: app, clock: clk, log: log}
}

// create stores def as a new action and returns its id.
func (f *fixture) create(def action.Definition) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	_, err := f.app.Actions.Create(f.ctx, id, def)
	require.NoError(f.t, err)
	return id
}

// put writes a record (and so its <ns>.inserted/.updated event) and
// returns the event it appended.
func (f *fixture) put(ns, key, value string) ledger.Event {
	f.t.Helper()
	kv, err := f.app.Ledger.PutValue(f.ctx, ns, key, jsonvalue.Value(value), "")
	require.NoError(f.t, err)
	ev, err := f.app.Ledger.Event(f.ctx, kv.EventID)
	require.NoError(f.t, err)
	f.clock.Advance(time.Second)
	return ev
}

// dispatch runs the app's dispatcher until it is caught up and returns how
// many events it handled.
func (f *fixture) dispatch() int {
	f.t.Helper()
	return dispatchAll(f.t, f.ctx, f.app.Dispatcher)
}

func dispatchAll(t testing.TB, ctx context.Context, d *session.Dispatcher) int {
	t.Helper()
	total := 0
	for {
		n, err := d.DispatchOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// session returns the session, failing when there is none.
func (f *fixture) session(actionID uuid.UUID, id string) *session.Session {
	f.t.Helper()
	s, err := f.app.Sessions.Get(f.ctx, actionID, id)
	require.NoError(f.t, err)
	require.NotNil(f.t, s, "session %q of %s", id, actionID)
	return s
}

// noSession asserts there is no session under id.
func (f *fixture) noSession(actionID uuid.UUID, id string) {
	f.t.Helper()
	s, err := f.app.Sessions.Get(f.ctx, actionID, id)
	require.NoError(f.t, err)
	require.Nil(f.t, s, "session %q of %s", id, actionID)
}

// sessionCount counts an action's sessions.
func (f *fixture) sessionCount(actionID uuid.UUID) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.app.Pool.QueryRow(f.ctx, `SELECT count(*) FROM sessions WHERE action_id = $1`, actionID).Scan(&n))
	return n
}

// inputs returns a session's inputs in delivery order.
func (f *fixture) inputs(s *session.Session) []session.Input {
	f.t.Helper()
	in, err := f.app.Sessions.Inputs(f.ctx, s.SID, "", 1000, nil)
	require.NoError(f.t, err)
	return in
}

// delivered is the (event id, triggers) view of inputs, for comparisons.
type delivered struct {
	Event    uuid.UUID
	Triggers []string
}

func (f *fixture) delivered(s *session.Session) []delivered {
	f.t.Helper()
	var out []delivered
	for _, in := range f.inputs(s) {
		require.Equal(f.t, session.KindEvent, in.Kind)
		require.NotNil(f.t, in.EventID)
		require.Equal(f.t, "event/"+in.EventID.String(), in.Identity)
		out = append(out, delivered{*in.EventID, in.Triggers})
	}
	return out
}

// intake returns an action's intake records, oldest first.
func (f *fixture) intake(actionID uuid.UUID) []session.IntakeRecord {
	f.t.Helper()
	recs, err := f.app.Sessions.IntakeRecords(f.ctx, actionID, 0, 1000)
	require.NoError(f.t, err)
	slices.Reverse(recs)
	return recs
}

// intakeView is the part of an intake record tests compare.
type intakeView struct {
	Event   uuid.UUID
	Trigger string
	Session string // "" when no session id was known
	Reason  string
}

func (f *fixture) intakeViews(actionID uuid.UUID) []intakeView {
	f.t.Helper()
	var out []intakeView
	for _, r := range f.intake(actionID) {
		require.NotEmpty(f.t, r.Message, "an intake record says why")
		v := intakeView{Event: r.EventID, Trigger: r.Trigger, Reason: r.Reason}
		if r.SessionID != nil {
			v.Session = *r.SessionID
		}
		out = append(out, v)
	}
	return out
}

// cursor returns the dispatcher's committed position.
func (f *fixture) cursor() int64 {
	f.t.Helper()
	var p int64
	require.NoError(f.t, f.app.Pool.QueryRow(f.ctx, `SELECT position FROM dispatch_state`).Scan(&p))
	return p
}

// head returns the ledger's newest position.
func (f *fixture) head() int64 {
	f.t.Helper()
	p, err := ledger.Head(f.ctx, f.app.Pool)
	require.NoError(f.t, err)
	return p
}

// nextTurnAt reads when the session became runnable (nil: no input that
// starts a turn is waiting).
func (f *fixture) nextTurnAt(s *session.Session) *time.Time {
	f.t.Helper()
	var at *time.Time
	require.NoError(f.t, f.app.Pool.QueryRow(f.ctx, `SELECT next_turn_at FROM sessions WHERE sid = $1`, s.SID).Scan(&at))
	if at != nil {
		*at = at.UTC()
	}
	return at
}

func ptr[T any](v T) *T { return &v }

// accountSchema is the monitor's inputSchema.
const accountSchema = `{
	"type": "object",
	"properties": {"account_id": {"type": "string", "format": "uuid"}},
	"required": ["account_id"],
	"additionalProperties": false
}`

// monitor is the action of examples/create_monitor.graphql, built in Go
// (A1): accounts start sessions keyed by account id, entries resume them,
// and only entries start a turn.
func monitor() action.Definition {
	return action.Definition{
		Name:   "early-fraud-detector",
		Kind:   "agent.echo",
		Config: jsonvalue.Value(`{"agent_id": "monitor", "sleep_ms": 0}`),
		Triggers: []action.Trigger{
			{
				Name:    "opened",
				Event:   `event.type == "account.inserted"`,
				Session: &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(`{"account_id": "string(event.data.account_id)"}`)}},
			},
			{
				Name:    "entry",
				Event:   `event.type == "entry.inserted"`,
				Session: &action.TriggerRole{Resume: &action.ResumeRole{ID: "string(event.data.account_id)"}},
			},
		},
		Session: &action.SessionDef{
			InputSchema: jsonvalue.Value(accountSchema),
			ID:          "string(session.input.account_id)",
			Turns:       &action.Turns{On: []string{"entry"}, MaxInputs: ptr(100)},
		},
	}
}

// account returns the data of an account.inserted event for id.
func account(id string) string { return fmt.Sprintf(`{"account_id": %q}`, id) }

// entry returns the data of an entry.inserted event for account id.
func entry(id string, amount int) string {
	return fmt.Sprintf(`{"account_id": %q, "amount": %d}`, id, amount)
}

// startRole is a start role mapping the given JSON object of expressions.
func startRole(mapping string) *action.TriggerRole {
	return &action.TriggerRole{Start: &action.StartRole{Input: jsonvalue.Value(mapping)}}
}

// resumeRole is a resume role with the given id expression.
func resumeRole(id string) *action.TriggerRole {
	return &action.TriggerRole{Resume: &action.ResumeRole{ID: id}}
}

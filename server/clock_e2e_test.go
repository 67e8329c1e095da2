package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/server"
)

const clockFixture = "create_monitor_with_end_and_clock.graphql"

// TestClockFixtureIsVerbatim: the fixture is create_monitor.graphql's
// createAction with its session block replaced by the seed's fragment,
// both byte for byte.
func TestClockFixtureIsVerbatim(t *testing.T) {
	t.Parallel()
	fixture := example(t, clockFixture)
	fragment := example(t, "session_block_with_end_and_clock.graphql-fragment")
	require.Contains(t, fixture, fragment)
	monitor := example(t, "create_monitor.graphql")
	from, to := strings.Index(monitor, "        name: "), strings.Index(monitor, "        session: {")
	require.Contains(t, fixture, monitor[from:to], "name, kind, config and triggers as in create_monitor.graphql")

	shared := filepath.Join("..", "..", "shared", "examples", "session_block_with_end_and_clock.graphql-fragment")
	want, err := os.ReadFile(shared)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent: cannot compare with the seed's fragment", shared)
	}
	require.NoError(t, err)
	require.Equal(t, string(want), fragment)
}

// clockSession is the part of a session the clock tests read.
type clockSession struct {
	Status    string
	Reason    *string
	StartedAt time.Time
	EndsAt    *time.Time
	Turns     struct {
		Nodes []clockTurn
	}
}

type clockTurn struct {
	Number json.Number
	Status string
	Final  bool
	EndsAt *time.Time
	Inputs []struct {
		Identity string
		Kind     string
		Event    struct {
			EventType string
			Data      json.RawMessage
		}
	}
}

const clockSessionOp = `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) {
  status reason startedAt endsAt
  turns(first: 50) { nodes { number status final endsAt inputs { identity kind event { eventType data } } } }
} } } }`

func (e *env) clockSession(t testing.TB, actionID, id string) *clockSession {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct{ Session *clockSession }
		}
	}
	e.ok(t, clockSessionOp, map[string]any{"a": actionID, "id": id}, &out)
	return out.Actions.Action.Session
}

// completedTurns counts the session's turns, requiring each to be COMPLETED.
func (s *clockSession) completedTurns() int {
	if s == nil {
		return 0
	}
	for _, tn := range s.Turns.Nodes {
		if tn.Status != "COMPLETED" {
			return -1
		}
	}
	return len(s.Turns.Nodes)
}

// TestSessionBlockWithEndAndClockEndToEnd runs the seed's session block
// with an end and a clock inside the CreateMonitor operation, over HTTP
// with the dispatcher, timers and executor running on a manual clock
// (E1, E3, C1-C6, T3, T9): the weekday morning firing starts a turn and
// takes the latest hourly firing with the count it missed; 30 days after
// the start a final turn takes what is pending and the echo handler
// completes the session.
func TestSessionBlockWithEndAndClockEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clk := e.app.Clock.(*clock.Manual)
	start := clk.Now() // Monday 2026-03-02 09:00 UTC, 04:00 in New York

	actionID := uuid.NewString()
	var created struct {
		Actions struct {
			CreateAction struct {
				ActionID   string
				Definition struct {
					Session struct {
						Ends     string
						Schedule []struct {
							Name                  string
							Cron, Timezone, Every *string
						}
						Turns struct {
							On        []string
							MaxInputs *json.Number
							Window    *string
						}
					}
				}
			}
		}
	}
	e.ok(t, example(t, clockFixture), map[string]any{"id": actionID}, &created)
	sd := created.Actions.CreateAction.Definition.Session
	require.Equal(t, "session.started_at + duration('720h')", sd.Ends)
	require.Len(t, sd.Schedule, 2)
	require.Equal(t, "morning", sd.Schedule[0].Name)
	require.Equal(t, "0 9 * * 1-5", *sd.Schedule[0].Cron)
	require.Equal(t, "America/New_York", *sd.Schedule[0].Timezone)
	require.Nil(t, sd.Schedule[0].Every)
	require.Equal(t, "hourly", sd.Schedule[1].Name)
	require.Equal(t, "1h", *sd.Schedule[1].Every)
	require.Equal(t, []string{"entry", "morning"}, sd.Turns.On)
	require.Nil(t, sd.Turns.Window)

	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	var s *clockSession
	poll(t, "the session to start", func() bool { s = e.clockSession(t, actionID, acct); return s != nil })
	require.Equal(t, start, s.StartedAt)
	end := start.Add(720 * time.Hour)
	require.Equal(t, end, *s.EndsAt, "E1")

	clk.Set(start.Add(30 * time.Minute))
	e.put(t, "entry", acct+"-1", map[string]any{"account_id": acct, "amount": 1}, "")
	poll(t, "turn 1", func() bool { s = e.clockSession(t, actionID, acct); return s.completedTurns() == 1 })

	// 09:00 in New York: the morning firing starts turn 2 at once, with the
	// hourly firing due with it (the latest of 10:00-14:00 UTC).
	morning := time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)
	clk.Set(morning)
	poll(t, "the morning turn", func() bool { s = e.clockSession(t, actionID, acct); return s.completedTurns() == 2 })
	t2 := s.Turns.Nodes[0]
	require.False(t, t2.Final)
	require.Equal(t, &end, t2.EndsAt)
	require.Len(t, t2.Inputs, 2)
	for i, want := range []struct {
		id, data string
	}{
		{"schedule/morning/2026-03-02T14:00:00Z", `{"schedule": "morning", "scheduled_at": "2026-03-02T14:00:00Z", "missed": 0}`},
		{"schedule/hourly/2026-03-02T14:00:00Z", `{"schedule": "hourly", "scheduled_at": "2026-03-02T14:00:00Z", "missed": 4}`},
	} {
		in := t2.Inputs[i]
		require.Equal(t, want.id, in.Identity)
		require.Equal(t, "SCHEDULE", in.Kind)
		require.Equal(t, "schedule.fired", in.Event.EventType)
		jsonEq(t, want.data, in.Event.Data)
	}

	// An hour before the end a start with the same input rides along (it
	// starts no turn); at the end the final turn takes it.
	clk.Set(end.Add(-time.Hour))
	poll(t, "the turn the late timer starts", func() bool { s = e.clockSession(t, actionID, acct); return s.completedTurns() == 3 })
	e.put(t, "account", uuid.NewString(), map[string]any{"account_id": acct}, "")
	// Wait for its delivery: moving the clock first would race the end
	// (with nothing pending yet, E5 completes the session with no turn).
	poll(t, "the late start to be delivered", func() bool {
		var out struct {
			Actions struct {
				Action struct {
					Session struct{ Inputs struct{ Nodes []any } }
				}
			}
		}
		e.ok(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { inputs(status: PENDING) { nodes { identity } } } } } }`,
			map[string]any{"a": actionID, "s": acct}, &out)
		return len(out.Actions.Action.Session.Inputs.Nodes) == 1
	})
	clk.Set(end)
	poll(t, "the final turn", func() bool { s = e.clockSession(t, actionID, acct); return s.Status == "COMPLETED" })
	require.Len(t, s.Turns.Nodes, 4)
	final := s.Turns.Nodes[0]
	require.True(t, final.Final, "E3")
	require.Len(t, final.Inputs, 1)
	require.Equal(t, "EVENT", final.Inputs[0].Kind)
	require.Equal(t, "account.inserted", final.Inputs[0].Event.EventType)
	require.Contains(t, *s.Reason, "final turn")
}

// TestClockRealTimeSmoke runs a session with an every 1s clock on the wall
// clock with every loop running: firings arrive as turns by themselves.
// It asserts what arrived, never how fast (see the bench for figures).
func TestClockRealTimeSmoke(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.New(ctx, server.Config{DatabaseURL: pgtest.NewDB(t), Clock: clock.Real{}}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		require.NoError(t, <-done)
		app.Close()
	})
	e := &env{app: app, srv: srv, logs: &logBuffer{}}

	actionID := uuid.NewString()
	e.ok(t, `mutation($id: UUID!) { actions { createAction(id: $id, input: {
	  name: "ticker", kind: "agent.echo"
	  triggers: [{ name: "opened", event: "event.type == \"account.inserted\"",
	               session: { start: { input: { account_id: "string(event.data.account_id)" } } } }]
	  session: { id: "string(session.input.account_id)", schedule: [{ name: "tick", every: "1s" }] }
	}) { actionId } } }`, map[string]any{"id": actionID}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")

	var s *clockSession
	var tick *clockTurn
	poll(t, "two turns started by the clock", func() bool {
		s = e.clockSession(t, actionID, acct)
		if s == nil {
			return false
		}
		n := 0
		for i, tn := range s.Turns.Nodes {
			if tn.Status == "COMPLETED" && len(tn.Inputs) > 0 && tn.Inputs[0].Kind == "SCHEDULE" {
				n++
				tick = &s.Turns.Nodes[i]
			}
		}
		return n >= 2
	})
	var f struct {
		Schedule    string
		ScheduledAt time.Time `json:"scheduled_at"`
	}
	require.NoError(t, json.Unmarshal(tick.Inputs[0].Event.Data, &f))
	require.Equal(t, "tick", f.Schedule)
	require.Zero(t, f.ScheduledAt.Sub(s.StartedAt)%time.Second, "on the startedAt + k*1s grid")
	require.True(t, f.ScheduledAt.After(s.StartedAt))
}

// A3, C1, T4, E1 over GraphQL: a bad clock entry, window or end is refused
// with its code and the field at fault, nothing is stored, and the service
// survives robfig/cron's panicking input (a bare TZ=).
func TestCreateActionRejectsBadClocks_A3(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name  string
		edit  func(d map[string]any)
		field string
	}{
		{"bare TZ=", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "m", "cron": "TZ="}}
		}, "input.session.schedule[0].cron"},
		{"never fires", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "m", "cron": "0 0 30 2 *"}}
		}, "input.session.schedule[0].cron"},
		{"bad timezone", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "m", "cron": "0 9 * * *", "timezone": "Europe/Atlantis"}}
		}, "input.session.schedule[0].timezone"},
		{"every under a second", func(d map[string]any) {
			sessionBlock(d)["schedule"] = []any{map[string]any{"name": "m", "every": "10ms"}}
		}, "input.session.schedule[0].every"},
		{"window", func(d map[string]any) { turnsBlock(d)["window"] = "forever" }, "input.session.turns.window"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def := monitorDef()
			tc.edit(def)
			id := uuid.NewString()
			r := e.do(t, createActionOp, map[string]any{"id": id, "input": def})
			requireError(t, r, "INVALID_ACTION", tc.field)
			require.Zero(t, e.countRows(t, `SELECT count(*) FROM actions WHERE id = $1`, id))
		})
	}
	def := monitorDef()
	sessionBlock(def)["ends"] = "duration('1h')"
	requireError(t, e.do(t, createActionOp, map[string]any{"id": uuid.NewString(), "input": def}), "INVALID_EXPRESSION", "input.session.ends")
	e.requireAlive(t)
}

package action_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// withClock is the monitor with the session block of
// examples/session_block_with_end_and_clock.graphql-fragment.
func withClock() action.Definition {
	d := monitor()
	d.Session.Ends = ptr("session.started_at + duration('720h')")
	d.Session.Schedule = []action.ScheduleEntry{
		{Name: "morning", Cron: ptr("0 9 * * 1-5"), Timezone: ptr("America/New_York")},
		{Name: "hourly", Every: ptr("1h")},
	}
	d.Session.Turns = &action.Turns{On: []string{"entry", "morning"}}
	return d
}

// E1, C1, C4: the fragment's end and clock compile; turns.on may name an entry.
func TestCompileEndAndClock_E1_C1(t *testing.T) {
	t.Parallel()
	c, err := action.Compile(withClock(), nil)
	require.NoError(t, err)
	cs := c.Session
	require.NotNil(t, cs.Ends)
	require.Len(t, cs.Clock, 2)
	require.Equal(t, "morning", cs.Clock[0].Name)
	require.Zero(t, cs.Clock[0].Every)
	require.Equal(t, time.Hour, cs.Clock[1].Every)
	require.True(t, cs.ClockStartsTurn(cs.Clock[0]), "turns.on names morning")
	require.False(t, cs.ClockStartsTurn(cs.Clock[1]), "hourly waits for the next turn")
	require.True(t, cs.Timed())

	// Without turns.on every entry starts turns (C4); without an end, a
	// window or such an entry, sessions need no timer.
	d := monitor()
	d.Session.Turns = nil
	d.Session.Schedule = []action.ScheduleEntry{{Name: "hourly", Every: ptr("1h")}}
	c, err = action.Compile(d, nil)
	require.NoError(t, err)
	require.True(t, c.Session.ClockStartsTurn(c.Session.Clock[0]))
	d.Session.Turns = &action.Turns{On: []string{"entry"}}
	c, err = action.Compile(d, nil)
	require.NoError(t, err)
	require.False(t, c.Session.Timed())

	d.Session.Turns.Window = ptr("2s")
	c, err = action.Compile(d, nil)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.Session.Window)
	require.True(t, c.Session.Timed())
}

// A3, C1, E1, T4: each bad end, clock entry or window is refused with its
// code, the field at fault and a message that says why.
func TestCompileClockRules_A3(t *testing.T) {
	t.Parallel()
	entry := func(e action.ScheduleEntry) func(d *action.Definition) {
		return func(d *action.Definition) { d.Session.Schedule = []action.ScheduleEntry{e} }
	}
	cases := []struct {
		name, field, code, msg string
		edit                   func(d *action.Definition)
	}{
		{"CRON_TZ prefix", "session.schedule[0].cron", fault.InvalidAction, "timezone field",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("CRON_TZ=America/New_York 0 9 * * *")})},
		{"bare TZ= (robfig panics on it)", "session.schedule[0].cron", fault.InvalidAction, "timezone field",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("TZ=")})},
		{"never fires", "session.schedule[0].cron", fault.InvalidAction, "never matches",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("0 0 30 2 *")})},
		{"bad syntax", "session.schedule[0].cron", fault.InvalidAction, "not a valid cron expression",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("0 9 * *")})},
		{"@every", "session.schedule[0].cron", fault.InvalidAction, "every field",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("@every 1h")})},
		{"unknown timezone", "session.schedule[0].timezone", fault.InvalidAction, "not an IANA timezone",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("0 9 * * *"), Timezone: ptr("America/Springfield")})},
		{"Local timezone", "session.schedule[0].timezone", fault.InvalidAction, "depends on the server",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("0 9 * * *"), Timezone: ptr("Local")})},
		{"empty timezone", "session.schedule[0].timezone", fault.InvalidAction, "omit it for UTC",
			entry(action.ScheduleEntry{Name: "m", Cron: ptr("0 9 * * *"), Timezone: ptr("")})},
		{"timezone on every", "session.schedule[0].timezone", fault.InvalidAction, "only to a cron entry",
			entry(action.ScheduleEntry{Name: "m", Every: ptr("1h"), Timezone: ptr("UTC")})},
		{"every under a second", "session.schedule[0].every", fault.InvalidAction, "at least 1s",
			entry(action.ScheduleEntry{Name: "m", Every: ptr("999ms")})},
		{"every not a duration", "session.schedule[0].every", fault.InvalidAction, "not a duration",
			entry(action.ScheduleEntry{Name: "m", Every: ptr("hourly")})},
		{"neither cron nor every", "session.schedule[0]", fault.InvalidAction, "exactly one of cron and every",
			entry(action.ScheduleEntry{Name: "m"})},
		{"entry named like a trigger", "session.schedule[0].name", fault.InvalidAction, "already used",
			entry(action.ScheduleEntry{Name: "entry", Every: ptr("1h")})},
		{"window not a duration", "session.turns.window", fault.InvalidAction, "duration such as",
			func(d *action.Definition) { d.Session.Turns.Window = ptr("soon") }},
		{"window too long", "session.turns.window", fault.InvalidAction, "from 1ms to 24h",
			func(d *action.Definition) { d.Session.Turns.Window = ptr("25h") }},
		{"window zero", "session.turns.window", fault.InvalidAction, "from 1ms",
			func(d *action.Definition) { d.Session.Turns.Window = ptr("0s") }},
		{"ends not a timestamp", "session.ends", fault.InvalidExpression, "must produce timestamp",
			func(d *action.Definition) { d.Session.Ends = ptr("duration('720h')") }},
		{"ends reads event", "session.ends", fault.InvalidExpression, "cannot read event",
			func(d *action.Definition) { d.Session.Ends = ptr("event.commit_time") }},
		{"ends path not in closed schema", "session.ends", fault.InvalidAction, "not a property of inputSchema",
			func(d *action.Definition) { d.Session.Ends = ptr("timestamp(session.input.until)") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := monitor()
			tc.edit(&d)
			_, err := action.Compile(d, nil)
			require.Error(t, err)
			var found []string
			for _, e := range action.Errors(err) {
				fe := fault.As(e)
				require.NotNil(t, fe)
				if fe.Code == tc.code && fe.Field == tc.field {
					require.Contains(t, fe.Message, tc.msg)
					return
				}
				found = append(found, fe.Code+" "+fe.Field+": "+fe.Message)
			}
			t.Fatalf("no %s at %s; got %q", tc.code, tc.field, found)
		})
	}
}

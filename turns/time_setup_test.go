package turns_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Helpers for the tests of session ends, clocks and windows (E, C, T4).
// Time moves only by the manual clock; the timer loop is stepped with
// fire(), as the dispatcher and executor are.

// fire runs the session timers until none is due and returns how many it handled.
func (b *bundle) fire() int {
	b.t.Helper()
	total := 0
	for {
		n, err := b.app.Timers.FireOnce(b.ctx)
		require.NoError(b.t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// runAll runs turns until none is due and returns how many ran.
func (b *bundle) runAll(ex *turns.Executor) int {
	b.t.Helper()
	n := 0
	for b.runOnce(ex) {
		n++
	}
	return n
}

// timerDue returns when the session's timer is due; nil when it has none.
func (b *bundle) timerDue(sid int64) *time.Time {
	b.t.Helper()
	var due time.Time
	err := b.app.Pool.QueryRow(b.ctx, `SELECT due_at FROM session_timers WHERE sid = $1`, sid).Scan(&due)
	if err == pgx.ErrNoRows {
		return nil
	}
	require.NoError(b.t, err)
	due = due.UTC()
	return &due
}

// startAgain writes another account record for acct: its account.inserted
// event is a start with the same input, delivered to the open session as an
// input of the "opened" trigger, which turns.on does not name (T3).
func (b *bundle) startAgain(acct string) string {
	b.t.Helper()
	kv, err := b.app.Ledger.PutValue(b.ctx, "account", uuid.NewString(), jsonvalue.MustEncode(map[string]any{"account_id": acct}), "")
	require.NoError(b.t, err)
	return "event/" + kv.EventID.String()
}

// endOutcome counts like countOutcome and, in a final turn, completes the
// session with a reason (E3).
func endOutcome(req *turns.Request) (*turns.Outcome, error) {
	out, err := countOutcome(req, "")
	if err == nil && req.Final {
		out.Status, out.Reason = "COMPLETED", "reviewed at the end"
	}
	return out, err
}

// fired is the data of a schedule.fired event (C3).
type fired struct {
	Schedule    string `json:"schedule"`
	ScheduledAt string `json:"scheduled_at"`
	Missed      int    `json:"missed"`
}

// firedOf decodes the schedule.fired event of a SCHEDULE input view.
func firedOf(t interface {
	require.TestingT
	Helper()
}, in turns.InputView) fired {
	t.Helper()
	require.Equal(t, session.KindSchedule, in.Kind)
	require.NotNil(t, in.Event)
	require.Equal(t, "schedule.fired", in.Event.Type)
	var f fired
	require.NoError(t, json.Unmarshal(in.Event.Data, &f))
	require.Equal(t, fmt.Sprintf("schedule/%s/%s", f.Schedule, f.ScheduledAt), in.Identity, "C3 identity")
	return f
}

// scheduleID is a firing's identity (C3).
func scheduleID(name string, at time.Time) string {
	return "schedule/" + name + "/" + at.UTC().Format(time.RFC3339Nano)
}

// clockMonitor is the probe monitor with the given end (empty: none),
// clock entries and turns.on (nil: omitted).
func (b *bundle) clockMonitor(ends string, on []string, entries ...action.ScheduleEntry) uuid.UUID {
	b.t.Helper()
	return b.probeMonitor(func(d *action.Definition) {
		if ends != "" {
			d.Session.Ends = &ends
		}
		d.Session.Schedule = entries
		d.Session.Turns = &action.Turns{On: on}
	})
}

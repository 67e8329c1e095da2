package session_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// timerDue reads the session's timer; nil when it has none.
func (f *fixture) timerDue(s *session.Session) *time.Time {
	f.t.Helper()
	var at []time.Time
	rows, err := f.app.Pool.Query(f.ctx, `SELECT due_at FROM session_timers WHERE sid = $1`, s.SID)
	require.NoError(f.t, err)
	for rows.Next() {
		var t time.Time
		require.NoError(f.t, rows.Scan(&t))
		at = append(at, t.UTC())
	}
	require.NoError(f.t, rows.Err())
	if len(at) == 0 {
		return nil
	}
	return &at[0]
}

// until is an action whose sessions end at the time their start event names
// (session.input.until), with an hourly clock that starts turns.
func until() action.Definition {
	d := monitor()
	d.Session.InputSchema = nil
	d.Triggers[0].Session = startRole(`{"account_id": "string(event.data.account_id)", "until": "event.data.until"}`)
	d.Session.Ends = ptr("timestamp(session.input.until)")
	d.Session.Schedule = []action.ScheduleEntry{{Name: "hourly", Every: ptr("1h")}}
	d.Session.Turns = nil
	return d
}

// E1, S5: an end that fails to evaluate for the session's input, or that
// is not a timestamp, fails the start: no session, an intake record with
// reason ends_failed. A good one sets endsAt, and the timer is due at the
// first firing or the end, whichever comes first.
func TestEndsAtStartAndFailedEnds_E1(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.create(until())
	good, bad := uuid.NewString(), uuid.NewString()
	f.put("account", "g", `{"account_id": "`+good+`", "until": "2025-03-03T09:30:00Z"}`)
	badEv := f.put("account", "b", `{"account_id": "`+bad+`", "until": "next week"}`)
	f.dispatch()

	s := f.session(id, good)
	require.Equal(t, time.Date(2025, 3, 3, 9, 30, 0, 0, time.UTC), *s.EndsAt)
	require.Equal(t, s.EndsAt, f.timerDue(s), "the end comes before the first hourly firing")

	f.noSession(id, bad)
	require.Equal(t, []intakeView{{Event: badEv.ID, Trigger: "opened", Session: bad, Reason: session.ReasonEndsFailed}}, f.intakeViews(id))
	require.Contains(t, f.intake(id)[0].Message, "session.ends")
}

// E1, S3: when a start committed earlier moves startedAt back, endsAt is
// evaluated again from it, and the timer is due at once (firings between
// the two starts may be due).
func TestEndMovesWithStartedAt_E1_S3(t *testing.T) {
	t.Parallel()
	f := setup(t)
	d := monitor()
	d.Session.Ends = ptr("session.started_at + duration('720h')")
	d.Session.Schedule = []action.ScheduleEntry{{Name: "hourly", Every: ptr("1h")}}
	d.Session.Turns = nil
	id := f.create(d)
	acct := uuid.NewString()
	e1 := f.put("account", "a", account(acct))
	f.clock.Advance(time.Hour)

	// As in TestS3LateEarlierStartMovesStartedAt: the row appears outside the
	// event path, later than E1, before the dispatcher reaches E1.
	late := e1.CommitTime.Add(30 * time.Minute)
	lateEnd := late.Add(720 * time.Hour)
	_, err := f.app.Pool.Exec(f.ctx, `INSERT INTO sessions (action_id, id, version, input, status, started_at, ends_at, created_at, updated_at)
		VALUES ($1, $2, 1, $3, 'OPEN', $4, $5, $6, $6)`, id, acct, account(acct), late, lateEnd, f.clock.Now())
	require.NoError(t, err)
	f.dispatch()

	s := f.session(id, acct)
	require.Equal(t, e1.CommitTime, s.StartedAt)
	require.Equal(t, e1.CommitTime.Add(720*time.Hour), *s.EndsAt, "the end moves with startedAt")
	require.Equal(t, f.clock.Now(), *f.timerDue(s))
}

// C3: the dispatcher delivers a schedule.fired event to no trigger, even one
// whose predicate it satisfies (the service alone appends them, for one
// session). A predicate naming the type alone is refused at create (issue
// 10: it could never fire), so this one matches it by prefix.
func TestScheduleFiredReachesNoTrigger_C3(t *testing.T) {
	t.Parallel()
	f := setup(t)
	d := monitor()
	d.Triggers[0].Event = `event.type.startsWith("schedule.")`
	d.Triggers[0].Session = startRole(`{"account_id": "'3f0c9f8e-0000-4000-8000-000000000000'"}`)
	id := f.create(d)
	// Appending through the store refuses the reserved type; the service's
	// own path is ledger.Append, as the executor uses it.
	tx, err := f.app.Pool.Begin(f.ctx)
	require.NoError(t, err)
	_, err = ledger.Append(f.ctx, tx, f.clock.Now(), ledger.NewEvent{Type: "schedule.fired",
		Data: jsonvalue.Value(`{"schedule": "hourly", "scheduled_at": "2025-03-03T10:00:00Z", "missed": 0}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(f.ctx))
	require.Equal(t, 1, f.dispatch())
	require.Zero(t, f.sessionCount(id))
	require.Empty(t, f.intake(id))
	_, err = f.app.Ledger.AppendEvent(f.ctx, "schedule.fired", jsonvalue.Value(`{}`), "")
	require.Error(t, err, "clients cannot append it")
}

package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
)

// BenchmarkTimers shows that a round of the timer loop costs what is due,
// not what exists (HARD-PARTS 5): with 1,000 or 100,000 sessions on an
// hourly clock, a round with nothing due (idle) takes the same time, and a
// round with 500 due timers takes the same time whatever else waits.
//
//	go test ./session -run '^$' -bench Timers -benchtime 200x
func BenchmarkTimers(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		f := setup(b)
		d := monitor()
		d.Session.Schedule = []action.ScheduleEntry{{Name: "hourly", Every: ptr("1h")}}
		d.Session.Turns = nil
		id := f.create(d)
		now := f.clock.Now()
		started := now.Add(-time.Hour - time.Second) // each has a firing due a second ago
		_, err := f.app.Pool.Exec(f.ctx, `
			INSERT INTO sessions (action_id, id, version, input, status, started_at, created_at, updated_at)
			SELECT $1, g::text, 1, jsonb_build_object('account_id', gen_random_uuid()), 'OPEN', $2, $2, $2
			  FROM generate_series(1, $3) g`, id, started, n)
		require.NoError(b, err)
		_, err = f.app.Pool.Exec(f.ctx, `INSERT INTO session_timers (sid, due_at) SELECT sid, $2 FROM sessions WHERE action_id = $1`,
			id, now.Add(time.Hour))
		require.NoError(b, err)
		_, err = f.app.Pool.Exec(f.ctx, `ANALYZE sessions; ANALYZE session_timers`)
		require.NoError(b, err)

		b.Run(fmt.Sprintf("idle/sessions=%d", n), func(b *testing.B) {
			for b.Loop() {
				got, err := f.app.Timers.FireOnce(f.ctx)
				require.NoError(b, err)
				require.Zero(b, got)
			}
		})
		b.Run(fmt.Sprintf("due=500/sessions=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				_, err := f.app.Pool.Exec(f.ctx, `UPDATE session_timers SET due_at = $1
					WHERE sid IN (SELECT sid FROM session_timers ORDER BY due_at DESC LIMIT 500)`, now)
				require.NoError(b, err)
				b.StartTimer()
				got, err := f.app.Timers.FireOnce(f.ctx)
				require.NoError(b, err)
				require.Equal(b, 500, got)
			}
		})
	}
}

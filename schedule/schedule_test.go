package schedule_test

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/schedule"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := schedule.LoadZone(name)
	require.NoError(t, err)
	return loc
}

func cronEntry(t *testing.T, expr, tz string) *schedule.Entry {
	t.Helper()
	e, err := schedule.Cron("c", expr, zone(t, tz))
	require.NoError(t, err)
	return e
}

// wall is a wall-clock time in the named zone, for readable test cases
// (only for times that exist once).
func wall(t *testing.T, tz string, y int, mo time.Month, d, h, mi int) time.Time {
	t.Helper()
	return time.Date(y, mo, d, h, mi, 0, 0, zone(t, tz)).UTC()
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

// firings lists an entry's firings strictly after from, up to n of them.
func firings(e *schedule.Entry, startedAt, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		t = e.Next(startedAt, t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// C2 + DST: each case lists the firings after a start instant, in UTC.
// A wall time in a spring-forward gap fires once at the first instant after
// the gap; a wall time repeated by a fall-back fires once, at its first
// occurrence.
func TestCronDST_C2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		expr string
		tz   string
		from time.Time
		want []time.Time
	}{
		{
			// 2025-03-09 02:00 EST -> 03:00 EDT: 02:30 does not exist.
			name: "New York spring forward: 02:30 fires at 03:00 EDT",
			expr: "30 2 * * *", tz: "America/New_York",
			from: utc(2025, 3, 8, 12, 0),
			want: []time.Time{utc(2025, 3, 9, 7, 0), utc(2025, 3, 10, 6, 30)},
		},
		{
			name: "New York spring forward: 02:00, 02:30 and 03:00 are one firing",
			expr: "0,30 2,3 * * *", tz: "America/New_York",
			from: utc(2025, 3, 9, 5, 0), // 00:00 EST
			want: []time.Time{utc(2025, 3, 9, 7, 0), utc(2025, 3, 9, 7, 30), utc(2025, 3, 10, 6, 0)},
		},
		{
			// 2025-11-02 02:00 EDT -> 01:00 EST: 01:30 occurs twice.
			name: "New York fall back: 01:30 fires once, at 01:30 EDT",
			expr: "30 1 * * *", tz: "America/New_York",
			from: utc(2025, 11, 1, 12, 0),
			want: []time.Time{utc(2025, 11, 2, 5, 30), utc(2025, 11, 3, 6, 30)},
		},
		{
			name: "New York fall back: a wildcard expression runs through the repeated hour",
			expr: "*/15 * * * *", tz: "America/New_York",
			from: utc(2025, 11, 2, 4, 50), // 00:50 EDT
			want: []time.Time{
				utc(2025, 11, 2, 5, 0), utc(2025, 11, 2, 5, 15), utc(2025, 11, 2, 5, 30), utc(2025, 11, 2, 5, 45), // 01:xx EDT
				utc(2025, 11, 2, 6, 0), utc(2025, 11, 2, 6, 15), utc(2025, 11, 2, 6, 30), utc(2025, 11, 2, 6, 45), // 01:xx EST
				utc(2025, 11, 2, 7, 0), // 02:00 EST
			},
		},
		{
			name: "New York fall back: from inside the repeated hour",
			expr: "*/15 * * * *", tz: "America/New_York",
			from: utc(2025, 11, 2, 6, 20), // 01:20 EST, the second pass
			want: []time.Time{utc(2025, 11, 2, 6, 30), utc(2025, 11, 2, 6, 45), utc(2025, 11, 2, 7, 0)},
		},
		{
			name: "New York fall back: hourly has no missing hour",
			expr: "0 * * * *", tz: "America/New_York",
			from: utc(2025, 11, 2, 4, 30), // 00:30 EDT
			want: []time.Time{utc(2025, 11, 2, 5, 0), utc(2025, 11, 2, 6, 0), utc(2025, 11, 2, 7, 0), utc(2025, 11, 2, 8, 0)},
		},
		{
			name: "New York fall back: @hourly is a wildcard expression",
			expr: "@hourly", tz: "America/New_York",
			from: utc(2025, 11, 2, 5, 30), // 01:30 EDT
			want: []time.Time{utc(2025, 11, 2, 6, 0), utc(2025, 11, 2, 7, 0)},
		},
		{
			name: "New York fall back: a wildcard minute in a fixed hour runs both passes",
			expr: "*/30 1 * * *", tz: "America/New_York",
			from: utc(2025, 11, 1, 12, 0),
			want: []time.Time{utc(2025, 11, 2, 5, 0), utc(2025, 11, 2, 5, 30), utc(2025, 11, 2, 6, 0), utc(2025, 11, 2, 6, 30), utc(2025, 11, 3, 6, 0)},
		},
		{
			name: "New York fall back: a fixed time in the repeated hour fires once",
			expr: "0 1 * * *", tz: "America/New_York",
			from: utc(2025, 11, 1, 12, 0),
			want: []time.Time{utc(2025, 11, 2, 5, 0), utc(2025, 11, 3, 6, 0)},
		},
		{
			// 2025-04-06 02:00 +11 -> 01:30 +10:30: 01:30-01:59 occur twice.
			name: "Lord Howe fall back: a wildcard expression runs through the repeated half hour",
			expr: "*/20 * * * *", tz: "Australia/Lord_Howe",
			from: utc(2025, 4, 5, 14, 15), // 01:15 +11
			want: []time.Time{
				utc(2025, 4, 5, 14, 20), utc(2025, 4, 5, 14, 40), // 01:20, 01:40 +11
				utc(2025, 4, 5, 15, 10), // 01:40 +10:30, the second pass (the clock went back at 15:00)
				utc(2025, 4, 5, 15, 30), // 02:00 +10:30
				utc(2025, 4, 5, 15, 50),
			},
		},
		{
			// 2025-10-05 02:00 +10:30 -> 02:30 +11: a 30-minute gap.
			name: "Lord Howe spring forward: 02:15 fires at 02:30 +11",
			expr: "15 2 * * *", tz: "Australia/Lord_Howe",
			from: utc(2025, 10, 4, 0, 0),
			want: []time.Time{utc(2025, 10, 4, 15, 30), utc(2025, 10, 5, 15, 15)},
		},
		{
			name: "Lord Howe spring forward: 02:45 exists",
			expr: "45 2 * * *", tz: "Australia/Lord_Howe",
			from: utc(2025, 10, 4, 0, 0),
			want: []time.Time{utc(2025, 10, 4, 15, 45)},
		},
		{
			// 2025-04-06 02:00 +11 -> 01:30 +10:30: 01:30-01:59 occur twice.
			name: "Lord Howe fall back: 01:45 fires once, at 01:45 +11",
			expr: "45 1 * * *", tz: "Australia/Lord_Howe",
			from: utc(2025, 4, 5, 0, 0),
			want: []time.Time{utc(2025, 4, 5, 14, 45), utc(2025, 4, 6, 15, 15)},
		},
		{
			// 2025-09-07 00:00 -04 -> 01:00 -03: midnight is skipped.
			name: "Santiago: a skipped midnight fires at 01:00",
			expr: "0 0 * * *", tz: "America/Santiago",
			from: utc(2025, 9, 5, 12, 0),
			want: []time.Time{utc(2025, 9, 6, 4, 0), utc(2025, 9, 7, 4, 0), utc(2025, 9, 8, 3, 0)},
		},
		{
			name: "Santiago: Sunday midnight is on the Sunday the gap starts",
			expr: "0 0 * * 0", tz: "America/Santiago",
			from: utc(2025, 9, 1, 0, 0),
			want: []time.Time{utc(2025, 9, 7, 4, 0), utc(2025, 9, 14, 3, 0)},
		},
		{
			// 2025-04-06 00:00 -03 -> 2025-04-05 23:00 -04: 23:xx occurs twice.
			name: "Santiago fall back: 23:30 fires once",
			expr: "30 23 * * *", tz: "America/Santiago",
			from: utc(2025, 4, 5, 12, 0),
			want: []time.Time{utc(2025, 4, 6, 2, 30), utc(2025, 4, 7, 3, 30)},
		},
		{
			// 2025-03-09 00:00 CST -> 01:00 CDT.
			name: "Havana: a skipped midnight fires at 01:00",
			expr: "0 0 * * *", tz: "America/Havana",
			from: utc(2025, 3, 8, 12, 0),
			want: []time.Time{utc(2025, 3, 9, 5, 0), utc(2025, 3, 10, 4, 0)},
		},
		{
			name: "the seed's weekday morning in New York",
			expr: "0 9 * * 1-5", tz: "America/New_York",
			from: utc(2025, 3, 7, 15, 0), // Friday 10:00 EST
			want: []time.Time{utc(2025, 3, 10, 13, 0), utc(2025, 3, 11, 13, 0)},
		},
		{
			name: "UTC by default",
			expr: "@daily", tz: "",
			from: utc(2025, 3, 7, 15, 0),
			want: []time.Time{utc(2025, 3, 8, 0, 0), utc(2025, 3, 9, 0, 0)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := cronEntry(t, tc.expr, tc.tz)
			got := firings(e, tc.from, tc.from, len(tc.want))
			require.Equal(t, tc.want, got)
		})
	}
}

// C2: cron matches strictly after startedAt: a session started on a
// matching minute does not fire at its start.
func TestCronStrictlyAfterStart_C2(t *testing.T) {
	t.Parallel()
	e := cronEntry(t, "0 9 * * *", "America/New_York")
	start := wall(t, "America/New_York", 2025, 3, 3, 9, 0)
	require.Equal(t, wall(t, "America/New_York", 2025, 3, 4, 9, 0), e.Next(start, start))
	// Next never answers before startedAt, whatever t is asked about.
	require.Equal(t, wall(t, "America/New_York", 2025, 3, 4, 9, 0), e.Next(start, start.Add(-48*time.Hour)))
}

// C2: every fires at startedAt + k*every, computed from startedAt alone, so
// asking at any instant (as a restarted process does) gives the same grid.
func TestEveryGrid_C2(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 3, 3, 9, 0, 0, 123456000, time.UTC)
	e := schedule.Every("hourly", time.Hour)
	require.Equal(t, start.Add(time.Hour), e.Next(start, start))
	require.Equal(t, start.Add(time.Hour), e.Next(start, start.Add(-time.Hour)))
	for _, probe := range []time.Duration{time.Nanosecond, 59 * time.Minute, time.Hour - time.Microsecond, time.Hour, 90 * time.Minute, 1000*time.Hour + 17*time.Second} {
		n := e.Next(start, start.Add(probe))
		require.True(t, n.After(start.Add(probe)))
		require.Zero(t, n.Sub(start)%time.Hour, "on the grid after %s", probe)
		require.LessOrEqual(t, n.Sub(start.Add(probe)), time.Hour)
	}
}

// C2: no firing at or after the end.
func TestNoFiringAtOrAfterEnd_C2(t *testing.T) {
	t.Parallel()
	start := utc(2025, 3, 3, 9, 0)
	end := start.Add(2 * time.Hour)
	e := schedule.Every("hourly", time.Hour)
	require.Equal(t, start.Add(time.Hour), e.NextBefore(start, start, &end))
	require.True(t, e.NextBefore(start, start.Add(time.Hour), &end).IsZero(), "the firing at the end itself does not happen")
	latest, n := e.Due(start, start, start.Add(10*time.Hour), &end)
	require.Equal(t, start.Add(time.Hour), latest)
	require.Equal(t, 1, n)

	c := cronEntry(t, "0 * * * *", "")
	latest, n = c.Due(start, start, start.Add(10*time.Hour), &end)
	require.Equal(t, start.Add(time.Hour), latest)
	require.Equal(t, 1, n)
}

// C5: the latest due firing and how many there are since the last taken
// one: a server down for three hours fires once, with missed = 2.
func TestDue_C5(t *testing.T) {
	t.Parallel()
	start := utc(2025, 3, 3, 9, 0)
	for _, e := range []*schedule.Entry{schedule.Every("hourly", time.Hour), cronEntry(t, "0 * * * *", "Europe/Paris")} {
		latest, n := e.Due(start, start, start.Add(3*time.Hour+20*time.Minute), nil)
		require.Equal(t, start.Add(3*time.Hour), latest)
		require.Equal(t, 3, n, "missed = n-1 = 2")

		latest, n = e.Due(start, start.Add(3*time.Hour), start.Add(3*time.Hour+20*time.Minute), nil)
		require.True(t, latest.IsZero())
		require.Zero(t, n, "nothing due after the one taken")

		latest, n = e.Due(start, start.Add(2*time.Hour), start.Add(4*time.Hour), nil)
		require.Equal(t, start.Add(4*time.Hour), latest, "a firing exactly at now is due")
		require.Equal(t, 2, n)

		latest, n = e.Due(start, time.Time{}, start.Add(30*time.Minute), nil)
		require.True(t, latest.IsZero())
		require.Zero(t, n)
	}
}

// C1, A3: entries that cannot be used are refused with a clear reason.
func TestParseRefuses_C1(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, want string }{
		{"CRON_TZ=America/New_York 0 9 * * *", "timezone field"},
		{"TZ=", "timezone field"},
		{"TZ=UTC 0 9 * * *", "timezone field"},
		{"  TZ=", "timezone field"},
		{"0 0 30 2 *", "never matches"},
		{"0 0 31 4 *", "never matches"},
		{"@every 1h", "every field"},
		{"0 9 * *", "not a valid cron expression"},
		{"0 0 9 * * *", "not a valid cron expression"},
		{"61 * * * *", "not a valid cron expression"},
		{"@reboot", "not a valid cron expression"},
		{"", "required"},
		{"0 9 * * 8", "not a valid cron expression"},
		{"0 9 * * 6-8", "not a valid cron expression"},
		{"0 9 * * 1-7/0", "day-of-week step"},
	} {
		_, err := schedule.Cron("c", tc.expr, time.UTC)
		require.ErrorContains(t, err, tc.want, "cron %q", tc.expr)
	}
	for _, ok := range []string{"0 0 29 2 *", "@daily", "@hourly", "*/5 9-17 * * mon-fri", " 0 9 * * * ", "0 9 * * 7", "0 9 * * 1-7", "0 9 * * 5-7/2,3"} {
		_, err := schedule.Cron("c", ok, time.UTC)
		require.NoError(t, err, "cron %q", ok)
	}
	for _, tc := range []struct{ tz, want string }{
		{"Mars/Olympus_Mons", "not an IANA timezone"},
		{"Local", "depends on the server"},
		{"../../etc/passwd", "not an IANA timezone"},
	} {
		_, err := schedule.LoadZone(tc.tz)
		require.ErrorContains(t, err, tc.want, "timezone %q", tc.tz)
	}
	for _, tc := range []struct{ every, want string }{
		{"500ms", "at least 1s"},
		{"0s", "at least 1s"},
		{"-1h", "at least 1s"},
		{"1.0000001s", "whole number of microseconds"},
		{"1 hour", "not a duration"},
		{"1d", "not a duration"},
	} {
		_, err := schedule.ParseEvery(tc.every)
		require.ErrorContains(t, err, tc.want, "every %q", tc.every)
	}
	d, err := schedule.ParseEvery("1h30m")
	require.NoError(t, err)
	require.Equal(t, 90*time.Minute, d)
}

// C5: counting a long outage of a dense cron entry stays bounded.
func TestDueCountsLongOutages_C5(t *testing.T) {
	t.Parallel()
	start := utc(2025, 1, 1, 0, 0)
	e := cronEntry(t, "* * * * *", "")
	now := start.Add(30 * 24 * time.Hour)
	latest, n := e.Due(start, start, now, nil)
	require.Equal(t, now, latest)
	require.Equal(t, 30*24*60, n)
}

// C1: day-of-week 7 is Sunday, as in Vixie cron: 7, 0 and sun name the same
// day, and a range up to 7 includes Sunday.
func TestSundayIsSeven_C1(t *testing.T) {
	t.Parallel()
	from := utc(2026, 3, 2, 12, 0) // a Monday
	sunday := firings(cronEntry(t, "0 9 * * 0", ""), from, from, 3)
	for _, expr := range []string{"0 9 * * 7", "0 9 * * sun", "0 9 * * 7,0"} {
		require.Equal(t, sunday, firings(cronEntry(t, expr, ""), from, from, 3), expr)
	}
	every := firings(cronEntry(t, "0 9 * * *", ""), from, from, 14)
	require.Equal(t, every, firings(cronEntry(t, "0 9 * * 1-7", ""), from, from, 14), "1-7 is every day")
	require.Equal(t, every, firings(cronEntry(t, "0 9 * * 0-7", ""), from, from, 14), "0-7 is every day")
	weekend := firings(cronEntry(t, "0 9 * * 6,0", ""), from, from, 4)
	require.Equal(t, weekend, firings(cronEntry(t, "0 9 * * 6-7", ""), from, from, 4))
	require.Equal(t, sunday, firings(cronEntry(t, "0 9 * * 7/3", ""), from, from, 3), "7/3 is Sunday alone")
}

// C2: the embedded timezone database is the one used, whatever the host
// has: every zone in it loads, and its release is reported.
func TestEmbeddedZones_C2(t *testing.T) {
	t.Parallel()
	require.Regexp(t, `^20[0-9]{2}[a-z]$`, schedule.TZDataVersion())
	ny := zone(t, "America/New_York")
	require.Equal(t, "America/New_York", ny.String())
	_, off := time.Date(2026, 7, 1, 12, 0, 0, 0, ny).Zone()
	require.Equal(t, -4*3600, off)
	for _, bad := range []string{"america/new_york", "America/", "/etc/passwd", "zone1970.tab.missing"} {
		_, err := schedule.LoadZone(bad)
		require.Error(t, err, bad)
	}
	n, err := schedule.ZoneCount()
	require.NoError(t, err)
	require.Greater(t, n, 400)
}

// C2: a wildcard expression (minute or hour field starting with *) fires at
// every real-time instant whose wall clock matches, through a repeated hour
// included, and nowhere else except at the end of a gap. Checked minute by
// minute across the 2026 DST changes of several zones.
func TestWildcardRealTime_C2(t *testing.T) {
	t.Parallel()
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	days := map[string][]time.Time{
		"America/New_York":    {utc(2026, 3, 7, 12, 0), utc(2026, 10, 31, 12, 0)},
		"Europe/Berlin":       {utc(2026, 3, 28, 12, 0), utc(2026, 10, 24, 12, 0)},
		"Australia/Lord_Howe": {utc(2026, 4, 4, 0, 0), utc(2026, 10, 3, 0, 0)},
		"America/Santiago":    {utc(2026, 4, 4, 0, 0), utc(2026, 9, 5, 0, 0)},
	}
	for tz, froms := range days {
		loc := zone(t, tz)
		for _, expr := range []string{"*/15 * * * *", "0 * * * *", "*/7 0-3 * * *", "5,35 * * * *"} {
			spec, err := parser.Parse(expr)
			require.NoError(t, err)
			matches := func(at time.Time) bool {
				w := at.In(loc)
				naive := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, time.UTC)
				return spec.Next(naive.Add(-time.Second)).Equal(naive)
			}
			e := cronEntry(t, expr, tz)
			for _, from := range froms {
				want := map[time.Time]bool{}
				for at := from.Add(time.Minute); at.Before(from.Add(48 * time.Hour)); at = at.Add(time.Minute) {
					if matches(at) {
						want[at] = true
					}
				}
				got := firings(e, from, from, 400)
				for _, f := range got {
					if !f.Before(from.Add(48 * time.Hour)) {
						break
					}
					if !want[f] {
						// Only a gap's end may fire without its own match.
						_, off := f.In(loc).Zone()
						_, before := f.Add(-time.Second).In(loc).Zone()
						require.Greater(t, off, before, "%s %s: %s fired without a matching wall time", tz, expr, f)
					}
					delete(want, f)
				}
				require.Empty(t, want, "%s %s: matching instants that did not fire", tz, expr)
			}
		}
	}
}

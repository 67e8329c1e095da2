// Package schedule is the arithmetic of a session's clock (SPEC C1-C6): it
// parses clock entries (a cron expression in an IANA timezone, or an every
// period) and answers two questions about a session that started at
// startedAt and may end at endsAt: when does an entry next fire after a
// given instant, and which firings are due between the last one a turn took
// and now. It has no state and touches no database: the durable timers that
// act on these answers live in package session, and turns record firings.
//
// # Firing times
//
// An every entry fires at startedAt + k·every for k = 1, 2, ...: the times
// are derived from startedAt alone, never from the previous firing, so a
// restart or a late timer never makes them drift. A cron entry fires at each
// time its expression matches strictly after startedAt. No entry fires at or
// after the session's end.
//
// # Cron and daylight saving
//
// A cron expression (five fields, or a descriptor such as @daily) names wall
// clock times in its timezone. Matching is done on the wall clock, and each
// matching wall time is then placed on the time line by these rules:
//
//   - A wall time that occurs once fires at that instant.
//   - A wall time that does not exist (it falls in a spring-forward gap) fires
//     once, at the first instant after the gap: 02:30 on the night New York
//     moves from 02:00 to 03:00 fires at 03:00 EDT; 00:00 on the night
//     Santiago moves from 00:00 to 01:00 fires at 01:00. Several matching
//     times inside one gap (02:00, 02:15, 02:30, ...) and a match at the end
//     of the gap itself (03:00) are one firing.
//   - A wall time that occurs twice (a fall-back repeats it) fires once, at
//     its first occurrence, unless the expression is a wildcard one: its
//     minute or hour field starts with * (`0 * * * *`, `*/15 * * * *`,
//     `*/10 1 * * *`, @hourly). A wildcard expression fires at both
//     occurrences, so it runs in real time through the repeated hour and an
//     hourly entry misses no hour. This is Vixie cron's rule for a clock
//     moved back; fixed times (`30 1 * * *`, @daily) still fire once.
//
// Lord Howe's 30-minute shifts follow the same rules. Day-of-week 7 is
// Sunday, like 0 (Vixie cron accepts both): `0 9 * * 7` and `1-7` work.
//
// # Timezone data
//
// Zones are read only from the IANA database embedded in the binary
// (tzdata/zoneinfo.zip, release TZDataVersion, which /readyz reports), never
// from the host's zoneinfo files or ZONEINFO, so two servers built from one
// commit fire at the same instants wherever they run. `make tzdata` copies
// the database of the Go toolchain in use.
//
// # Refused entries
//
// ParseCron refuses a TZ= or CRON_TZ= prefix (the timezone has its own
// field; robfig/cron also panics on a bare prefix), @every (use every),
// expressions that never match (0 0 30 2 *), timezones Go cannot load and
// "Local" (which would depend on the server). ParseEvery refuses periods
// under one second and periods that are not a whole number of microseconds
// (the precision times are stored with).
package schedule

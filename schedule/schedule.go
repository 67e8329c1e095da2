package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/actionsledger/actionsledger/internal/text"
)

// FiredType is the event type of a firing: of a session clock entry (C3),
// addressed to its session alone, or of a schedule trigger (A4), matched by
// that trigger alone. The service alone writes it (ledger.ValidateType
// reserves the schedule. prefix).
const FiredType = "schedule.fired"

// Limits on entries.
const (
	// MinEvery is the shortest every period, MaxEvery the longest a new
	// definition may give (366 days).
	MinEvery = time.Second
	MaxEvery = 366 * 24 * time.Hour
	// MaxCronLen is the longest cron expression, in bytes.
	MaxCronLen = 200
	// MaxTimezoneLen is the longest timezone name, in bytes.
	MaxTimezoneLen = 64
	// MaxCounted is where Due stops counting a cron entry's firings one by
	// one: a count that reaches it is reported as MaxCounted.
	MaxCounted = 1_000_000
)

// parser reads standard five-field expressions and descriptors (@daily, ...).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Entry is one compiled clock entry: a cron expression in a timezone, or an
// every period. Immutable and safe for concurrent use.
type Entry struct {
	Name string
	// Every is the period of an every entry; zero for a cron entry.
	Every time.Duration
	// spec holds the cron fields, matched against wall-clock times written
	// as UTC ("naive" times); resolve places them on the time line.
	spec *cron.SpecSchedule
	loc  *time.Location
	// everyPass is set for a wildcard expression (its minute or hour field
	// starts with *): it fires at both occurrences of a wall time repeated
	// by a fall-back, so it runs in real time through the repeated hour.
	everyPass bool
}

// Every returns an every entry. The period must have passed ParseEvery.
func Every(name string, every time.Duration) *Entry { return &Entry{Name: name, Every: every} }

// LoadZone loads an IANA timezone such as America/New_York; "" is UTC.
// "Local" is refused: it would make firing times depend on the server.
func LoadZone(name string) (*time.Location, error) {
	switch {
	case name == "":
		return time.UTC, nil
	case len(name) > MaxTimezoneLen:
		return nil, fmt.Errorf("a timezone name is at most %d bytes", MaxTimezoneLen)
	case name == "Local":
		return nil, errors.New(`"Local" depends on the server; name an IANA timezone such as America/New_York or UTC`)
	}
	loc, err := embeddedZone(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA timezone (such as America/New_York or UTC)", name)
	}
	return loc, nil
}

// Cron compiles a cron entry: expr has five fields (minute hour
// day-of-month month day-of-week) or is a descriptor (@yearly, @monthly,
// @weekly, @daily, @midnight, @hourly), evaluated in loc. Errors say what
// is wrong: a TZ=/CRON_TZ= prefix, @every, a syntax error, or an
// expression that never matches.
func Cron(name, expr string, loc *time.Location) (e *Entry, err error) {
	src := strings.TrimSpace(expr)
	switch {
	case src == "":
		return nil, errors.New("a cron expression is required")
	case len(expr) > MaxCronLen:
		return nil, fmt.Errorf("a cron expression is at most %d bytes", MaxCronLen)
	case strings.HasPrefix(src, "TZ=") || strings.HasPrefix(src, "CRON_TZ="):
		return nil, errors.New("put the timezone in the entry's timezone field, not a TZ= or CRON_TZ= prefix")
	case strings.HasPrefix(src, "@every"):
		return nil, errors.New("@every is not a cron schedule here: use the entry's every field instead")
	}
	defer func() {
		// robfig/cron is unmaintained; a panic on odd input must not take the request with it.
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("not a valid cron expression: %v", r)
		}
	}()
	src, err = sundaySeven(src)
	if err != nil {
		return nil, err
	}
	s, err := parser.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("not a valid cron expression (minute hour day-of-month month day-of-week, or @daily and the like): %v", err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("not a cron schedule")
	}
	naive := *spec
	naive.Location = time.UTC
	// Gregorian dates repeat their weekdays and leap days within five
	// years of a leap year, so no match there means no match ever.
	if naive.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%q never matches a date (such as the 30th of February)", src)
	}
	return &Entry{Name: name, spec: &naive, loc: loc, everyPass: wildcard(src)}, nil
}

// descriptorFields are the minute and hour fields of the descriptors.
var descriptorFields = map[string][2]string{
	"@yearly": {"0", "0"}, "@annually": {"0", "0"}, "@monthly": {"0", "0"},
	"@weekly": {"0", "0"}, "@daily": {"0", "0"}, "@midnight": {"0", "0"}, "@hourly": {"0", "*"},
}

// wildcard reports whether a parsed expression's minute or hour field
// starts with * (Vixie cron's rule for which jobs run through a repeated
// hour in real time).
func wildcard(src string) bool {
	f := strings.Fields(src)
	if len(f) == 1 {
		d := descriptorFields[strings.ToLower(f[0])]
		f = d[:]
	}
	return len(f) >= 2 && (strings.HasPrefix(f[0], "*") || strings.HasPrefix(f[1], "*"))
}

// sundaySeven rewrites day-of-week 7 into 0: Vixie cron, and most people,
// write 7 for Sunday, robfig/cron only 0. A single 7 becomes 0; a range or
// step that reaches 7 (1-7, 5-7/2) becomes the list of days it names.
// Other fields and descriptors are left alone.
func sundaySeven(src string) (string, error) {
	f := strings.Fields(src)
	if len(f) != 5 {
		return src, nil
	}
	parts := strings.Split(f[4], ",")
	changed := false
	for i, part := range parts {
		days, ok, err := expandSeven(part)
		if err != nil {
			return "", err
		}
		if ok {
			parts[i], changed = days, true
		}
	}
	if !changed {
		return src, nil
	}
	f[4] = strings.Join(parts, ",")
	return strings.Join(f, " "), nil
}

// expandSeven returns part (N, N-M, N/S or N-M/S in numbers) as a list of
// days with 7 written 0, and ok when part names day 7; anything else is
// left to the parser.
func expandSeven(part string) (days string, ok bool, err error) {
	rng, stepText, stepped := strings.Cut(part, "/")
	loText, hiText, ranged := strings.Cut(rng, "-")
	lo, err1 := strconv.Atoi(loText)
	hi, err2 := lo, error(nil)
	if ranged {
		hi, err2 = strconv.Atoi(hiText)
	} else if stepped {
		hi = 7
	}
	if err1 != nil || err2 != nil || (lo != 7 && hi != 7) || lo < 0 || lo > hi {
		return "", false, nil
	}
	step := 1
	if stepped {
		if step, err = strconv.Atoi(stepText); err != nil || step < 1 {
			return "", false, fmt.Errorf("not a valid cron expression: day-of-week step %q", stepText)
		}
	}
	seen := map[int]bool{}
	var out []string
	for d := lo; d <= hi; d += step {
		if d%7 == 0 && seen[0] {
			continue
		}
		seen[d%7] = true
		out = append(out, strconv.Itoa(d%7))
	}
	return strings.Join(out, ","), true, nil
}

// ParseEvery reads an every period in Go/CEL duration syntax ("90s",
// "1h30m"). It must be at least MinEvery and a whole number of microseconds.
func ParseEvery(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 15m or 1h30m", text.Cut(s, 64))
	}
	if d < MinEvery {
		return 0, fmt.Errorf("every is at least %s (got %s)", MinEvery, d)
	}
	if d%time.Microsecond != 0 {
		return 0, fmt.Errorf("every is a whole number of microseconds (got %s)", d)
	}
	return d, nil
}

// Next returns the entry's first firing strictly after t (and strictly
// after startedAt), or the zero time when there is none. The session's end
// is not applied here; see NextBefore.
func (e *Entry) Next(startedAt, t time.Time) time.Time {
	if t.Before(startedAt) {
		t = startedAt
	}
	if e.Every > 0 {
		k := t.Sub(startedAt)/e.Every + 1
		if k > (1<<63-1)/e.Every {
			return time.Time{}
		}
		return startedAt.Add(k * e.Every)
	}
	return e.cronNext(t)
}

// NextBefore is Next limited by the session's end: zero when the next
// firing is at or after end (C2). end nil means no end.
func (e *Entry) NextBefore(startedAt, t time.Time, end *time.Time) time.Time {
	n := e.Next(startedAt, t)
	if n.IsZero() || (end != nil && !n.Before(*end)) {
		return time.Time{}
	}
	return n
}

// Due returns the entry's firings f with after < f <= now, f > startedAt
// and f < end (end nil: no end): the latest of them and how many there are
// (0 and the zero time when none). after is the scheduled time of the last
// firing a turn took, or any time at or before startedAt when none was
// taken. A turn takes the latest and reports count-1 as missed (C5).
func (e *Entry) Due(startedAt, after, now time.Time, end *time.Time) (latest time.Time, count int) {
	limit := now // inclusive
	if end != nil && !end.After(limit) {
		limit = end.Add(-time.Microsecond) // times are whole microseconds
	}
	if after.Before(startedAt) {
		after = startedAt
	}
	if !limit.After(after) {
		return time.Time{}, 0
	}
	if e.Every > 0 {
		kmin := after.Sub(startedAt)/e.Every + 1
		kmax := limit.Sub(startedAt) / e.Every
		if kmax < kmin {
			return time.Time{}, 0
		}
		return startedAt.Add(kmax * e.Every), int(kmax - kmin + 1)
	}
	for f := e.cronNext(after); !f.IsZero() && !f.After(limit); f = e.cronNext(f) {
		latest = f
		if count++; count == MaxCounted {
			// Counting further would stall the caller. An expression that
			// matched this often matches at least yearly, so the latest
			// firing lies in the last 400 days before limit.
			from := limit.AddDate(0, 0, -400)
			if from.Before(f) {
				from = f
			}
			for g := e.cronNext(from); !g.IsZero() && !g.After(limit); g = e.cronNext(g) {
				latest = g
			}
			break
		}
	}
	return latest, count
}

// cronNext returns the first firing strictly after t, or zero.
func (e *Entry) cronNext(t time.Time) time.Time {
	// Start from the wall time of t, moved back by a fall-back that is
	// coming soon: wall times repeated by it may still lie ahead of t.
	inT := t.In(e.loc)
	_, low := inT.Zone()
	if _, end := inT.ZoneBounds(); !end.IsZero() && end.Sub(t) < 48*time.Hour {
		if _, next := end.In(e.loc).Zone(); next < low {
			low = next
		}
	}
	w := t.UTC().Add(time.Duration(low)*time.Second - time.Second)
	// best is the earliest firing found so far (everyPass only: the second
	// occurrence of a repeated wall time comes after the first occurrences
	// of later wall times, so the scan goes on until no later wall time
	// can be placed before best).
	var best, stop time.Time
	for range 100_000 {
		n := e.spec.Next(w)
		if n.IsZero() {
			if !best.IsZero() {
				return best
			}
			// No match within five years (a leap day around 2100): look further.
			if w.Year() > t.Year()+12 {
				return time.Time{}
			}
			w = time.Date(w.Year()+5, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
			continue
		}
		w = n
		if !best.IsZero() && !w.Before(stop) {
			return best
		}
		at := resolve(w, e.loc, t, e.everyPass)
		if at.IsZero() || (!best.IsZero() && !at.Before(best)) {
			continue
		}
		if !e.everyPass {
			return at
		}
		best = at
		offsets, _ := zoneChanges(e.loc, at.Add(-15*time.Hour), at.Add(15*time.Hour))
		highest := offsets[0]
		for _, o := range offsets {
			highest = max(highest, o)
		}
		// A wall time w' names instants no earlier than w' - highest.
		stop = at.Add(time.Duration(highest) * time.Second)
	}
	return best
}

// resolve places the wall time w (its fields read as a UTC time) in loc
// and returns the first such instant strictly after t, or zero: the instant
// w names; when it occurs twice, its first occurrence, or either occurrence
// when every is set; when it does not occur at all, the first instant after
// the gap.
func resolve(w time.Time, loc *time.Location, t time.Time, every bool) time.Time {
	if loc == time.UTC {
		if w.After(t) {
			return w
		}
		return time.Time{}
	}
	// Offsets lie within -12h..+14h, so every instant that shows w lies
	// within 15 hours of w read as UTC.
	offsets, shifts := zoneChanges(loc, w.Add(-15*time.Hour), w.Add(15*time.Hour))
	var first, next time.Time
	for _, off := range offsets {
		at := w.Add(-time.Duration(off) * time.Second)
		if _, got := at.In(loc).Zone(); got != off {
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(t) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if !first.IsZero() {
		if every {
			return next
		}
		if first.After(t) {
			return first
		}
		return time.Time{}
	}
	for _, s := range shifts {
		if s.after <= s.before {
			continue
		}
		gapStart := s.at.Add(time.Duration(s.before) * time.Second)
		gapEnd := s.at.Add(time.Duration(s.after) * time.Second)
		if !w.Before(gapStart) && w.Before(gapEnd) {
			if s.at.After(t) {
				return s.at
			}
			return time.Time{}
		}
	}
	// Unreachable for a consistent zone; Go's own normalisation as a last resort.
	if at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc).UTC(); at.After(t) {
		return at
	}
	return time.Time{}
}

// shift is a change of a zone's UTC offset (seconds) at an instant.
type shift struct {
	at            time.Time
	before, after int
}

// zoneChanges returns the distinct offsets loc uses between from and to,
// and the changes between them.
func zoneChanges(loc *time.Location, from, to time.Time) ([]int, []shift) {
	t := from.In(loc)
	_, off := t.Zone()
	offsets := []int{off}
	var shifts []shift
	for range 16 {
		_, end := t.ZoneBounds()
		if end.IsZero() || end.After(to) {
			break
		}
		t = end.In(loc)
		_, next := t.Zone()
		if next != off {
			shifts = append(shifts, shift{at: end.UTC(), before: off, after: next})
			seen := false
			for _, o := range offsets {
				seen = seen || o == next
			}
			if !seen {
				offsets = append(offsets, next)
			}
		}
		off = next
	}
	return offsets, shifts
}

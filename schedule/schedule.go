package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // firing times must not depend on the host's zone files

	"github.com/robfig/cron/v3"

	"github.com/actionsledger/actionsledger/internal/text"
)

// FiredType is the event type of a firing (C3). The service alone writes
// it (ledger.ValidateType reserves the schedule. prefix), and such an event
// is addressed to its session only: the dispatcher matches no trigger on it.
const FiredType = "schedule.fired"

// Limits on entries.
const (
	// MinEvery is the shortest every period.
	MinEvery = time.Second
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
	loc, err := time.LoadLocation(name)
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
	return &Entry{Name: name, spec: &naive, loc: loc}, nil
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
	for range 100_000 {
		n := e.spec.Next(w)
		if n.IsZero() {
			// No match within five years (a leap day around 2100): look further.
			if w.Year() > t.Year()+12 {
				return time.Time{}
			}
			w = time.Date(w.Year()+5, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
			continue
		}
		w = n
		if at := resolve(w, e.loc); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// resolve places the wall time w (its fields read as a UTC time) in loc:
// the instant it names, its first occurrence when it occurs twice, or the
// first instant after the gap when it does not occur at all.
func resolve(w time.Time, loc *time.Location) time.Time {
	if loc == time.UTC {
		return w
	}
	// Offsets lie within -12h..+14h, so every instant that shows w lies
	// within 15 hours of w read as UTC.
	offsets, shifts := zoneChanges(loc, w.Add(-15*time.Hour), w.Add(15*time.Hour))
	var first time.Time
	for _, off := range offsets {
		t := w.Add(-time.Duration(off) * time.Second)
		if _, got := t.In(loc).Zone(); got == off && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	for _, s := range shifts {
		if s.after <= s.before {
			continue
		}
		gapStart := s.at.Add(time.Duration(s.before) * time.Second)
		gapEnd := s.at.Add(time.Duration(s.after) * time.Second)
		if !w.Before(gapStart) && w.Before(gapEnd) {
			return s.at
		}
	}
	// Unreachable for a consistent zone; Go's own normalisation as a last resort.
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc).UTC()
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

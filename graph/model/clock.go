package model

import (
	"time"

	"github.com/google/uuid"
)

// ClockEntry is an entry of a session's clock as it stands for that
// session (C1-C5).
type ClockEntry struct {
	Name string `json:"name"`
	// Cron is the five cron fields or a descriptor; nil for an every entry.
	Cron *string `json:"cron,omitempty"`
	// Timezone is the IANA timezone of Cron; nil: UTC.
	Timezone *string `json:"timezone,omitempty"`
	// Every is the period of an every entry (Go duration syntax); nil for
	// a cron entry.
	Every *string `json:"every,omitempty"`
	// StartsTurn: its firings start a turn (C4).
	StartsTurn bool `json:"startsTurn"`
	// LastTaken is the scheduled time of the last firing a turn took.
	LastTaken *time.Time `json:"lastTaken,omitempty"`
	// Due is the latest firing due that no turn has taken yet (C5).
	Due *time.Time `json:"due,omitempty"`
	// Next is the first firing after now, before the session's end.
	Next *time.Time `json:"next,omitempty"`
	// Upcoming returns the next n firings after now, before the session's
	// end (none for a closed session); nextFirings calls it.
	Upcoming func(n int) []time.Time `json:"-"`
}

// TriggerClock is the clock of a schedule trigger as it runs (A4).
type TriggerClock struct {
	Trigger     string     `json:"trigger"`
	Cron        *string    `json:"cron,omitempty"`
	Timezone    *string    `json:"timezone,omitempty"`
	Every       *string    `json:"every,omitempty"`
	Anchor      time.Time  `json:"anchor"`
	Active      bool       `json:"active"`
	Fired       int        `json:"fired"`
	Missed      int        `json:"missed"`
	LastFiredAt *time.Time `json:"lastFiredAt,omitempty"`
	DueAt       *time.Time `json:"dueAt,omitempty"`
	// LastEventID is the id of the last firing's event, resolved by lastEvent.
	LastEventID *uuid.UUID `json:"-"`
	// Upcoming returns the next n firings; nextFirings calls it.
	Upcoming func(n int) []time.Time `json:"-"`
}

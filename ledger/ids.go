package ledger

import "github.com/google/uuid"

// NewID returns a new id for an event or for a row the pipeline appends
// beside events (an execution): a version 7 UUID (RFC 9562), whose first
// 48 bits are the Unix time in milliseconds and the rest random. Ids made
// one after another sort one after another, so inserting them appends to
// the right edge of their btree index instead of touching a random page
// of it (and writing that page's full image to the WAL after each
// checkpoint), which random (version 4) ids did (issue 14). Ids stay
// unique across processes by their 74 random bits; nothing may read an
// order of events from them (positions give that order, L2).
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

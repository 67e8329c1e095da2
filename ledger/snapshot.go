package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// Snapshot is a PostgreSQL snapshot (pg_current_snapshot(), text form
// "xmin:xmax:xip,..."): which transactions a statement saw as committed.
// Subscribers take one with their first read, and skip the notifications
// of transactions it already saw (issue 12).
type Snapshot struct {
	xmin, xmax uint64
	xip        map[uint64]bool
}

// ParseSnapshot reads the text form of a pg_snapshot.
func ParseSnapshot(s string) (Snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("ledger: snapshot %q: want xmin:xmax:xip", s)
	}
	var snap Snapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("ledger: snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("ledger: snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		snap.xip = map[uint64]bool{}
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return Snapshot{}, fmt.Errorf("ledger: snapshot %q: %w", s, err)
			}
			snap.xip[v] = true
		}
	}
	return snap, nil
}

// Saw reports whether the committed transaction xid (a full 64-bit
// transaction id, as pg_current_xact_id() gives it) was visible to the
// snapshot, as pg_visible_in_snapshot would.
func (s Snapshot) Saw(xid uint64) bool {
	switch {
	case xid < s.xmin:
		return true
	case xid >= s.xmax:
		return false
	}
	return !s.xip[xid]
}

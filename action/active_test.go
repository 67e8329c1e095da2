package action

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A2: a version covers the events of its own range (new sessions, intake
// records); its triggers reach its pinned sessions from its FromPosition
// until the action is disabled, whatever newer versions exist; a copy kept
// for its sessions alone covers nothing.
func TestA2CoversAndCoversPinned(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		c              Compiled
		pos            int64
		covers, pinned bool
	}{
		{"current, at from", Compiled{FromPosition: 5}, 5, false, false},
		{"current, after from", Compiled{FromPosition: 5}, 6, true, true},
		{"replaced, in range", Compiled{FromPosition: 5, ToPosition: 9}, 9, true, true},
		{"replaced, after range", Compiled{FromPosition: 5, ToPosition: 9}, 10, false, true},
		{"disabled, before", Compiled{FromPosition: 5, ToPosition: 9, PinnedToPosition: 12}, 12, false, true},
		{"disabled, after", Compiled{FromPosition: 5, ToPosition: 9, PinnedToPosition: 12}, 13, false, false},
		{"kept for sessions, positions 0", Compiled{pinnedOnly: true}, 1, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.covers, tc.c.Covers(tc.pos), "Covers")
			require.Equal(t, tc.pinned, tc.c.CoversPinned(tc.pos), "CoversPinned")
		})
	}
}

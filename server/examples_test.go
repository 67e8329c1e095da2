package server_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/examples"
)

// TestExamplesAreVerbatim checks testdata holds byte-identical copies of the
// seed's operations (I2: they run unchanged). The shared examples live in
// ../shared/examples next to the repository; without that folder (a plain
// checkout) the comparison is skipped.
func TestExamplesAreVerbatim(t *testing.T) {
	t.Parallel()
	shared := filepath.Join("..", "..", "shared", "examples")
	if _, err := os.Stat(shared); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent: cannot compare the seed examples", shared)
	}
	for _, name := range []string{"create_monitor.graphql", "session_query.graphql", "approve.graphql", "retry_held_turn.graphql",
		"session_block_with_end_and_clock.graphql-fragment", "tool_with_session.graphql-fragment"} {
		want, err := os.ReadFile(filepath.Join(shared, name))
		require.NoError(t, err)
		got, err := fs.ReadFile(examples.FS, name)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "examples/%s differs from the seed's", name)
	}
}

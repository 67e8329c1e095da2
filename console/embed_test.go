package console_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/console"
)

// Issue 12 (GraphiQL): a front end is built when its index.html is there.
func TestBuilt(t *testing.T) {
	t.Parallel()
	require.False(t, console.Built(fstest.MapFS{}))
	require.False(t, console.Built(fstest.MapFS{"assets/index-1.js": {}}))
	require.True(t, console.Built(fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}))
}

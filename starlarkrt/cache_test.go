package starlarkrt

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProgramCacheKeepsTheMostRecent(t *testing.T) {
	t.Parallel()
	c := newProgramCache(2)
	key := func(s string) cacheKey { return cacheKey{filename: "f.star", sum: sha256.Sum256([]byte(s))} }
	a, b, d := &program{}, &program{}, &program{}
	c.put(key("a"), a)
	c.put(key("b"), b)
	require.Same(t, a, c.get(key("a"))) // a is now the most recent
	c.put(key("d"), d)                  // evicts b
	require.Nil(t, c.get(key("b")))
	require.Same(t, a, c.get(key("a")))
	require.Same(t, d, c.get(key("d")))
	// The file name is part of the key: positions in errors name it.
	require.Nil(t, c.get(cacheKey{filename: "other.star", sum: key("a").sum}))
}

func TestCompileIsCached(t *testing.T) {
	t.Parallel()
	src := "def main(event):\n    return 'cached'\n"
	p1, err := compile("cache.star", src)
	require.NoError(t, err)
	p2, err := compile("cache.star", src)
	require.NoError(t, err)
	require.Same(t, p1, p2)
	p3, err := compile("other.star", src)
	require.NoError(t, err)
	require.NotSame(t, p1, p3)
}

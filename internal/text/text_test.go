package text

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// Issue 10 item 4: every cut lands on a character boundary.
func TestCutKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 3000) // 2 bytes each
	for _, n := range []int{0, 1, 2, 3, 4, 5, 1999, 2000, 2001, 6000} {
		got := Cut(s, n)
		require.True(t, utf8.ValidString(got), "n=%d", n)
		require.LessOrEqual(t, len(got), n, "n=%d", n)
		if n >= len(s) {
			require.Equal(t, s, got)
		}
	}
	require.Equal(t, "é"+Ellipsis, Cut("ééé", 5))
	require.Equal(t, "abc", Cut("abc", 3))
	require.Equal(t, "a"+Ellipsis, Cut("abcde", 4))
	require.Equal(t, "€", Prefix("€€", 5)) // 3-byte characters
	require.Equal(t, "", Prefix("€", 2))
}

func TestCleanMakesTextStorable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a\uFFFDb\uFFFD", Clean("a\x00b\xff"))
	got := Store(strings.Repeat("\xff", 10), 7)
	require.True(t, utf8.ValidString(got))
	require.LessOrEqual(t, len(got), 7)
}

func FuzzCut(f *testing.F) {
	f.Add("é€😀abc", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 64
		got := Cut(s, n)
		if len(s) <= n && got != s {
			t.Fatalf("Cut changed a string that fits")
		}
		if len(s) > n && len(got) > max(n, 0) {
			t.Fatalf("Cut(%q, %d) = %q is longer than %d", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q split a character", s, n, got)
		}
	})
}

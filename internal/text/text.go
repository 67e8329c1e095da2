// Package text cuts and cleans strings bound for storage or messages.
// PostgreSQL's text and jsonb refuse invalid UTF-8 and the NUL character, so
// a string cut in the middle of a character (or carrying NUL) makes the
// statement that stores it fail; everything that shortens or stores text
// the service did not write itself goes through here (issue 10, item 4).
package text

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks a cut made by Cut.
const Ellipsis = "…"

// Prefix returns the longest prefix of s of at most n bytes that ends on a
// character boundary. n <= 0 gives "". s is returned whole when it fits.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Cut returns s when it is at most n bytes long, else its longest prefix
// that, with Ellipsis appended, is at most n bytes, cut on a character
// boundary. n smaller than Ellipsis gives a bare prefix.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(Ellipsis) {
		return Prefix(s, n)
	}
	return Prefix(s, n-len(Ellipsis)) + Ellipsis
}

// Clean returns s made storable: each invalid UTF-8 sequence and each NUL
// character replaced by U+FFFD.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// Store returns s cleaned (Clean) and cut to at most n bytes (Cut): the form
// of a handler's reason or message before it is written to a text column.
func Store(s string, n int) string { return Cut(Clean(s), n) }

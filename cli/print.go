package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// table writes aligned columns: a header row, then rows. Cells are put on
// one line (tabs and newlines become spaces) so that a value cannot break
// the layout.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
		if cells[i] == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// oneLine replaces control characters (tabs, newlines) with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// clip shortens s to at most n runes, ending in "…" when it cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n-1 {
			return s[:k] + "…"
		}
		i++
	}
	return s
}

// compact is v's JSON on one line (raw JSON is compacted, not re-encoded,
// so numbers stay as written); "" for nothing or null.
func compact(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// rawPtr is the bytes of an optional JSON value.
func rawPtr(p *json.RawMessage) []byte {
	if p == nil {
		return nil
	}
	return *p
}

// indentJSON is raw indented by prefix, for multi-line human output.
func indentJSON(raw []byte, prefix string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// stamp formats t for tables: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ptr returns a pointer to v, or nil for the zero value (an option not
// given).
func ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// marshalIndent is v as indented JSON, each line after the first starting
// with prefix; HTML characters are not escaped.
func marshalIndent(v any, prefix string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

package graph

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// Page sizes: first defaults to DefaultPage and may not exceed MaxPage.
const (
	DefaultPage = 100
	MaxPage     = 500
)

// pageSize validates a connection's first argument.
func pageSize(first *int) (int, error) {
	if first == nil {
		return DefaultPage, nil
	}
	if *first < 1 || *first > MaxPage {
		return 0, fault.New(fault.BadInput, "first", "first is 1-%d", MaxPage)
	}
	return *first, nil
}

// Cursors are opaque to clients: base64 of "<kind>:<value>".
func cursor(kind, value string) *string {
	s := base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + value))
	return &s
}

func cursorInt(kind string, v int64) *string { return cursor(kind, strconv.FormatInt(v, 10)) }

// decodeCursor returns the value of an after cursor of the given kind ("" when after is nil).
func decodeCursor(after *string, kind string) (string, error) {
	if after == nil || *after == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(*after)
	v, ok := strings.CutPrefix(string(raw), kind+":")
	if err != nil || !ok {
		return "", fault.New(fault.BadInput, "after", "not a cursor from this connection")
	}
	return v, nil
}

func decodeCursorInt(after *string, kind string) (int64, error) {
	v, err := decodeCursor(after, kind)
	if err != nil || v == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fault.New(fault.BadInput, "after", "not a cursor from this connection")
	}
	return n, nil
}

// pageInfo builds PageInfo for a page fetched with limit n+1: it trims the
// extra item and reports whether there was one.
func trim[T any](items []T, n int) ([]T, bool) {
	if len(items) > n {
		return items[:n], true
	}
	return items, false
}

func pageInfo(hasNext bool, end *string) *model.PageInfo {
	return &model.PageInfo{HasNextPage: hasNext, EndCursor: end}
}

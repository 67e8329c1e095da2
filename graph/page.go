package graph

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/google/uuid"

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

// paginate runs one page of a connection: it decodes the after cursor of
// kind, fetches up to first+1 items after it (fetch gets the cursor's value,
// "" at the start), trims the extra item and builds PageInfo with the
// cursor of the last item (key gives an item's cursor value).
func paginate[T any](first *int, after *string, kind string, fetch func(after string, limit int) ([]T, error), key func(T) string) ([]T, *model.PageInfo, error) {
	n, err := pageSize(first)
	if err != nil {
		return nil, nil, err
	}
	from, err := decodeCursor(after, kind)
	if err != nil {
		return nil, nil, err
	}
	items, err := fetch(from, n+1)
	if err != nil {
		return nil, nil, err
	}
	items, more := trim(items, n)
	var end *string
	if len(items) > 0 {
		end = cursor(kind, key(items[len(items)-1]))
	}
	return items, pageInfo(more, end), nil
}

// cursorNumber reads a numeric cursor value ("" reads as 0).
func cursorNumber(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fault.New(fault.BadInput, "after", "not a cursor from this connection")
	}
	return n, nil
}

// cursorUUID reads a UUID cursor value ("" reads as uuid.Nil).
func cursorUUID(v string) (uuid.UUID, error) {
	if v == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, fault.New(fault.BadInput, "after", "not a cursor from this connection")
	}
	return id, nil
}

// positionArg reads the before argument of recentEvents: a position as
// Event.position gives it, or an events page's endCursor; nil or "" is 0
// (no bound). Errors: BAD_USER_INPUT on before.
func positionArg(before *string) (int64, error) {
	if before == nil || *before == "" {
		return 0, nil
	}
	v := *before
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	s, ok := strings.CutPrefix(string(raw), "position:")
	n, perr := strconv.ParseInt(s, 10, 64)
	if err != nil || !ok || perr != nil || n <= 0 {
		return 0, fault.New(fault.BadInput, "before", "not a position or a cursor of an events page")
	}
	return n, nil
}

package jsonvalue

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Clean returns raw with every NUL character inside its strings (keys and
// values) replaced by U+FFFD, the one character PostgreSQL's jsonb refuses
// that encoding/json still writes (as \u0000); raw is returned unchanged
// when it holds none, or when it is not valid JSON. For text the service
// records on a handler's behalf (transcript entries, reasons), where
// refusing the text would lose the record it belongs to (issue 10 item 4).
func Clean(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return raw
	}
	v, err := Decode(raw)
	if err != nil {
		return raw
	}
	changed := false
	v = clean(v, &changed)
	if !changed { // the text held an escaped backslash before u0000
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

func clean(v any, changed *bool) any {
	switch x := v.(type) {
	case string:
		return cleanString(x, changed)
	case []any:
		for i := range x {
			x[i] = clean(x[i], changed)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[cleanString(k, changed)] = clean(e, changed)
		}
		return out
	}
	return v
}

func cleanString(s string, changed *bool) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	*changed = true
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

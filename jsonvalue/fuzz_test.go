package jsonvalue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// FuzzJSONValue checks arbitrary bytes (issue 10, HARD-PARTS 6 and 7):
// Check never panics and fails only with INVALID_JSON or PAYLOAD_TOO_LARGE;
// whatever it accepts decodes, encodes back to JSON that it accepts again
// with the same value (numbers by their exact text), contains no NUL and is
// valid UTF-8, and PostgreSQL stores it as jsonb with every number exact.
// The server is TEST_DATABASE_URL's (see internal/pgtest); only SELECTs run.
func FuzzJSONValue(f *testing.F) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		f.Fatalf("PostgreSQL: %v", err)
	}
	f.Cleanup(func() { conn.Close(ctx) })

	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := jsonvalue.Check(raw, "v"); err != nil {
			if c := fault.CodeOf(err); c != fault.InvalidJSON && c != fault.PayloadTooLarge {
				t.Fatalf("Check: %v (code %q)", err, c)
			}
			return
		}
		if !utf8.Valid(raw) {
			t.Fatalf("accepted invalid UTF-8")
		}
		v, err := jsonvalue.Decode(raw)
		if err != nil {
			t.Fatalf("accepted but does not decode: %v", err)
		}
		enc, err := jsonvalue.Encode(v)
		if err != nil {
			t.Fatalf("accepted but does not encode: %v", err)
		}
		if !utf8.Valid(enc) || bytes.IndexByte(enc, 0) >= 0 || nulEscape(enc) {
			t.Fatalf("encoded form %q cannot be stored", enc)
		}
		if err := jsonvalue.Check(enc, "v"); err != nil {
			t.Fatalf("encoded form %q is refused: %v", enc, err)
		}
		if !jsonvalue.Equal(raw, enc) {
			t.Fatalf("%q encodes to a different value %q", raw, enc)
		}
		var stored string
		if err := conn.QueryRow(ctx, `SELECT $1::jsonb::text`, string(raw)).Scan(&stored); err != nil {
			t.Fatalf("PostgreSQL refuses %q: %v", raw, err)
		}
		back, err := jsonvalue.Decode([]byte(stored))
		if err != nil {
			t.Fatalf("PostgreSQL gave back %q: %v", stored, err)
		}
		if !sameValue(v, back) {
			t.Fatalf("PostgreSQL stored %q as %q", raw, stored)
		}
	})
}

// sameValue compares decoded JSON with numbers by exact value (PostgreSQL
// writes 1e2 as 100).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			if f, ok := y[k]; !ok || !sameValue(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// nulEscape reports whether JSON text holds a \u0000 escape: one whose
// backslash is not itself escaped (`"\\u0000"` is the six characters
// \u0000, which PostgreSQL stores).
func nulEscape(text []byte) bool {
	for i := 0; ; {
		j := bytes.Index(text[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		k := j
		for k > 0 && text[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return true
		}
		i = j + 1
	}
}

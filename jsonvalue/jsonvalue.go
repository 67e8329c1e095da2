// Package jsonvalue handles the JSON values clients store: documents that
// must keep every number exact (no float64 detour, HARD-PARTS 6) and must be
// storable in a PostgreSQL jsonb column (no NUL characters, HARD-PARTS 7).
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Limits on stored values.
const (
	// MaxBytes is the largest encoded JSON value accepted, in bytes.
	MaxBytes = 1 << 20
	// MaxDepth is the deepest nesting of arrays and objects accepted.
	MaxDepth = 64
)

// Value is a JSON document kept as its encoded bytes. The zero Value is JSON null.
type Value []byte

// MarshalJSON returns the encoded bytes, or null for an empty Value.
func (v Value) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON keeps a copy of the encoded bytes.
func (v *Value) UnmarshalJSON(b []byte) error {
	*v = append((*v)[:0], b...)
	return nil
}

// Decode decodes v into plain Go values: map[string]any, []any, string,
// bool, nil and json.Number for every number (so integers stay exact).
func (v Value) Decode() (any, error) {
	if len(v) == 0 {
		return nil, nil
	}
	return Decode(v)
}

// Decode decodes raw JSON with numbers as json.Number. Errors on invalid
// JSON or trailing data.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return out, nil
}

// Encode encodes a plain Go value (as produced by Decode, or with int64,
// uint64 and float64 numbers) without HTML escaping.
func Encode(v any) (Value, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return Value(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// MustEncode is Encode for values known to be encodable; it panics otherwise.
func MustEncode(v any) Value {
	out, err := Encode(v)
	if err != nil {
		panic(err)
	}
	return out
}

// Check validates raw as a storable JSON value: well-formed, at most
// MaxBytes, at most MaxDepth deep, and with no NUL character in any string
// or key. Errors: *fault.Error with code InvalidJSON or PayloadTooLarge,
// naming field.
func Check(raw []byte, field string) error {
	if len(raw) > MaxBytes {
		return fault.New(fault.PayloadTooLarge, field, "JSON value is %d bytes; the limit is %d", len(raw), MaxBytes)
	}
	if !json.Valid(raw) {
		return fault.New(fault.InvalidJSON, field, "not a well-formed JSON value")
	}
	v, err := Decode(raw)
	if err != nil {
		return fault.New(fault.InvalidJSON, field, "not a well-formed JSON value: %v", err)
	}
	return walk(v, 0, field)
}

func walk(v any, depth int, field string) error {
	if depth > MaxDepth {
		return fault.New(fault.InvalidJSON, field, "JSON value nests deeper than %d levels", MaxDepth)
	}
	switch x := v.(type) {
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return fault.New(fault.InvalidJSON, field, "strings may not contain the NUL character (\\u0000)")
		}
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 {
				return fault.New(fault.InvalidJSON, field, "object keys may not contain the NUL character (\\u0000)")
			}
			if err := walk(e, depth+1, field); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := walk(e, depth+1, field); err != nil {
				return err
			}
		}
	}
	return nil
}

// Equal reports whether a and b encode the same JSON value (object key order
// and whitespace ignored; numbers compared by their exact text after
// normalising through json.Number).
func Equal(a, b []byte) bool {
	da, err1 := Decode(orNull(a))
	db, err2 := Decode(orNull(b))
	if err1 != nil || err2 != nil {
		return false
	}
	ea, _ := Encode(da)
	eb, _ := Encode(db)
	return bytes.Equal(ea, eb)
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// Package jsonvalue handles the JSON values clients store: documents that
// must keep every number exact (no float64 detour, HARD-PARTS 6) and must be
// storable in a PostgreSQL jsonb column (no NUL characters, HARD-PARTS 7).
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

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

// Check validates raw as a storable JSON value: well-formed UTF-8 JSON, at
// most MaxBytes, at most MaxDepth deep, with no NUL character and no
// unpaired surrogate escape in any string or key, and every number within
// what PostgreSQL's numeric holds. Errors: *fault.Error with code
// InvalidJSON or PayloadTooLarge, naming field.
func Check(raw []byte, field string) error {
	if len(raw) > MaxBytes {
		return fault.New(fault.PayloadTooLarge, field, "JSON value is %d bytes; the limit is %d", len(raw), MaxBytes)
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return fault.New(fault.InvalidJSON, field, "not a well-formed JSON value")
	}
	if !surrogatesPaired(raw) {
		return fault.New(fault.InvalidJSON, field, "strings may not contain an unpaired surrogate escape (\\ud800-\\udfff)")
	}
	return scan(raw, field)
}

// scan checks every token of raw, which is well-formed JSON: depth, NUL
// characters, numbers. It reads the tokens, not the decoded value, since
// decoding keeps only the last of a repeated key and PostgreSQL reads them
// all ({"a": 1e999999, "a": 0} must be refused too).
func scan(raw []byte, field string) error {
	// raw is well-formed (Check): a string is a key exactly when a colon
	// follows it, and every byte outside strings is structure, a literal
	// or a number. One pass, no allocation but for number texts; it used
	// encoding/json's Decoder.Token, an allocation per token, which was
	// a tenth of the service's CPU under bulk writes (issue 14).
	depth := 0
	// grow is how many bytes the numbers add once written out in full, as
	// PostgreSQL stores and returns them (1e131000 is 131,001 digits).
	var grow int64
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '{' || c == '[':
			if depth+1 > MaxDepth {
				return fault.New(fault.InvalidJSON, field, "JSON value nests deeper than %d levels", MaxDepth)
			}
			depth++
			i++
		case c == '}' || c == ']':
			depth--
			i++
		case c == '"':
			end, nul := stringEnd(raw, i)
			if nul {
				if colonFollows(raw, end) {
					return fault.New(fault.InvalidJSON, field, "object keys may not contain the NUL character (\\u0000)")
				}
				return fault.New(fault.InvalidJSON, field, "strings may not contain the NUL character (\\u0000)")
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			x := string(raw[i:j])
			size, fits := numeric(x)
			if !fits {
				return fault.New(fault.InvalidJSON, field, "number %.40s is outside the stored range (at most %d digits before the decimal point and %d after)", x, maxIntDigits, maxFracDigits)
			}
			if n := size - int64(len(x)); n > 0 {
				grow += n
			}
			i = j
		default: // whitespace, ',', ':' and the letters of true, false, null
			i++
		}
	}
	if stored := int64(len(raw)) + grow; stored > MaxBytes {
		return fault.New(fault.PayloadTooLarge, field, "JSON value is %d bytes with its numbers written out in full, as stored (an exponent such as 1e1000 stands for its digits); the limit is %d", stored, MaxBytes)
	}
	return nil
}

// stringEnd returns the index after the string that starts at raw[start]
// (a quote) and whether it holds an escaped NUL (\u0000).
func stringEnd(raw []byte, start int) (end int, nul bool) {
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i + 1, nul
		case '\\':
			if i+5 < len(raw) && raw[i+1] == 'u' && hex4(raw[i+2:i+6]) == 0 {
				nul = true
			}
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		}
	}
	return len(raw), nul
}

// colonFollows reports whether the next byte after i that is not
// whitespace is a colon.
func colonFollows(raw []byte, i int) bool {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return raw[i] == ':'
	}
	return false
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// SurrogatesPaired reports whether every \u escape of a UTF-16 surrogate
// in raw, which must be well-formed JSON, is a high surrogate followed by a
// low one (PostgreSQL's jsonb refuses any other; Go's decoder turns the
// rest into U+FFFD).
func SurrogatesPaired(raw []byte) bool { return surrogatesPaired(raw) }

// surrogatesPaired reports whether every \u escape of a UTF-16 surrogate
// in raw (well-formed JSON) is a high surrogate followed by a low one:
// PostgreSQL's jsonb refuses any other.
func surrogatesPaired(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		r := hex4(raw[i+2 : i+6])
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return false
			}
			if lo := hex4(raw[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// PostgreSQL's numeric, which jsonb stores numbers as, holds at most this
// many digits before and after the decimal point.
const (
	maxIntDigits  = 131072
	maxFracDigits = 16383
	maxExponent   = 1<<30 - 1 // INT_MAX/2 in PostgreSQL's numeric input
)

// numeric reads the JSON number n as PostgreSQL's numeric (which jsonb
// stores numbers as) would: whether it fits, and if so its length written
// out in full, as PostgreSQL returns it: sign, the digits before the
// decimal point (at least one), and the point and the digits after it when
// its scale is above zero.
func numeric(n string) (size int64, fits bool) {
	if strings.HasPrefix(n, "-") {
		size, n = 1, n[1:]
	}
	mant, exp := n, int64(0)
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.ParseInt(n[i+1:], 10, 64)
		// PostgreSQL refuses an exponent of INT_MAX/2 or more either way,
		// whatever the digits (0E2000000000 too).
		if err != nil || e >= maxExponent || e <= -maxExponent {
			return 0, false
		}
		mant, exp = n[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	// The scale PostgreSQL keeps counts trailing zeros as written.
	scale := int64(len(frac)) - exp
	if scale > maxFracDigits {
		return 0, false
	}
	before := int64(1) // zero is written "0", whatever its exponent
	if digits := strings.TrimLeft(intPart+frac, "0"); digits != "" {
		// Digits before the decimal point: the most significant digit's place.
		b := int64(len(digits)) - int64(len(frac)) + exp
		if b > maxIntDigits {
			return 0, false
		}
		before = max(b, 1)
	}
	size += before
	if scale > 0 {
		size += 1 + scale
	}
	return size, true
}

// Equal reports whether a and b encode the same JSON value, as PostgreSQL's
// jsonb compares them: object key order and whitespace ignored, numbers
// compared by value (1.5e300 equals its digits written out, 1 equals 1.0),
// exactly (no float64 detour). Invalid JSON equals nothing.
func Equal(a, b []byte) bool {
	da, err1 := Decode(orNull(a))
	db, err2 := Decode(orNull(b))
	if err1 != nil || err2 != nil {
		return false
	}
	return equal(da, db)
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
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
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(x, y)
	}
	return a == b // nil, bool, string
}

// numbersEqual compares two JSON numbers by exact value. Both passed
// Decode, so they are well formed; their size is what Check allows.
func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

package starlarkrt

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// decodeValue converts JSON to Starlark: null → None, booleans → bool,
// numbers written without fraction or exponent → int (exactly, any size),
// other numbers → float, strings → string, arrays → list, objects → dict
// with keys in sorted (byte) order. Empty raw is None.
func decodeValue(raw jsonvalue.Value) (starlark.Value, error) {
	v, err := raw.Decode()
	if err != nil {
		return nil, err
	}
	return fromGo(v)
}

func fromGo(v any) (starlark.Value, error) {
	switch v := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(v), nil
	case string:
		return starlark.String(v), nil
	case json.Number:
		return numberValue(string(v))
	case []any:
		elems := make([]starlark.Value, len(v))
		for i, e := range v {
			sv, err := fromGo(e)
			if err != nil {
				return nil, err
			}
			elems[i] = sv
		}
		return starlark.NewList(elems), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := starlark.NewDict(len(v))
		for _, k := range keys {
			sv, err := fromGo(v[k])
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), sv); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}

func numberValue(s string) (starlark.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return starlark.MakeBigInt(b), nil
		}
		return nil, fmt.Errorf("invalid number %.40s", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %.40s is outside the range of a float", s)
	}
	return starlark.Float(f), nil
}

// convertError is a value that cannot be converted to storable JSON.
type convertError struct {
	path     string
	msg      string
	tooLarge bool
}

func (e *convertError) Error() string { return e.path + ": " + e.msg }

// encodeValue converts a Starlark value to JSON that jsonvalue.Check
// accepts: None → null, bool, int → its exact decimal text (at most
// 131072 digits), float → shortest text that reads back as the same float
// (with ".0" if it would read as an int; NaN and infinities refused),
// string → string (valid UTF-8 without NUL), list and tuple → array, dict
// with string keys → object (in the dict's order), a session struct →
// object. Anything else (functions, modules, times, ranges) is an error
// naming where it is, as is nesting deeper than jsonvalue.MaxDepth; more
// than max bytes of output is an error with tooLarge set.
func encodeValue(v starlark.Value, max int, root string) (jsonvalue.Value, error) {
	e := &encoder{max: max}
	if err := e.value(v, 0); err != nil {
		err.path = root + err.path
		return nil, err
	}
	return jsonvalue.Value(e.buf), nil
}

type encoder struct {
	buf []byte
	max int
}

func (e *encoder) tooLarge() *convertError {
	return &convertError{msg: fmt.Sprintf("the JSON encoding is larger than %d bytes", e.max), tooLarge: true}
}

func (e *encoder) write(s string) *convertError {
	if len(e.buf)+len(s) > e.max {
		return e.tooLarge()
	}
	e.buf = append(e.buf, s...)
	return nil
}

func (e *encoder) value(v starlark.Value, depth int) *convertError {
	if depth > jsonvalue.MaxDepth {
		return &convertError{msg: fmt.Sprintf("the value nests deeper than %d levels", jsonvalue.MaxDepth)}
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return e.write("null")
	case starlark.Bool:
		if v {
			return e.write("true")
		}
		return e.write("false")
	case starlark.Int:
		if intBits(v) > maxIntBits {
			return &convertError{msg: fmt.Sprintf("the integer has more than %d digits", maxIntDigits)}
		}
		s := v.String()
		if len(strings.TrimPrefix(s, "-")) > maxIntDigits {
			return &convertError{msg: fmt.Sprintf("the integer has more than %d digits", maxIntDigits)}
		}
		return e.write(s)
	case starlark.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return &convertError{msg: fmt.Sprintf("%v cannot be represented in JSON", v)}
		}
		return e.write(floatText(f))
	case starlark.String:
		return e.string(string(v))
	case *starlark.List:
		return e.array(v.Len(), v.Index, depth)
	case starlark.Tuple:
		return e.array(len(v), func(i int) starlark.Value { return v[i] }, depth)
	case *starlark.Dict:
		items := v.Items()
		return e.object(len(items), func(i int) (starlark.Value, starlark.Value) { return items[i][0], items[i][1] }, depth)
	case *starlarkstruct.Struct:
		names := v.AttrNames()
		return e.object(len(names), func(i int) (starlark.Value, starlark.Value) {
			f, _ := v.Attr(names[i])
			return starlark.String(names[i]), f
		}, depth)
	}
	return &convertError{msg: fmt.Sprintf("a %s cannot be converted to JSON", v.Type())}
}

func (e *encoder) array(n int, elem func(int) starlark.Value, depth int) *convertError {
	if err := e.write("["); err != nil {
		return err
	}
	for i := range n {
		if i > 0 {
			if err := e.write(","); err != nil {
				return err
			}
		}
		if err := e.value(elem(i), depth+1); err != nil {
			if !err.tooLarge {
				err.path = fmt.Sprintf("[%d]", i) + err.path
			}
			return err
		}
	}
	return e.write("]")
}

func (e *encoder) object(n int, entry func(int) (starlark.Value, starlark.Value), depth int) *convertError {
	if err := e.write("{"); err != nil {
		return err
	}
	for i := range n {
		k, v := entry(i)
		key, ok := k.(starlark.String)
		if !ok {
			return &convertError{msg: fmt.Sprintf("dict key %s (%s) is not a string; JSON object keys must be strings", shortRepr(k), k.Type())}
		}
		if i > 0 {
			if err := e.write(","); err != nil {
				return err
			}
		}
		if err := e.string(string(key)); err != nil {
			return err
		}
		if err := e.write(":"); err != nil {
			return err
		}
		if err := e.value(v, depth+1); err != nil {
			if !err.tooLarge {
				err.path = "[" + strconv.Quote(string(key)) + "]" + err.path
			}
			return err
		}
	}
	return e.write("}")
}

// string writes s as a JSON string; it must be valid UTF-8 without NUL
// (PostgreSQL's jsonb refuses both).
func (e *encoder) string(s string) *convertError {
	if len(e.buf)+len(s)+2 > e.max {
		return e.tooLarge()
	}
	e.buf = append(e.buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return &convertError{msg: "a string is not valid UTF-8"}
			}
			e.buf = append(e.buf, s[i:i+size]...)
			i += size
			continue
		}
		switch {
		case c == 0:
			return &convertError{msg: "a string contains the NUL character"}
		case c == '"' || c == '\\':
			e.buf = append(e.buf, '\\', c)
		case c == '\n':
			e.buf = append(e.buf, '\\', 'n')
		case c == '\r':
			e.buf = append(e.buf, '\\', 'r')
		case c == '\t':
			e.buf = append(e.buf, '\\', 't')
		case c < 0x20:
			e.buf = append(e.buf, fmt.Sprintf(`\u%04x`, c)...)
		default:
			e.buf = append(e.buf, c)
		}
		i++
		if len(e.buf) > e.max {
			return e.tooLarge()
		}
	}
	return e.write(`"`)
}

// floatText is the shortest text that reads back as f, in the notation
// encoding/json uses (exponent only below 1e-6 and from 1e21), with ".0"
// added where the text would otherwise read back as an int.
func floatText(f float64) string {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	s := strconv.FormatFloat(f, format, -1, 64)
	if format == 'e' {
		// 1e-07 => 1e-7
		if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
		return s
	}
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// shortRepr is a bounded repr for error messages.
func shortRepr(v starlark.Value) string {
	if n, deep := textSize(v, modeRepr, 64); n > 64 || deep {
		return "(" + v.Type() + ")"
	}
	return v.String()
}

package jsonvalue

import (
	"bytes"
	"slices"
)

// Canonical returns raw re-encoded as Encode(Decode(raw)) encodes it,
// byte for byte: no insignificant whitespace, each object's keys sorted by
// their bytes (a repeated key keeping its last value), numbers as written,
// strings escaped as encoding/json escapes them without HTML escaping.
// Errors: those of Decode (invalid JSON, trailing data).
//
// Values whose strings and keys are printable ASCII without escapes, with
// no key repeated in an object and nested at most MaxDepth deep, are
// re-encoded in one pass over raw; any other value goes through Decode and
// Encode. It exists for the idempotency hash of a write (package ledger),
// which must stay the same across releases: FuzzCanonicalMatchesDecodeEncode
// holds the two paths to the same bytes and errors (issue 14: decoding and
// encoding every value was 7 % of a bulk write's CPU).
func Canonical(raw []byte) ([]byte, error) {
	c := canon{raw: raw}
	out, ok := c.value(make([]byte, 0, len(raw)), 0)
	if ok {
		c.space()
		if c.i == len(raw) {
			return out, nil
		}
	}
	d, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	return Encode(d)
}

// canon is the one-pass re-encoder; ok false means "take the slow path",
// whether raw is invalid or merely outside what the pass handles.
type canon struct {
	raw []byte
	i   int
}

func (c *canon) space() {
	for c.i < len(c.raw) {
		switch c.raw[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value appends the value at c.i to dst.
func (c *canon) value(dst []byte, depth int) ([]byte, bool) {
	c.space()
	if c.i >= len(c.raw) {
		return dst, false
	}
	switch b := c.raw[c.i]; {
	case b == '{':
		if depth >= MaxDepth {
			return dst, false
		}
		return c.object(dst, depth+1)
	case b == '[':
		if depth >= MaxDepth {
			return dst, false
		}
		return c.array(dst, depth+1)
	case b == '"':
		s, ok := c.str()
		return append(dst, s...), ok
	case b == '-' || (b >= '0' && b <= '9'):
		n, ok := c.number()
		return append(dst, n...), ok
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(c.raw[c.i:], []byte(lit)) {
				c.i += len(lit)
				return append(dst, lit...), true
			}
		}
		return dst, false
	}
}

// str returns the string at c.i with its quotes, when it holds printable
// ASCII only and no escape: encoding/json writes such a string as it is.
func (c *canon) str() ([]byte, bool) {
	start := c.i
	for j := c.i + 1; j < len(c.raw); j++ {
		switch b := c.raw[j]; {
		case b == '"':
			c.i = j + 1
			return c.raw[start:c.i], true
		case b == '\\' || b < 0x20 || b >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// number returns the number at c.i when it follows JSON's grammar:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canon) number() ([]byte, bool) {
	r, start := c.raw, c.i
	j := c.i
	digits := func() bool {
		k := j
		for j < len(r) && r[j] >= '0' && r[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(r) && r[j] == '-' {
		j++
	}
	switch {
	case j < len(r) && r[j] == '0':
		j++
	case !digits():
		return nil, false
	}
	if j < len(r) && r[j] == '.' {
		j++
		if !digits() {
			return nil, false
		}
	}
	if j < len(r) && (r[j] == 'e' || r[j] == 'E') {
		j++
		if j < len(r) && (r[j] == '+' || r[j] == '-') {
			j++
		}
		if !digits() {
			return nil, false
		}
	}
	c.i = j
	return r[start:j], true
}

func (c *canon) array(dst []byte, depth int) ([]byte, bool) {
	c.i++ // [
	dst = append(dst, '[')
	c.space()
	if c.i < len(c.raw) && c.raw[c.i] == ']' {
		c.i++
		return append(dst, ']'), true
	}
	for {
		var ok bool
		if dst, ok = c.value(dst, depth); !ok {
			return dst, false
		}
		c.space()
		if c.i >= len(c.raw) {
			return dst, false
		}
		switch c.raw[c.i] {
		case ',':
			c.i++
			dst = append(dst, ',')
		case ']':
			c.i++
			return append(dst, ']'), true
		default:
			return dst, false
		}
	}
}

// member is one key and its re-encoded value, as offsets into a scratch
// buffer, until the object's keys are sorted.
type member struct {
	key        []byte // with its quotes
	start, end int
}

func (c *canon) object(dst []byte, depth int) ([]byte, bool) {
	c.i++ // {
	c.space()
	if c.i < len(c.raw) && c.raw[c.i] == '}' {
		c.i++
		return append(dst, '{', '}'), true
	}
	var members []member
	var vals []byte
	for {
		c.space()
		if c.i >= len(c.raw) || c.raw[c.i] != '"' {
			return dst, false
		}
		key, ok := c.str()
		if !ok {
			return dst, false
		}
		c.space()
		if c.i >= len(c.raw) || c.raw[c.i] != ':' {
			return dst, false
		}
		c.i++
		start := len(vals)
		if vals, ok = c.value(vals, depth); !ok {
			return dst, false
		}
		members = append(members, member{key: key, start: start, end: len(vals)})
		c.space()
		if c.i >= len(c.raw) {
			return dst, false
		}
		if c.raw[c.i] == '}' {
			c.i++
			break
		}
		if c.raw[c.i] != ',' {
			return dst, false
		}
		c.i++
	}
	// Keys hold no escapes, so their bytes between the quotes are the
	// decoded keys, which encoding/json sorts bytewise.
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key[1:len(a.key)-1], b.key[1:len(b.key)-1]) })
	dst = append(dst, '{')
	for k, m := range members {
		if k > 0 {
			if bytes.Equal(m.key, members[k-1].key) {
				return dst, false // a repeated key: Decode keeps the last
			}
			dst = append(dst, ',')
		}
		dst = append(dst, m.key...)
		dst = append(dst, ':')
		dst = append(dst, vals[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

package starlarkrt

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// maxNesting is how deep a value may nest for the builtins that print or
// encode it to walk it (str, repr, %, format, fail, json.encode,
// json.decode). starlark-go walks values recursively, and quadratically in
// the depth for lists and dicts.
const maxNesting = 1000

// Text sizes are upper bounds of what starlark-go will produce, computed
// before it produces it. The walk stops as soon as the bound passes limit,
// so it costs at most O(limit) whatever the value (a list holding the same
// list twice, nested 40 deep, prints as 2^40 elements).

// textMode says how a value is written.
type textMode int

const (
	modeStr  textMode = iota // str(x): a string as itself
	modeRepr                 // repr(x), and anything inside a container
	modeJSON                 // json.encode
)

type sizer struct {
	limit int
	n     int
	depth int
	path  map[starlark.Value]bool // lists and dicts being walked (cycles)
	deep  bool
}

// textSize returns an upper bound of the length of v written in mode,
// stopping early once it exceeds limit; tooDeep reports a value nested
// more than maxNesting levels.
func textSize(v starlark.Value, mode textMode, limit int) (n int, tooDeep bool) {
	s := &sizer{limit: limit}
	s.value(v, mode)
	return s.n, s.deep
}

func (s *sizer) done() bool { return s.n > s.limit || s.deep }

func (s *sizer) add(n int) { s.n += n }

func (s *sizer) value(v starlark.Value, mode textMode) {
	if s.done() {
		return
	}
	switch v := v.(type) {
	case starlark.NoneType, starlark.Bool:
		s.add(5)
	case starlark.Int:
		s.add(intDigits(v) + 1)
	case starlark.Float:
		s.add(26)
	case starlark.String:
		if mode == modeStr {
			s.add(len(v))
		} else {
			s.add(quotedSize(string(v), mode))
		}
	case starlark.Bytes:
		s.add(3 + 4*len(v))
	case *starlark.List:
		s.container(v, mode, func() {
			for i := 0; i < v.Len() && !s.done(); i++ {
				s.add(2)
				s.value(v.Index(i), elemMode(mode))
			}
		})
	case starlark.Tuple:
		s.container(nil, mode, func() {
			s.add(1)
			for _, e := range v {
				if s.done() {
					return
				}
				s.add(2)
				s.value(e, elemMode(mode))
			}
		})
	case *starlark.Dict:
		s.container(v, mode, func() {
			for _, item := range v.Items() {
				if s.done() {
					return
				}
				s.add(4)
				s.value(item[0], elemMode(mode))
				s.value(item[1], elemMode(mode))
			}
		})
	case *starlarkstruct.Struct:
		s.container(nil, mode, func() {
			s.add(len(v.Constructor().String()))
			for _, name := range v.AttrNames() {
				if s.done() {
					return
				}
				f, _ := v.Attr(name)
				s.add(len(name) + 5)
				s.value(f, elemMode(mode))
			}
		})
	case *longRange:
		if mode == modeJSON {
			s.add(2 * v.length()) // json.encode writes its elements
		} else {
			s.add(len(v.String()))
		}
	default:
		// Functions, modules, times, durations, ranges: short fixed texts.
		s.add(len(v.String()))
	}
}

func elemMode(mode textMode) textMode {
	if mode == modeStr {
		return modeRepr
	}
	return mode
}

// container accounts for brackets, nesting and cycles around walk.
func (s *sizer) container(v starlark.Value, mode textMode, walk func()) {
	s.add(2)
	if v != nil {
		if s.path[v] {
			s.add(3) // printed as [...] or {...}
			return
		}
		if s.path == nil {
			s.path = map[starlark.Value]bool{}
		}
		s.path[v] = true
		defer delete(s.path, v)
	}
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxNesting {
		s.deep = true
		return
	}
	walk()
}

// intDigits bounds the number of decimal digits of x.
func intDigits(x starlark.Int) int {
	if i, ok := x.Int64(); ok {
		return len(strconv.FormatInt(i, 10))
	}
	return intBits(x)*30103/100000 + 2
}

// quotedSize bounds the length of s quoted by repr (syntax.Quote) or by
// json.encode: both keep printable characters and escape the rest in at
// most 10 bytes per character (6 per byte for invalid UTF-8 in JSON).
func quotedSize(s string, mode textMode) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n += 2
			case c < 0x20 || c == 0x7f:
				n += 6
			case mode == modeJSON && (c == '<' || c == '>' || c == '&'):
				n += 6 // json.Marshal escapes them
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case !unicode.IsPrint(r) || r == '\u2028' || r == '\u2029':
			n += 10
		default:
			n += size
		}
		i += size
	}
	return n
}

// interpolateSize bounds the length of format % args.
func interpolateSize(format string, args starlark.Value, limit int) (n int, tooDeep bool) {
	s := &sizer{limit: limit}
	s.add(len(format))
	tuple, isTuple := args.(starlark.Tuple)
	mapping, isMapping := args.(starlark.Mapping)
	index := 0
	for i := 0; i < len(format) && !s.done(); i++ {
		if format[i] != '%' || i+1 >= len(format) {
			continue
		}
		i++
		if format[i] == '%' {
			continue
		}
		var arg starlark.Value
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 || !isMapping {
				break // starlark-go reports the error
			}
			arg, _, _ = mapping.Get(starlark.String(format[i+1 : i+end]))
			i += end + 1
		} else {
			switch {
			case isTuple && index < len(tuple):
				arg = tuple[index]
			case !isTuple:
				arg = args
			}
			index++
		}
		if arg == nil || i >= len(format) {
			continue
		}
		mode := modeStr
		if format[i] == 'r' {
			mode = modeRepr
		}
		s.value(arg, mode)
	}
	return s.n, s.deep
}

// formatSize bounds the length of format.format(*args, **kwargs).
func formatSize(format string, args starlark.Tuple, kwargs []starlark.Tuple, limit int) (n int, tooDeep bool) {
	s := &sizer{limit: limit}
	s.add(len(format))
	index := 0
	for !s.done() {
		i := strings.IndexByte(format, '{')
		if i < 0 || i+1 >= len(format) {
			break
		}
		if format[i+1] == '{' {
			format = format[i+2:]
			continue
		}
		format = format[i+1:]
		end := strings.IndexByte(format, '}')
		if end < 0 {
			break // starlark-go reports the error
		}
		field := format[:end]
		format = format[end+1:]
		name, conv := field, ""
		if j := strings.IndexAny(field, "!:"); j >= 0 {
			name = field[:j]
			if field[j] == '!' {
				conv = field[j+1:]
			}
		}
		var arg starlark.Value
		if name == "" {
			if index < len(args) {
				arg = args[index]
			}
			index++
		} else if num, err := strconv.Atoi(name); err == nil {
			if num >= 0 && num < len(args) {
				arg = args[num]
			}
		} else {
			for _, kv := range kwargs {
				if string(kv[0].(starlark.String)) == name {
					arg = kv[1]
				}
			}
		}
		if arg == nil {
			continue
		}
		mode := modeStr
		if strings.HasPrefix(conv, "r") {
			mode = modeRepr
		}
		s.value(arg, mode)
	}
	return s.n, s.deep
}

// indentSize bounds the length of json.indent(s, prefix, indent): each
// structural character outside strings may start a new line carrying the
// prefix and one indent per level, and each colon gains a space.
func indentSize(s, prefix, indent string, limit int) int {
	n := len(s)
	depth := 0
	inString := false
	for i := 0; i < len(s) && n <= limit; i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			n += 1 + len(prefix) + depth*len(indent)
		case ',':
			n += 1 + len(prefix) + depth*len(indent)
		case '}', ']':
			depth--
			n += 1 + len(prefix) + max(depth, 0)*len(indent)
		case ':':
			n++
		}
	}
	return n
}

// jsonScan reports the nesting depth and the longest number of JSON text
// s (which need not be valid), stopping at the first excess.
func jsonScan(s string) (depth, longestNumber int) {
	d, run := 0, 0
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+' {
			run++
			longestNumber = max(longestNumber, run)
			continue
		}
		run = 0
		switch c {
		case '"':
			inString = true
		case '[', '{':
			d++
			depth = max(depth, d)
		case ']', '}':
			d--
		}
	}
	return depth, longestNumber
}

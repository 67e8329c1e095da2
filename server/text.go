package server

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Text in a request that is not Unicode (HARD-PARTS 7). Go's JSON decoder
// and the GraphQL lexer both turn an invalid UTF-8 byte and an unpaired
// UTF-16 surrogate escape ("\ud800") into U+FFFD without a word, so two
// different keys ("k\ud800", "k\udfff") would name one record. The raw
// request is checked before anything decodes it, and such text is refused
// (BAD_USER_INPUT) with the part of the request that holds it.

// nonUnicode returns where raw, a JSON request object (a POST body), holds
// text that is not Unicode: "variables.NAME" for a variable's value,
// "query" for the document (raw bytes, or a string literal's escape), the
// top-level member's name for the rest; "" when it holds none or is not a
// JSON object (which the caller refuses on its own).
func nonUnicode(raw []byte) string {
	if utf8.Valid(raw) && !surrogateEscape(raw) || !json.Valid(raw) {
		return ""
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return ""
	}
	for _, name := range sortedKeys(top) {
		member := top[name]
		if name == "variables" {
			var vars map[string]json.RawMessage
			if json.Unmarshal(member, &vars) == nil {
				for _, v := range sortedKeys(vars) {
					if !jsonText(vars[v]) {
						return "variables." + v
					}
				}
			}
		}
		if !jsonText(member) {
			return name
		}
		if name == "query" {
			var q string
			if json.Unmarshal(member, &q) == nil && !graphQLText(q) {
				return "query"
			}
		}
	}
	return ""
}

// surrogateEscape reports whether raw has the characters of a \u escape
// of a surrogate (\uD800-\uDFFF, any case), whatever precedes it: the
// cheap test that lets almost every request skip the rest.
func surrogateEscape(raw []byte) bool {
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i+3 < len(raw); {
		if raw[i+1] == 'u' && (raw[i+2]|0x20) == 'd' && strings.IndexByte("89abcdefABCDEF", raw[i+3]) >= 0 {
			return true
		}
		j := bytes.IndexByte(raw[i+1:], '\\')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// jsonText reports whether raw (well-formed JSON) is valid UTF-8 with every
// surrogate escape paired.
func jsonText(raw []byte) bool {
	return utf8.Valid(raw) && jsonvalue.SurrogatesPaired(raw)
}

// graphQLText reports whether the string literals of the GraphQL document
// src carry only Unicode: src is valid UTF-8 and no "..." string has a \u
// escape of a lone surrogate. Block strings ("""...""") and comments take
// a backslash literally, so they are skipped. A document that does not
// lex is left to the parser.
func graphQLText(src string) bool {
	if !utf8.ValidString(src) {
		return false
	}
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '#':
			for i < len(src) && src[i] != '\n' && src[i] != '\r' {
				i++
			}
		case '"':
			if i+2 < len(src) && src[i+1] == '"' && src[i+2] == '"' {
				i += 3
				for i+2 < len(src) && !(src[i] == '"' && src[i+1] == '"' && src[i+2] == '"') {
					if src[i] == '\\' && i+3 < len(src) && src[i+1] == '"' {
						i += 3 // \""" inside a block string
						continue
					}
					i++
				}
				i += 2
				continue
			}
			i++
			for i < len(src) && src[i] != '"' && src[i] != '\n' {
				if src[i] != '\\' || i+1 >= len(src) {
					i++
					continue
				}
				if src[i+1] != 'u' {
					i += 2
					continue
				}
				r, ok := hex4(src, i+2)
				switch {
				case !ok:
					i += 2
				case r >= 0xDC00 && r <= 0xDFFF:
					return false
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if i+7 < len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
						lo, ok = hex4(src, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return false
					}
					i += 12
				default:
					i += 6
				}
			}
		}
	}
	return true
}

// hex4 reads four hex digits of s at i.
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

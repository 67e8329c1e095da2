package inputschema

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/text"
)

const (
	// MaxSchemaBytes is the largest inputSchema, in bytes of raw JSON, that
	// Compile accepts.
	MaxSchemaBytes = 64 << 10

	// maxMessageBytes caps the violation list of an error so that it can be
	// stored as an intake record reason (S5).
	maxMessageBytes = 1024
)

// The document is registered under baseURL. No loader serves the mem scheme,
// so a relative $ref that leaves the document resolves to a mem URL and is
// refused like any other.
const (
	baseDir = "mem://inputschema/"
	baseURL = baseDir + "schema.json"
)

var printer = message.NewPrinter(language.English)

// Schema is a compiled session inputSchema (SPEC A3, S5). It is immutable and
// safe for concurrent use.
type Schema struct {
	raw      []byte
	compiled *jsonschema.Schema
	walk     *walker
	required []string
	closed   bool
}

// Compile compiles a session inputSchema given as raw JSON bytes (SPEC A3).
//
// The schema uses draft 2020-12 unless its $schema names another draft that
// the library knows (draft-04 to 2020-12, served from its embedded copies).
// Formats are asserted: a property with format "uuid" rejects "not-a-uuid".
// A $ref may point anywhere inside the document ($defs, anchors, JSON
// pointers); it can never load anything else: files, http(s) URLs, other
// metaschemas and any other URL all fail. The top level must describe an
// object: a schema whose top level (directly, or through $ref or allOf)
// declares a type other than "object" is rejected, as is a number whose
// exponent is beyond ±10000. A schema that no input can satisfy, as far as
// a cheap look shows (a required property that is not allowed, or whose
// types or bounds contradict each other, an empty enum, a "not" of
// everything), is rejected too (issue 10). raw may be at most
// MaxSchemaBytes long.
//
// Errors: every failure is a *fault.Error with Code fault.InvalidSchema, an
// empty Field and a Message that names the problem; metaschema violations are
// listed as "<json pointer into the schema>: <what is wrong>".
func Compile(raw []byte) (*Schema, error) {
	return compileWith(raw, refuseLoader{}, true)
}

// CompileStored is Compile for a schema already stored with its action: it
// does not refuse an unsatisfiable schema, so that definitions stored
// before that check (issue 10) still load, and refuse their inputs one by
// one as they always did. Errors are those of Compile.
func CompileStored(raw []byte) (*Schema, error) {
	return compileWith(raw, refuseLoader{}, false)
}

// compileWith is Compile with the loader asked for anything outside the
// document, and whether to refuse an unsatisfiable schema: tests watch the
// loader and look past the refusal.
func compileWith(raw []byte, loader jsonschema.URLLoader, satisfiable bool) (s *Schema, err error) {
	if len(raw) > MaxSchemaBytes {
		return nil, invalid(nil, "inputSchema is too large: %d bytes, the limit is %d", len(raw), MaxSchemaBytes)
	}
	// The library runs on client-supplied schemas; a bug in it must surface as
	// a rejected schema, not a crashed request or turn.
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, invalid(fmt.Errorf("panic: %v", r), "inputSchema could not be compiled")
		}
	}()

	// Two decodes: the library keeps its own copy, the walker its own, so
	// neither can disturb the other.
	forLib, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid(err, "inputSchema is not valid JSON: %v", err)
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if _, ok := doc.(map[string]any); !ok {
		return nil, invalid(nil, "inputSchema must be a JSON object")
	}
	if loc, num, huge := hugeNumber(doc, nil); huge {
		return nil, invalid(nil, "inputSchema is not a valid JSON Schema: %s: number %s is out of range (exponent beyond ±%d)",
			pointer(loc), text.Cut(num, 64), maxExponent)
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(loader)
	if err := c.AddResource(baseURL, forLib); err != nil {
		return nil, invalid(err, "inputSchema could not be registered: %v", err)
	}
	compiled, err := c.Compile(baseURL)
	if err != nil {
		return nil, compileError(err)
	}

	w := newWalker(doc)
	if !w.describesObject() {
		return nil, invalid(nil, "a session input is an object: inputSchema.type must be %q", "object")
	}
	if why := w.unsatisfiable(); satisfiable && why != "" {
		return nil, invalid(nil, "no input can satisfy inputSchema: %s", why)
	}
	return &Schema{
		raw:      bytes.Clone(raw),
		compiled: compiled,
		walk:     w,
		required: w.required(),
		closed:   w.closed(),
	}, nil
}

// Raw returns the schema's JSON exactly as given to Compile. The slice is a
// copy; changing it does not change the Schema.
func (s *Schema) Raw() []byte { return bytes.Clone(s.raw) }

// Validate checks a session input against the schema (SPEC S5). v is a decoded
// JSON value: objects as map[string]any, arrays as []any, numbers as
// json.Number (float64 and Go integers are accepted too, but only json.Number
// keeps large integers exact).
//
// It returns nil when v is valid. Otherwise it returns a *fault.Error with
// Code fault.BadInput and an empty Field whose Message lists every violation as
// "<json pointer>: <what is wrong>", separated by "; ", sorted by pointer, for
// example
//
//	/: additional properties 'extra' not allowed; /: missing property 'account_id'
//
// The root is written "/". The Message is at most 1 KiB: when the list is
// longer it ends with "; and N more". It is meant to be stored as the reason
// of an intake record; callers add their own context. Numbers in messages are
// exact, not rounded through float64.
//
// A number whose written exponent is beyond ±10000 (for example 1e99999) is
// rejected as out of range whatever the schema says: the library cannot
// compare it, and Postgres could not store it.
func (s *Schema) Validate(v any) (err error) {
	if loc, num, huge := hugeNumber(v, nil); huge {
		return fault.New(fault.BadInput, "", "%s: number %s is out of range (exponent beyond ±%d)",
			pointer(loc), text.Cut(num, 64), maxExponent)
	}
	// As in Compile: a library panic on an odd value must not take the
	// caller down.
	defer func() {
		if r := recover(); r != nil {
			err = &fault.Error{Code: fault.BadInput, Message: "input could not be validated", Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	err = s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &fault.Error{Code: fault.BadInput, Message: "input could not be validated", Err: err}
	}
	return &fault.Error{Code: fault.BadInput, Message: violations(verr), Err: err}
}

// Required returns the property names the top level requires, sorted and
// without duplicates: the "required" lists of the top-level schema and of
// everything it pulls in through allOf and local $ref (SPEC A3: a start
// mapping must cover each of them). It returns nil when nothing is required.
// Requirements inside anyOf, oneOf or if/then/else are not included, since no
// single one of them always applies.
func (s *Schema) Required() []string { return slices.Clone(s.required) }

// Closed reports whether the top level disallows additional properties: the
// top-level schema, or one it pulls in through allOf or local $ref, has
// additionalProperties: false or unevaluatedProperties: false (SPEC A3).
func (s *Schema) Closed() bool { return s.closed }

// HasPath reports whether a property path into the input, such as
// ["account_id"] or ["address", "city"], may exist in a valid instance (SPEC
// A3: paths into session.input must exist when the schema forbids additional
// properties). An empty path is the input itself and is always true.
//
// It is false only when the schemas that apply along the path rule the next
// property out: an object that is closed (additionalProperties: false, or
// unevaluatedProperties: false at that level) and neither declares the
// property nor has a patternProperties entry matching it; or a property whose
// schema is false. The walk follows properties, patternProperties and
// additionalProperties schemas, local $ref ($defs, anchors, JSON pointers) and
// allOf; an anyOf or oneOf rules a property out only when every branch does,
// and if/then/else only when both then and else do. Everything the walk cannot
// see into allows the path: arrays (items are not followed), non-object
// types, $dynamicRef and $ref to URLs outside the document.
func (s *Schema) HasPath(path []string) bool {
	return s.walk.hasPath(path)
}

// refuseLoader keeps $ref inside the document: the library asks a loader for
// every URL that is neither registered nor an embedded metaschema.
type refuseLoader struct{}

var errNoLoading = errors.New("inputSchema may only refer to locations inside itself")

func (refuseLoader) Load(string) (any, error) { return nil, errNoLoading }

func invalid(cause error, format string, args ...any) *fault.Error {
	return &fault.Error{Code: fault.InvalidSchema, Message: fmt.Sprintf(format, args...), Err: cause}
}

// compileError turns a library error into a message without the internal URL.
func compileError(err error) *fault.Error {
	var load *jsonschema.LoadURLError
	var meta *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	switch {
	case errors.As(err, &load):
		return invalid(err, "inputSchema may only refer to locations inside itself: %s cannot be loaded",
			strconv.Quote(strings.TrimPrefix(load.URL, baseDir)))
	case errors.As(err, &meta) && errors.As(meta.Err, &verr):
		return invalid(err, "inputSchema is not a valid JSON Schema: %s", violations(verr))
	default:
		msg := strings.ReplaceAll(err.Error(), baseURL, "inputSchema")
		return invalid(err, "inputSchema is not a valid JSON Schema: %s", text.Cut(msg, maxMessageBytes))
	}
}

// violations lists the leaves of a validation error tree as
// "<pointer>: <message>", sorted, deduplicated and capped at maxMessageBytes.
func violations(verr *jsonschema.ValidationError) string {
	var lines []string
	var collect func(e *jsonschema.ValidationError)
	collect = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			what, ok := numericMessage(e.ErrorKind)
			switch {
			case ok:
			case isFalseSchema(e.ErrorKind):
				what = "not allowed" // the library says "false schema"
			default:
				what = e.ErrorKind.LocalizedString(printer)
			}
			lines = append(lines, pointer(e.InstanceLocation)+": "+what)
			return
		}
		for _, c := range e.Causes {
			collect(c)
		}
	}
	collect(verr)
	slices.Sort(lines)
	return joinCapped(slices.Compact(lines), maxMessageBytes)
}

// pointer writes an instance location as a JSON pointer, the root as "/".
// Control characters in keys are escaped so that the list stays on one line.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
		if strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			q := strconv.Quote(t)
			t = q[1 : len(q)-1]
		}
		b.WriteString(t)
	}
	return b.String()
}

// joinCapped joins lines with "; " in at most limit bytes. Lines that do not
// fit are counted in a "; and N more" suffix; a first line that alone is too
// long is cut.
func joinCapped(lines []string, limit int) string {
	const room = len("; and 1000000 more")
	var b strings.Builder
	for i, l := range lines {
		if i == 0 {
			b.WriteString(text.Cut(l, limit-room))
			continue
		}
		if b.Len()+len("; ")+len(l) > limit-room {
			fmt.Fprintf(&b, "; and %d more", len(lines)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(l)
	}
	return b.String()
}

func isFalseSchema(k jsonschema.ErrorKind) bool {
	_, ok := k.(*kind.FalseSchema)
	return ok
}

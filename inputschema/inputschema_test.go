package inputschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// createMonitor is the inputSchema of examples/create_monitor.graphql.
const createMonitor = `{
	"type": "object",
	"properties": {"account_id": {"type": "string", "format": "uuid"}},
	"required": ["account_id"],
	"additionalProperties": false
}`

func compile(t *testing.T, raw string) *Schema {
	t.Helper()
	s, err := Compile([]byte(raw))
	require.NoError(t, err)
	return s
}

// decode reads JSON the way inputs arrive: numbers as json.Number.
func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// A3: an inputSchema that is not a usable JSON Schema is rejected at create
// time with INVALID_SCHEMA.
func TestCompile_A3_Rejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		raw  string
		want string // substring of the message
	}{
		{"type is a number", `{"type": 12}`, "/type: "},
		{"malformed JSON", `{"type": "object"`, "not valid JSON"},
		{"trailing data", `{"type": "object"} {}`, "not valid JSON"},
		{"top-level string type", `{"type": "string"}`, `inputSchema.type must be "object"`},
		{"top-level nullable object", `{"type": ["object", "null"]}`, `inputSchema.type must be "object"`},
		{"top-level type through $ref", `{"$ref": "#/$defs/S", "$defs": {"S": {"type": "array"}}}`, `inputSchema.type must be "object"`},
		{"boolean schema", `true`, "must be a JSON object"},
		{"array", `[]`, "must be a JSON object"},
		{"$ref to a file", `{"properties": {"a": {"$ref": "file:///etc/passwd"}}}`, `"file:///etc/passwd" cannot be loaded`},
		{"$ref to http", `{"$ref": "http://example.com/s.json"}`, `"http://example.com/s.json" cannot be loaded`},
		{"$ref to https", `{"$ref": "https://example.com/s.json#/$defs/a"}`, `"https://example.com/s.json" cannot be loaded`},
		{"relative $ref", `{"$ref": "other.json"}`, `"other.json" cannot be loaded`},
		{"relative $ref under $id", `{"$id": "https://example.com/a.json", "$ref": "b.json"}`, `"https://example.com/b.json" cannot be loaded`},
		{"unknown $schema", `{"$schema": "https://example.com/meta", "type": "object"}`, `"https://example.com/meta" cannot be loaded`},
		{"missing $defs entry", `{"$ref": "#/$defs/nope"}`, "not a valid JSON Schema"},
		{"bad regex", `{"properties": {"a": {"pattern": "(("}}}`, "/properties/a/pattern: "},
		{"number out of range", `{"properties": {"n": {"maximum": 1e99999}}}`, "/properties/n/maximum: number 1e99999 is out of range"},
		{"too large", `{"description": "` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tt.raw))
			require.Nil(t, s)
			fe := fault.As(err)
			require.NotNil(t, fe, "error %v is not a *fault.Error", err)
			require.Equal(t, fault.InvalidSchema, fe.Code)
			require.Empty(t, fe.Field)
			require.Contains(t, fe.Message, tt.want)
			require.NotContains(t, fe.Message, baseDir, "the internal URL leaks")
		})
	}
}

// A3: a $ref to a readable file holding a valid schema is refused all the
// same: nothing outside the document is ever loaded.
func TestCompile_A3_RefusesReadableFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"type": "string"}`), 0o600))

	for _, ref := range []string{"file://" + path, path} {
		_, err := Compile([]byte(`{"properties": {"a": {"$ref": ` + strconv.Quote(ref) + `}}}`))
		require.Error(t, err, ref)
		require.Equal(t, fault.InvalidSchema, fault.CodeOf(err))
		require.Contains(t, err.Error(), "cannot be loaded")
	}
}

// A3: schemas that must compile, including drafts named by $schema and a
// $ref to an embedded metaschema (no I/O).
func TestCompile_A3_Accepts(t *testing.T) {
	t.Parallel()

	for _, raw := range []string{
		createMonitor,
		`{}`,
		`{"properties": {"a": {}}}`,
		`{"type": ["object"]}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`,
		`{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}`,
		`{"$defs": {"x": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}`,
		`{"properties": {"a": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}`,
	} {
		_, err := Compile([]byte(raw))
		require.NoError(t, err, raw)
	}
}

// S5: a start input that does not match the schema fails with a reason that
// names each violation by JSON pointer.
func TestValidate_S5_CreateMonitor(t *testing.T) {
	t.Parallel()
	s := compile(t, createMonitor)

	tests := []struct {
		name  string
		input string
		want  string // full message; empty when valid
	}{
		{"uuid", `{"account_id": "8d3c5a2e-2f4b-4c1a-9a7e-0b1c2d3e4f50"}`, ""},
		{"not a uuid", `{"account_id": "nope"}`, "/account_id: 'nope' is not valid uuid: must have 5 elements"},
		{"missing", `{}`, "/: missing property 'account_id'"},
		{"extra property", `{"account_id": "8d3c5a2e-2f4b-4c1a-9a7e-0b1c2d3e4f50", "other": 1}`, "/: additional properties 'other' not allowed"},
		{"number", `{"account_id": 42}`, "/account_id: got number, want string"},
		{"several, sorted", `{"account_id": 42, "other": true}`, "/: additional properties 'other' not allowed; /account_id: got number, want string"},
		{"not an object", `[1]`, "/: got array, want object"},
		{"number out of range", `{"account_id": 1e99999}`, "/account_id: number 1e99999 is out of range (exponent beyond ±10000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(decode(t, tt.input))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			fe := fault.As(err)
			require.NotNil(t, fe, "error %v is not a *fault.Error", err)
			require.Equal(t, fault.BadInput, fe.Code)
			require.Empty(t, fe.Field)
			require.Equal(t, tt.want, fe.Message)
		})
	}
}

// S5: numbers are compared exactly, not through float64.
func TestValidate_S5_ExactNumbers(t *testing.T) {
	t.Parallel()
	s := compile(t, `{"properties": {
		"big": {"type": "integer", "maximum": 1234567890123456789},
		"frac": {"exclusiveMaximum": 0.3}
	}}`)

	tests := []struct {
		input string
		want  string
	}{
		{`{"big": 1234567890123456789}`, ""},
		{`{"big": 1234567890123456790}`, "/big: 1234567890123456790 is greater than the maximum 1234567890123456789"},
		{`{"frac": 0.29999999999999999}`, ""},
		{`{"frac": 0.30000000000000001}`, "/frac: 0.30000000000000001 is not less than the exclusiveMaximum 0.3"},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(decode(t, tt.input))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

// A3: $schema is honoured: draft-04's boolean exclusiveMaximum only compiles
// and applies under draft-04.
func TestValidate_A3_HonoursSchemaDraft(t *testing.T) {
	t.Parallel()
	s := compile(t, `{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"properties": {"n": {"maximum": 5, "exclusiveMaximum": true}}
	}`)
	require.NoError(t, s.Validate(decode(t, `{"n": 4}`)))
	require.Error(t, s.Validate(decode(t, `{"n": 5}`)))

	_, err := Compile([]byte(`{"properties": {"n": {"maximum": 5, "exclusiveMaximum": true}}}`))
	require.Error(t, err, "draft 2020-12 requires a number")
}

// S5: the reason fits an intake record however many violations there are.
func TestValidate_S5_MessageCapped(t *testing.T) {
	t.Parallel()

	var props, required, input []string
	for i := range 300 {
		name := fmt.Sprintf("%q", fmt.Sprintf("a_rather_long_property_name_%03d", i))
		props = append(props, name+`: {"type": "string"}`)
		required = append(required, name)
		input = append(input, name+`: 1`)
	}
	s := compile(t, `{"properties": {`+strings.Join(props, ",")+`}, "required": [`+strings.Join(required, ",")+`]}`)

	tests := []struct {
		name, input, suffix string
	}{
		{"many violations", `{` + strings.Join(input, ",") + `}`, " more"},
		{"one long violation", `{}`, "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(decode(t, tt.input))
			require.Error(t, err)
			msg := err.Error()
			require.LessOrEqual(t, len(msg), 1024)
			require.Greater(t, len(msg), 900, "the cap leaves most of the room to violations")
			require.True(t, strings.HasSuffix(msg, tt.suffix), msg)
		})
	}
}

// A3: paths into session.input must exist when the schema forbids additional
// properties.
func TestHasPath_A3(t *testing.T) {
	t.Parallel()

	const nestedClosed = `{
		"properties": {
			"address": {"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": false},
			"meta": {"type": "object"}
		},
		"additionalProperties": false
	}`
	const openWithClosedChild = `{
		"properties": {
			"address": {"type": "object", "properties": {"city": {}}, "additionalProperties": false}
		}
	}`
	const viaRef = `{
		"$defs": {"Address": {"type": "object", "properties": {"city": {}}, "additionalProperties": false}},
		"properties": {"address": {"$ref": "#/$defs/Address"}},
		"additionalProperties": false
	}`
	const viaAnchor = `{
		"$defs": {"a": {"$anchor": "addr", "properties": {"city": {}}, "additionalProperties": false}},
		"properties": {"address": {"$ref": "#addr"}}
	}`
	const recursive = `{
		"$defs": {"Node": {
			"type": "object",
			"properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}},
			"additionalProperties": false
		}},
		"$ref": "#/$defs/Node"
	}`
	// additionalProperties sees only its own level: "a" from the other allOf
	// member is still an additional property there.
	const allOfClosed = `{"allOf": [
		{"properties": {"a": {}}},
		{"properties": {"b": {}}, "additionalProperties": false}
	]}`
	const unevaluated = `{
		"allOf": [{"properties": {"a": {}}}],
		"properties": {"b": {}},
		"unevaluatedProperties": false
	}`
	const patterns = `{
		"patternProperties": {"^x_": {"type": "object", "additionalProperties": false}},
		"additionalProperties": false
	}`
	const additionalSchema = `{
		"additionalProperties": {"type": "object", "additionalProperties": false}
	}`
	const anyOf = `{"anyOf": [
		{"properties": {"a": {}}, "additionalProperties": false},
		{"properties": {"b": {}}, "additionalProperties": false}
	]}`
	const ifThenElse = `{
		"if": {"required": ["kind"]},
		"then": {"properties": {"kind": {}, "a": {}}, "additionalProperties": false},
		"else": {"properties": {"b": {}}, "additionalProperties": false}
	}`
	const falseProperty = `{"properties": {"gone": false, "here": {}}}`
	const arrays = `{
		"properties": {"tags": {"type": "array", "items": {"additionalProperties": false}}},
		"additionalProperties": false
	}`
	// draft-07: $ref replaces its siblings, so additionalProperties is ignored.
	const draft7 = `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": {"A": {"properties": {"a": {}}}},
		"$ref": "#/definitions/A",
		"additionalProperties": false
	}`
	const escaped = `{
		"$defs": {"a/b~c": {"properties": {"city": {}}, "additionalProperties": false}},
		"properties": {"address": {"$ref": "#/$defs/a~1b~0c"}, "p%": {"$ref": "#/$defs/a~1b~0c"}}
	}`

	tests := []struct {
		name   string
		schema string
		path   []string
		want   bool
	}{
		{"closed: declared", createMonitor, []string{"account_id"}, true},
		{"closed: other", createMonitor, []string{"other"}, false},
		{"closed: empty path", createMonitor, nil, true},
		{"closed: below a string", createMonitor, []string{"account_id", "x"}, true},
		{"open: anything", `{"type": "object"}`, []string{"other"}, true},
		{"open: deep", `{"properties": {"a": {}}}`, []string{"x", "y", "z"}, true},
		{"nested closed: declared", nestedClosed, []string{"address", "city"}, true},
		{"nested closed: undeclared", nestedClosed, []string{"address", "zip"}, false},
		{"nested closed: top undeclared", nestedClosed, []string{"other"}, false},
		{"nested closed: open child", nestedClosed, []string{"meta", "anything"}, true},
		{"open top, closed child: undeclared", openWithClosedChild, []string{"address", "zip"}, false},
		{"open top, closed child: other top", openWithClosedChild, []string{"other", "zip"}, true},
		{"$ref: declared", viaRef, []string{"address", "city"}, true},
		{"$ref: undeclared", viaRef, []string{"address", "zip"}, false},
		{"$ref: top undeclared", viaRef, []string{"Address"}, false},
		{"anchor: declared", viaAnchor, []string{"address", "city"}, true},
		{"anchor: undeclared", viaAnchor, []string{"address", "zip"}, false},
		{"escaped pointer", escaped, []string{"address", "zip"}, false},
		{"percent in key", escaped, []string{"p%", "zip"}, false},
		{"recursive: deep declared", recursive, []string{"child", "child", "child", "name"}, true},
		{"recursive: deep undeclared", recursive, []string{"child", "child", "other"}, false},
		{"allOf: closed member's own property", allOfClosed, []string{"b"}, true},
		{"allOf: other member's property", allOfClosed, []string{"a"}, false},
		{"unevaluated: own", unevaluated, []string{"b"}, true},
		{"unevaluated: through allOf", unevaluated, []string{"a"}, true},
		{"unevaluated: undeclared", unevaluated, []string{"c"}, false},
		{"pattern: matching", patterns, []string{"x_1"}, true},
		{"pattern: not matching", patterns, []string{"y"}, false},
		{"pattern: closed below", patterns, []string{"x_1", "k"}, false},
		{"additionalProperties schema: any name", additionalSchema, []string{"any"}, true},
		{"additionalProperties schema: closed below", additionalSchema, []string{"any", "k"}, false},
		{"anyOf: first branch", anyOf, []string{"a"}, true},
		{"anyOf: second branch", anyOf, []string{"b"}, true},
		{"anyOf: neither", anyOf, []string{"c"}, false},
		{"if: then", ifThenElse, []string{"a"}, true},
		{"if: else", ifThenElse, []string{"b"}, true},
		{"if: neither", ifThenElse, []string{"c"}, false},
		{"false property", falseProperty, []string{"gone"}, false},
		{"false property: below", falseProperty, []string{"gone", "x"}, false},
		{"false property: sibling", falseProperty, []string{"here", "x"}, true},
		{"through arrays", arrays, []string{"tags", "0", "anything"}, true},
		{"draft-07: $ref siblings ignored", draft7, []string{"b"}, true},
		{"unresolved $ref", `{"$ref": "schema.json#/$defs/A", "$defs": {"A": {"additionalProperties": false}}}`, []string{"a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.schema)
			require.Equal(t, tt.want, s.HasPath(tt.path))
		})
	}
}

// The walker's reading of additionalProperties under allOf and of draft-07
// $ref agrees with the validator's.
func TestHasPath_A3_AgreesWithValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		schema, input string
	}{
		{`{"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}, "additionalProperties": false}]}`, `{"a": 1}`},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"A": {}}, "$ref": "#/definitions/A", "additionalProperties": false}`, `{"b": 1}`},
		{`{"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": false}`, `{"a": 1}`},
	}
	for _, tt := range tests {
		s := compile(t, tt.schema)
		obj := decode(t, tt.input).(map[string]any)
		for k := range obj {
			require.Equal(t, s.Validate(obj) == nil, s.HasPath([]string{k}), "%s with %s", tt.schema, tt.input)
		}
	}
}

// A3: a start mapping must cover every required property.
func TestRequiredAndClosed_A3(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		schema   string
		required []string
		closed   bool
	}{
		{"create monitor", createMonitor, []string{"account_id"}, true},
		{"open, nothing required", `{"type": "object"}`, nil, false},
		{"through $ref and allOf", `{
			"$ref": "#/$defs/Base",
			"allOf": [{"required": ["d", "a"]}],
			"required": ["b", "a"],
			"$defs": {"Base": {"required": ["c"]}}
		}`, []string{"a", "b", "c", "d"}, false},
		{"anyOf does not require", `{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`, nil, false},
		{"closed through allOf", `{"allOf": [{"additionalProperties": false}]}`, nil, true},
		{"unevaluatedProperties", `{"unevaluatedProperties": false}`, nil, true},
		{"additionalProperties schema is open", `{"additionalProperties": {"type": "string"}}`, nil, false},
		{"nested closed is not top-level", `{"properties": {"a": {"additionalProperties": false}}}`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.schema)
			require.Equal(t, tt.required, s.Required())
			require.Equal(t, tt.closed, s.Closed())
		})
	}
}

func TestSchema_Immutable(t *testing.T) {
	t.Parallel()
	raw := []byte(createMonitor)
	s := compile(t, string(raw))

	raw[0] = 'x'
	require.Equal(t, createMonitor, string(s.Raw()))
	s.Raw()[0] = 'x'
	require.Equal(t, createMonitor, string(s.Raw()))
	s.Required()[0] = "changed"
	require.Equal(t, []string{"account_id"}, s.Required())
}

// Schema is shared by every session of an action version (A2); run with -race.
func TestSchema_Concurrent(t *testing.T) {
	t.Parallel()
	s := compile(t, createMonitor)
	good := decode(t, `{"account_id": "8d3c5a2e-2f4b-4c1a-9a7e-0b1c2d3e4f50"}`)
	bad := decode(t, `{"account_id": "nope"}`)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				assert.NoError(t, s.Validate(good))
				assert.Error(t, s.Validate(bad))
				assert.True(t, s.HasPath([]string{"account_id"}))
				assert.False(t, s.HasPath([]string{"other"}))
			}
		})
	}
	wg.Wait()
}

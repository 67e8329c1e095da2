package inputschema

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Issue 10 ("definitions that can never work"): a schema that no input
// satisfies is rejected with INVALID_SCHEMA saying why; near misses that
// some input satisfies compile.
func TestCompile_Issue10_Unsatisfiable(t *testing.T) {
	t.Parallel()
	refused := []struct {
		name, raw, want string
	}{
		{"not of everything", `{"not": {}}`, `the top level has "not" of a schema every value satisfies`},
		{"not true", `{"allOf": [{"not": true}]}`, `"not" of a schema every value satisfies`},
		{"required but closed", `{"properties": {"a": {}}, "required": ["b"], "additionalProperties": false}`,
			`required property "b" is not allowed`},
		{"required but false", `{"properties": {"a": false}, "required": ["a"]}`, `required property "a" is not allowed`},
		{"required through $ref", `{"$ref": "#/$defs/o", "$defs": {"o": {"required": ["x"], "unevaluatedProperties": false}}}`,
			`required property "x" is not allowed`},
		{"types contradict", `{"properties": {"a": {"type": "string", "allOf": [{"type": "integer"}]}}, "required": ["a"]}`,
			`required property "a" has no type that all its schemas allow`},
		{"minimum above maximum", `{"properties": {"n": {"type": "integer", "minimum": 10, "maximum": 5}}, "required": ["n"]}`,
			`required property "n" can only be a number, and none satisfies both its lower bound 10 and its upper bound 5`},
		{"exclusive bounds meet", `{"properties": {"n": {"type": "number", "exclusiveMinimum": 1, "maximum": 1}}, "required": ["n"]}`,
			`its lower bound 1 (exclusive) and its upper bound 1`},
		{"exact big numbers", `{"properties": {"n": {"type": "integer", "minimum": 9007199254740993, "maximum": 9007199254740992}}, "required": ["n"]}`,
			`lower bound 9007199254740993 and its upper bound 9007199254740992`},
		{"minLength above maxLength", `{"properties": {"s": {"type": "string", "minLength": 3, "maxLength": 2}}, "required": ["s"]}`,
			`can only be a string`},
		{"bounds from allOf", `{"properties": {"s": {"type": "array", "minItems": 3, "allOf": [{"maxItems": 1}]}}, "required": ["s"]}`,
			`can only be an array`},
		{"empty enum", `{"properties": {"e": {"enum": []}}, "required": ["e"]}`, `required property "e" has an empty enum`},
		{"too many required", `{"required": ["a", "b"], "maxProperties": 1}`, `it requires 2 properties but allows at most 1`},
		{"minProperties above maxProperties", `{"minProperties": 2, "maxProperties": 1}`, `the top level can only be an object`},
		{"const of another type", `{"properties": {"k": {"type": "string", "const": 1}}, "required": ["k"]}`,
			`required property "k" may only be a value of const or enum, and none of those has a type it allows (string)`},
		{"enum of other types", `{"properties": {"k": {"type": "integer", "enum": [1.5, "2"]}}, "required": ["k"]}`,
			`none of those has a type it allows (integer)`},
		{"const and enum apart", `{"properties": {"k": {"const": "a", "allOf": [{"enum": ["b", "c"]}]}}, "required": ["k"]}`,
			`has const and enum keywords that no one value satisfies together`},
		{"two consts", `{"properties": {"k": {"const": 1, "allOf": [{"const": 2}]}}, "required": ["k"]}`,
			`no one value satisfies together`},
		{"top-level const not an object", `{"const": 1}`, `the top level may only be a value of const or enum`},
		{"not of its type", `{"type": "object", "not": {"type": "object"}}`, `the top level has "not" of every type it may have (object)`},
		{"not of every type of a property", `{"properties": {"k": {"type": ["string", "null"], "not": {"type": ["null", "string"]}}}, "required": ["k"]}`,
			`required property "k" has "not" of every type it may have`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tt.raw))
			require.Nil(t, s)
			require.Equal(t, fault.InvalidSchema, fault.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), "no input can satisfy inputSchema: ")
			require.Contains(t, err.Error(), tt.want)
		})
	}

	for _, raw := range []string{
		// Bounds that cross only for a type the value need not have.
		`{"properties": {"n": {"type": ["integer", "string"], "minimum": 10, "maximum": 5}}, "required": ["n"]}`,
		`{"properties": {"n": {"minimum": 10, "maximum": 5}}, "required": ["n"]}`,
		// Not required: an input without it is valid.
		`{"properties": {"n": {"type": "integer", "minimum": 10, "maximum": 5}}}`,
		`{"properties": {"a": false}}`,
		// Equal inclusive bounds leave one value.
		`{"properties": {"n": {"type": "integer", "minimum": 5, "maximum": 5}}, "required": ["n"]}`,
		// The required property is allowed by a pattern.
		`{"patternProperties": {"^b": {}}, "required": ["b1"], "additionalProperties": false}`,
		// "not" of something.
		`{"not": {"required": ["x"]}}`,
		// "not" of one type of two; "not" of a type with more to it.
		`{"properties": {"k": {"type": ["string", "null"], "not": {"type": "null"}}}, "required": ["k"]}`,
		`{"type": "object", "not": {"type": "object", "required": ["x"]}}`,
		// const and enum that leave a value of an allowed type.
		`{"properties": {"k": {"type": "integer", "enum": [1.0, "2"]}}, "required": ["k"]}`,
		`{"properties": {"k": {"const": 2, "allOf": [{"enum": [1, 2.0]}]}}, "required": ["k"]}`,
		`{"properties": {"k": {"type": "string", "const": 1}}}`,
		`{"properties": {"k": {"const": {"a": [1, "x"]}, "enum": [{"a": [1, "x"]}]}}, "required": ["k"]}`,
		createMonitor,
	} {
		_, err := Compile([]byte(raw))
		require.NoError(t, err, raw)
	}
}

// Issue 10: PropertyTypes gives the types a property may have, intersected
// over the schemas that certainly apply, or ok false when none says.
func TestPropertyTypes_Issue10(t *testing.T) {
	t.Parallel()
	s := compile(t, `{
		"$defs": {"id": {"type": ["string", "integer"]}},
		"properties": {
			"a": {"type": "string"},
			"n": {"type": "number"},
			"id": {"$ref": "#/$defs/id", "allOf": [{"type": ["integer", "null"]}]},
			"any": {"description": "no type"},
			"o": {"type": "object", "properties": {"x": {"type": "boolean"}}}
		},
		"patternProperties": {"^a$": {"type": ["string", "null"]}}
	}`)
	cases := []struct {
		path  []string
		types []string
		ok    bool
	}{
		{[]string{"a"}, []string{"string"}, true},
		{[]string{"n"}, []string{"integer", "number"}, true},
		{[]string{"id"}, []string{"integer"}, true},
		{[]string{"any"}, nil, false},
		{[]string{"undeclared"}, nil, false},
		{[]string{"o"}, []string{"object"}, true},
		{[]string{"o", "x"}, []string{"boolean"}, true},
		{[]string{"o", "y"}, nil, false},
	}
	for _, c := range cases {
		types, ok := s.PropertyTypes(c.path)
		require.Equal(t, c.ok, ok, "%v", c.path)
		require.Equal(t, c.types, types, "%v", c.path)
	}
}

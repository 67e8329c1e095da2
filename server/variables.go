package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// strictVariables refuses variable values that the GraphQL spec's input
// coercion refuses but gqlparser lets through: a JSON number for a String
// (`{"key": 5}` would write the key "5"), a JSON string for an Int or a
// Float (`{"first": "10"}`). Built-in scalars only: String takes a JSON
// string; ID a string or an integer; Int an integer; Float a number;
// Boolean true or false. Custom scalars (JSON, UUID, ...) check their own
// values. Lists and input objects are walked with the schema.
//
// It runs after gqlparser's coercion (which refuses the rest: wrong
// objects, unknown fields, null for non-null), so an operation whose
// variables do not coerce never runs. Error: GRAPHQL_VALIDATION_FAILED,
// extensions.field naming the value as variables.NAME[.FIELD][INDEX].
type strictVariables struct{ schema *ast.Schema }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*strictVariables)(nil)

func (*strictVariables) ExtensionName() string { return "StrictVariables" }

func (s *strictVariables) Validate(es graphql.ExecutableSchema) error {
	s.schema = es.Schema()
	return nil
}

func (s *strictVariables) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	for _, def := range oc.Operation.VariableDefinitions {
		v, ok := oc.Variables[def.Variable]
		if !ok {
			continue
		}
		if err := s.check(def.Type, v, "variables."+def.Variable); err != nil {
			return err
		}
	}
	return nil
}

// check walks v, a coerced variable value of type typ, at path.
func (s *strictVariables) check(typ *ast.Type, v any, path string) *gqlerror.Error {
	if v == nil || typ == nil {
		return nil // null: gqlparser has checked non-null
	}
	if typ.Elem != nil {
		list, ok := v.([]any)
		if !ok { // a single value where a list is wanted: coerced as a list of one
			return s.check(typ.Elem, v, path)
		}
		for i, x := range list {
			if err := s.check(typ.Elem, x, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	}
	def := s.schema.Types[typ.NamedType]
	if def == nil {
		return nil
	}
	switch def.Kind {
	case ast.InputObject:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, f := range def.Fields {
			if x, ok := obj[f.Name]; ok {
				if err := s.check(f.Type, x, path+"."+f.Name); err != nil {
					return err
				}
			}
		}
		return nil
	case ast.Scalar:
		if why := builtinScalar(def.Name, v); why != "" {
			err := gqlerror.Errorf("variable %s: %s", strings.TrimPrefix(path, "variables."), why)
			err.Extensions = map[string]any{"code": errcode.ValidationFailed, "field": path}
			return err
		}
	}
	return nil
}

// builtinScalar says why v (as decoded from JSON with UseNumber, or a
// default value from the document) is not a value of the built-in scalar
// name, or "" when it is (or name is not built in).
func builtinScalar(name string, v any) string {
	var isString, isNumber, isInt, isBool bool
	switch x := v.(type) {
	case string:
		isString = true
	case json.Number:
		isNumber = true
		_, err := strconv.ParseInt(string(x), 10, 64)
		isInt = err == nil
	case int, int32, int64:
		isNumber, isInt = true, true
	case float32, float64:
		isNumber = true
	case bool:
		isBool = true
	default:
		return ""
	}
	switch name {
	case "String":
		if !isString {
			return fmt.Sprintf("a String takes a JSON string, not %s", jsonKind(isNumber, isBool))
		}
	case "ID":
		if !isString && !isInt {
			return fmt.Sprintf("an ID takes a JSON string or integer, not %s", jsonKind(isNumber, isBool))
		}
	case "Int":
		if !isInt {
			if isNumber {
				return "an Int takes a whole number within 32 bits"
			}
			return fmt.Sprintf("an Int takes a JSON number, not %s", jsonKind(isNumber, isBool))
		}
	case "Float":
		if !isNumber {
			return fmt.Sprintf("a Float takes a JSON number, not %s", jsonKind(isNumber, isBool))
		}
	case "Boolean":
		if !isBool {
			return fmt.Sprintf("a Boolean takes true or false, not %s", jsonKind(isNumber, isBool))
		}
	}
	return ""
}

func jsonKind(isNumber, isBool bool) string {
	switch {
	case isNumber:
		return "a number"
	case isBool:
		return "a boolean"
	}
	return "a string"
}

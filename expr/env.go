package expr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// typeSystem is the CEL type provider and adapter of one role's environment.
// It declares event, session and tool as object types with exactly the
// fields the role may read, and adapts decoded JSON (json.Number,
// map[string]any, []any) to CEL values without losing integer precision.
// It is immutable after construction, so it is safe for concurrent use.
type typeSystem struct {
	*types.Registry
	objects map[string]map[string]*types.FieldType // type name -> field -> type
}

func newTypeSystem(spec roleSpec) (*typeSystem, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	ts := &typeSystem{Registry: reg, objects: map[string]map[string]*types.FieldType{}}
	for _, v := range spec.vars {
		fields := map[string]*types.FieldType{}
		for name, t := range spec.fieldTypes(v) {
			fields[name] = &types.FieldType{
				Type:    t,
				IsSet:   func(any) bool { return true },
				GetFrom: getter(v, name),
			}
		}
		ts.objects[objectType(v)] = fields
	}
	return ts, nil
}

func objectType(v string) string {
	switch v {
	case varEvent:
		return eventType
	case varSession:
		return sessionType
	case varRequest:
		return requestType
	}
	return toolType
}

// getter reads one field from the Go value bound to a variable (see
// activation). Values are returned raw; the interpreter adapts them through
// NativeToValue.
func getter(v, field string) ref.FieldGetter {
	return func(target any) (any, error) {
		switch t := target.(type) {
		case *Event:
			switch field {
			case "id":
				return t.ID, nil
			case "type":
				return t.Type, nil
			case "data":
				return t.Data, nil
			case "commit_time":
				return t.CommitTime.UTC(), nil
			case "position":
				return t.Position, nil
			}
		case *Session:
			switch field {
			case "id":
				return t.ID, nil
			case "input":
				return t.Input, nil
			case "started_at":
				return t.StartedAt.UTC(), nil
			}
		case toolValue:
			if field == "input" {
				return t.input, nil
			}
		case *Request:
			switch field {
			case "arguments":
				return t.Arguments, nil
			case "principal":
				return t.Principal, nil
			case "mcp_session":
				return t.MCPSession, nil
			}
		}
		return nil, fmt.Errorf("%s.%s is not available", v, field)
	}
}

// FindStructType implements types.Provider.
func (ts *typeSystem) FindStructType(name string) (*types.Type, bool) {
	if _, ok := ts.objects[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return ts.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (ts *typeSystem) FindStructFieldNames(name string) ([]string, bool) {
	if fields, ok := ts.objects[name]; ok {
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		return names, true
	}
	return ts.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (ts *typeSystem) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if fields, ok := ts.objects[name]; ok {
		ft, ok := fields[field]
		return ft, ok
	}
	return ts.Registry.FindStructFieldType(name, field)
}

// NewValue implements types.Provider. Our object types cannot be built in an
// expression (Compile rejects object literals before this is reached).
func (ts *typeSystem) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := ts.objects[name]; ok {
		return types.NewErr("%s values cannot be constructed", name)
	}
	return ts.Registry.NewValue(name, fields)
}

// NativeToValue implements types.Adapter. Decoded JSON is adapted lazily:
// maps and lists keep this adapter so that nested json.Number values are
// converted by the rules of numberValue.
func (ts *typeSystem) NativeToValue(v any) ref.Val {
	switch v := v.(type) {
	case json.Number:
		return numberValue(v)
	case map[string]any:
		return types.NewStringInterfaceMap(ts, v)
	case []any:
		return types.NewDynamicList(ts, v)
	}
	return ts.Registry.NativeToValue(v)
}

// numberValue converts a JSON number (HARD-PARTS 6): a number written without
// fraction or exponent is an int when it fits int64, else a uint when it fits
// uint64, else a double; any other number is a double.
func numberValue(n json.Number) ref.Val {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return types.Int(i)
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return types.Uint(u)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return types.NewErr("cannot read JSON number %q: it is malformed or out of range", s)
	}
	return types.Double(f)
}

// envs holds one environment per role, built on first use. cel.Env is safe
// for concurrent use once built.
var envs = sync.OnceValues(func() (map[Role]*cel.Env, error) {
	m := make(map[Role]*cel.Env, len(specs))
	for role, spec := range specs {
		env, err := newEnv(spec)
		if err != nil {
			return nil, fmt.Errorf("expr: %s environment: %w", spec.name, err)
		}
		m[role] = env
	}
	return m, nil
})

func newEnv(spec roleSpec) (*cel.Env, error) {
	ts, err := newTypeSystem(spec)
	if err != nil {
		return nil, err
	}
	dec := &decorator{}
	opts := []cel.EnvOption{
		cel.CustomTypeAdapter(ts),
		cel.CustomTypeProvider(ts),
		ext.Strings(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.Lib(boundLib{dec}),
	}
	for _, v := range spec.vars {
		opts = append(opts, cel.Variable(v, types.NewObjectType(objectType(v))))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	if err := dec.init(env); err != nil {
		return nil, err
	}
	return env, nil
}

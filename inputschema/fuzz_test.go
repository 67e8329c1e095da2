package inputschema

import (
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// watchLoader refuses like refuseLoader and counts what it was asked for.
type watchLoader struct{ asked *atomic.Int64 }

func (l watchLoader) Load(url string) (any, error) {
	l.asked.Add(1)
	return refuseLoader{}.Load(url)
}

// FuzzInputSchema compiles arbitrary schema JSON and validates an arbitrary
// instance against it (issue 10). Properties: no panic anywhere, not even
// one Compile or Validate would recover; errors are INVALID_SCHEMA and
// BAD_USER_INPUT faults; nothing outside the document is ever loaded (a
// request for it reaches only the loader, which refuses, and the schema is
// then rejected); a valid instance agrees with HasPath and PropertyTypes;
// and a schema rejected as unsatisfiable validates no object (session and
// tool inputs are objects).
func FuzzInputSchema(f *testing.F) {
	f.Fuzz(func(t *testing.T, schema, instance []byte) {
		var asked atomic.Int64
		s, err := compileWith(schema, watchLoader{&asked}, true)
		if err != nil {
			requireFault(t, err, fault.InvalidSchema, "inputSchema could not be compiled")
			if why := err.Error(); strings.Contains(why, "no input can satisfy inputSchema") {
				unsat, err := compileWith(schema, refuseLoader{}, false)
				if err != nil {
					t.Fatalf("compiles only with the satisfiability check: %v", err)
				}
				// An input is always an object.
				if v, ok := decodeNumbers(instance); ok && jsonType(v) == "object" && unsat.Validate(v) == nil {
					t.Fatalf("%s\nbut %s is valid", why, instance)
				}
			}
			return
		}
		if asked.Load() > 0 {
			t.Fatalf("compiled although it asked the loader for %d resources", asked.Load())
		}
		v, ok := decodeNumbers(instance)
		if !ok {
			return
		}
		verr := s.Validate(v)
		if verr != nil {
			requireFault(t, verr, fault.BadInput, "input could not be validated")
			if len(verr.Error()) > 2*maxMessageBytes {
				t.Fatalf("message of %d bytes", len(verr.Error()))
			}
		}
		obj, isObj := v.(map[string]any)
		if !isObj {
			return
		}
		_ = s.Required()
		for k, e := range obj {
			has := s.HasPath([]string{k})
			types, declared := s.PropertyTypes([]string{k})
			if verr != nil {
				continue
			}
			if !has {
				t.Fatalf("valid instance has %q, which HasPath rules out", k)
			}
			if declared && !slices.Contains(types, jsonType(e)) {
				t.Fatalf("valid instance has %q of type %s; PropertyTypes says %v", k, jsonType(e), types)
			}
		}
	})
}

// requireFault fails unless err is a *fault.Error of code, and not one that
// hides a recovered panic (whose message is hidden).
func requireFault(t *testing.T, err error, code, hidden string) {
	t.Helper()
	fe := fault.As(err)
	if fe == nil || fe.Code != code {
		t.Fatalf("error %v is not a %s fault", err, code)
	}
	if fe.Message == hidden {
		t.Fatalf("recovered a panic: %v", errors.Unwrap(err))
	}
}

func decodeNumbers(raw []byte) (any, bool) {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

// jsonType is the JSON Schema type of a decoded value.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if isInteger(string(x)) {
			return "integer"
		}
		return "number"
	}
	return "?"
}

// isInteger reports whether a JSON number has no fractional part, as JSON
// Schema counts integers (1.0 and 1e2 are integers).
func isInteger(n string) bool {
	r, ok := new(big.Rat).SetString(n)
	return ok && r.IsInt()
}

package inputschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// jsonTypes are JSON Schema's type names.
var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// PropertyTypes returns the JSON Schema types ("array", "boolean",
// "integer", "null", "number", "object", "string") that the property at path
// (such as ["account_id"] or ["address", "city"]) may have in a valid input,
// sorted, with ok true, when the schemas that always apply to it declare
// "type"; ok is false when none does (any type may do). "number" also admits
// integers, so a declared "number" gives both. Only schemas that certainly
// apply are read: properties and patternProperties along the path, with
// their local $ref and allOf; a type constraint they do not show (under
// anyOf, oneOf, if/then/else, additionalProperties) only widens the answer.
// An empty list means no value has a type the schemas allow. Issue 10: a
// start mapping whose value can never have one of these types is refused.
func (s *Schema) PropertyTypes(path []string) (types []string, ok bool) {
	return s.walk.propertyTypes(s.walk.nodesAt(path))
}

// nodesAt returns the schemas that all apply to the property at path: the
// closures of its properties and patternProperties entries at each level.
func (w *walker) nodesAt(path []string) []node {
	nodes := w.closure(w.top())
	for _, name := range path {
		var next []node
		for _, c := range nodes {
			if c.obj() == nil {
				continue
			}
			subs, _ := w.propertySchemas(c, name)
			for _, s := range subs {
				next = append(next, w.closure(s)...)
			}
		}
		nodes = next
	}
	return nodes
}

// propertyTypes intersects the "type" keywords of nodes.
func (w *walker) propertyTypes(nodes []node) ([]string, bool) {
	allowed := slices.Clone(jsonTypes)
	declared := false
	for _, n := range nodes {
		if b, isBool := n.v.(bool); isBool && !b {
			return []string{}, true
		}
		var names []string
		switch t := n.obj()["type"].(type) {
		case string:
			names = []string{t}
		case []any:
			for _, e := range t {
				if s, ok := e.(string); ok {
					names = append(names, s)
				}
			}
		default:
			continue
		}
		if slices.Contains(names, "number") {
			names = append(names, "integer")
		}
		declared = true
		allowed = slices.DeleteFunc(allowed, func(t string) bool { return !slices.Contains(names, t) })
	}
	if !declared {
		return nil, false
	}
	return allowed, true
}

// unsatisfiable returns why no input can satisfy the schema, or "" when
// nothing cheap to see rules every input out. It looks at the top level
// (with its local $ref and allOf) and at the schemas of the properties it
// requires: a "not" that accepts everything, a required property that is
// not allowed, contradictory types, an empty enum, and minimum/maximum,
// minLength/maxLength, minItems/maxItems, minProperties/maxProperties that
// leave no room for the only type allowed. Issue 10: a schema no input
// satisfies would turn every start into an intake record.
func (w *walker) unsatisfiable() string {
	top := w.closure(w.top())
	if why := contradiction(w, top, "object", []string{"object"}); why != "" {
		return "the top level " + why
	}
	req := w.required()
	if max, ok := bound(top, "maxProperties", false); ok && big.NewRat(int64(len(req)), 1).Cmp(max.v) > 0 {
		return fmt.Sprintf("it requires %d properties but allows at most %s", len(req), exact(max.v))
	}
	for _, name := range req {
		if !w.hasPath([]string{name}) {
			return fmt.Sprintf("required property %q is not allowed (not among properties, and no others are)", name)
		}
		nodes := w.nodesAt([]string{name})
		types, declared := w.propertyTypes(nodes)
		if declared && len(types) == 0 {
			return fmt.Sprintf("required property %q has no type that all its schemas allow", name)
		}
		only := ""
		if declared {
			switch {
			case !slices.ContainsFunc(types, func(t string) bool { return t != "integer" && t != "number" }):
				only = "number"
			case len(types) == 1:
				only = types[0]
			}
		}
		if !declared {
			types = nil
		}
		if why := contradiction(w, nodes, only, types); why != "" {
			return fmt.Sprintf("required property %q %s", name, why)
		}
	}
	return ""
}

// contradiction reports keywords of nodes (all applying to one value) that
// no value satisfies: a "not" of everything (or of every type the value may
// have), an empty enum, const and enum values none of which is in all of
// them or has a type the value may have, or, when only is the one type the
// value may have, bounds for that type that cross. types are the types the
// value may have, nil when any.
func contradiction(w *walker, nodes []node, only string, types []string) string {
	for _, n := range nodes {
		m := n.obj()
		if not, ok := m["not"]; ok {
			if b, isBool := not.(bool); (isBool && b) || isEmptyObject(not) {
				return "has \"not\" of a schema every value satisfies"
			}
			if nt := onlyTypes(not); types != nil && nt != nil && !slices.ContainsFunc(types, func(t string) bool { return !slices.Contains(nt, t) }) {
				return fmt.Sprintf("has \"not\" of every type it may have (%s)", strings.Join(types, ", "))
			}
		}
		if e, ok := m["enum"].([]any); ok && len(e) == 0 {
			return "has an empty enum"
		}
	}
	if why := noValue(nodes, types); why != "" {
		return why
	}
	pairs := map[string][2]string{
		"number": {"minimum", "maximum"},
		"string": {"minLength", "maxLength"},
		"array":  {"minItems", "maxItems"},
		"object": {"minProperties", "maxProperties"},
	}
	kw, ok := pairs[only]
	if !ok {
		return ""
	}
	lo, hasLo := bound(nodes, kw[0], true)
	hi, hasHi := bound(nodes, kw[1], false)
	if only == "number" && !w.legacy {
		if x, ok := bound(nodes, "exclusiveMinimum", true); ok && (!hasLo || x.v.Cmp(lo.v) >= 0) {
			lo, hasLo = limit{x.v, true}, true
		}
		if x, ok := bound(nodes, "exclusiveMaximum", false); ok && (!hasHi || x.v.Cmp(hi.v) <= 0) {
			hi, hasHi = limit{x.v, true}, true
		}
	}
	if !hasLo || !hasHi {
		return ""
	}
	c := lo.v.Cmp(hi.v)
	if c > 0 || (c == 0 && (lo.exclusive || hi.exclusive)) {
		return fmt.Sprintf("can only be a%s %s, and none satisfies both its lower bound %s%s and its upper bound %s%s",
			article(only), only, exact(lo.v), exclusive(lo), exact(hi.v), exclusive(hi))
	}
	return ""
}

func exclusive(l limit) string {
	if l.exclusive {
		return " (exclusive)"
	}
	return ""
}

func article(t string) string {
	if strings.ContainsAny(t[:1], "aeiou") {
		return "n"
	}
	return ""
}

func isEmptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// limit is a numeric bound.
type limit struct {
	v         *big.Rat
	exclusive bool
}

// bound returns the tightest value of a numeric keyword over nodes: the
// largest for a lower bound, the smallest for an upper one.
func bound(nodes []node, kw string, lower bool) (limit, bool) {
	var best *big.Rat
	for _, n := range nodes {
		num, ok := n.obj()[kw].(json.Number)
		if !ok {
			continue
		}
		r, ok := new(big.Rat).SetString(string(num))
		if !ok {
			continue
		}
		if best == nil || (lower && r.Cmp(best) > 0) || (!lower && r.Cmp(best) < 0) {
			best = r
		}
	}
	return limit{v: best}, best != nil
}

// noValue reports const and enum keywords of nodes that leave no value: no
// value is in all of them, or none of those has a type in types (nil: any).
func noValue(nodes []node, types []string) string {
	var values []any // nil: not constrained yet
	constrained := false
	for _, n := range nodes {
		m := n.obj()
		var set []any
		if c, ok := m["const"]; ok {
			set = []any{c}
		} else if e, ok := m["enum"].([]any); ok {
			set = e
		} else {
			continue
		}
		if !constrained {
			values, constrained = slices.Clone(set), true
			continue
		}
		values = slices.DeleteFunc(values, func(v any) bool {
			return !slices.ContainsFunc(set, func(x any) bool { return jsonEqual(v, x) })
		})
	}
	switch {
	case !constrained:
		return ""
	case len(values) == 0:
		return "has const and enum keywords that no one value satisfies together"
	case types != nil && !slices.ContainsFunc(values, func(v any) bool { return slices.Contains(types, valueType(v)) }):
		return fmt.Sprintf("may only be a value of const or enum, and none of those has a type it allows (%s)", strings.Join(types, ", "))
	}
	return ""
}

// onlyTypes returns the types a schema that constrains nothing but "type"
// allows (descriptions aside), or nil.
func onlyTypes(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var names []string
	for k, x := range m {
		switch k {
		case "type":
			switch t := x.(type) {
			case string:
				names = append(names, t)
			case []any:
				for _, e := range t {
					if s, ok := e.(string); ok {
						names = append(names, s)
					}
				}
			}
		case "description", "title", "$comment":
		default:
			return nil
		}
	}
	if slices.Contains(names, "number") {
		names = append(names, "integer")
	}
	return names
}

// valueType is the JSON Schema type of a decoded value ("integer" for a
// number with no fraction).
func valueType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// jsonEqual reports whether two decoded values are equal as JSON Schema
// compares them (numbers by value).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

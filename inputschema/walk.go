package inputschema

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// walker answers A3's structural questions (required properties, closed
// objects, possible paths) from the decoded schema document; the library does
// not expose its compiled form. It never modifies the document, so a walker
// is safe for concurrent use.
type walker struct {
	root any
	// legacy is set for draft-04 to draft-07, where $ref replaces the keywords
	// next to it and unevaluatedProperties does not exist.
	legacy bool
}

// node is a schema found in the document.
type node struct {
	v    any
	loc  string // JSON pointer from the document root; identifies the node
	base string // loc of the schema resource the node belongs to (nearest $id)
}

func newWalker(doc any) *walker {
	w := &walker{root: doc}
	if obj, ok := doc.(map[string]any); ok {
		if s, ok := obj["$schema"].(string); ok {
			w.legacy = strings.Contains(s, "json-schema.org/draft-0")
		}
	}
	return w
}

func (n node) obj() map[string]any {
	m, _ := n.v.(map[string]any)
	return m
}

// child follows one token (an object key or an array index) from n.
func (n node) child(tok string) (node, bool) {
	var v any
	switch p := n.v.(type) {
	case map[string]any:
		c, ok := p[tok]
		if !ok {
			return node{}, false
		}
		v = c
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(p) || strconv.Itoa(i) != tok {
			return node{}, false
		}
		v = p[i]
	default:
		return node{}, false
	}
	c := node{v: v, loc: n.loc + "/" + escapeToken(tok), base: n.base}
	if m, ok := v.(map[string]any); ok {
		if _, ok := m["$id"].(string); ok {
			c.base = c.loc
		}
	}
	return c, true
}

// children returns the members of an array keyword such as allOf.
func (n node) children(kw string) []node {
	list, ok := n.child(kw)
	arr, isArr := list.v.([]any)
	if !ok || !isArr {
		return nil
	}
	out := make([]node, 0, len(arr))
	for i := range arr {
		if c, ok := list.child(strconv.Itoa(i)); ok {
			out = append(out, c)
		}
	}
	return out
}

// at returns the node at an escaped JSON pointer from the document root.
func (w *walker) at(ptr string) (node, bool) {
	n := node{v: w.root}
	if ptr == "" {
		return n, true
	}
	if ptr[0] != '/' {
		return node{}, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		c, ok := n.child(unescapeToken(tok))
		if !ok {
			return node{}, false
		}
		n = c
	}
	return n, true
}

// ref resolves n's $ref when it points inside n's own schema resource by
// fragment: a JSON pointer or an anchor. Anything else is reported as not
// resolved, which every caller treats as "no constraint known".
func (w *walker) ref(n node) (node, bool) {
	r, ok := n.obj()["$ref"].(string)
	if !ok {
		return node{}, false
	}
	frag, ok := strings.CutPrefix(r, "#")
	if !ok {
		return node{}, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return node{}, false
	}
	if frag == "" || frag[0] == '/' {
		return w.at(n.base + frag)
	}
	base, ok := w.at(n.base)
	if !ok {
		return node{}, false
	}
	return findAnchor(base, frag, true)
}

// findAnchor searches n's resource for a schema with $anchor (or
// $dynamicAnchor, which is also a plain anchor) equal to name.
func findAnchor(n node, name string, top bool) (node, bool) {
	switch v := n.v.(type) {
	case map[string]any:
		if _, ok := v["$id"].(string); ok && !top {
			return node{}, false // another resource
		}
		if v["$anchor"] == name || v["$dynamicAnchor"] == name {
			return n, true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // deterministic when an anchor is (wrongly) repeated
		for _, k := range keys {
			if c, ok := n.child(k); ok {
				if f, ok := findAnchor(c, name, false); ok {
					return f, true
				}
			}
		}
	case []any:
		for i := range v {
			if c, ok := n.child(strconv.Itoa(i)); ok {
				if f, ok := findAnchor(c, name, false); ok {
					return f, true
				}
			}
		}
	}
	return node{}, false
}

// closure returns the schemas that all apply to the same instance as n: n
// itself and, recursively, its $ref target and allOf members. Each appears
// once, so cycles end. Under the legacy drafts a schema with $ref stands for
// its target only.
func (w *walker) closure(n node) []node {
	var out []node
	seen := map[string]bool{}
	var visit func(n node)
	visit = func(n node) {
		if seen[n.loc] {
			return
		}
		seen[n.loc] = true
		_, hasRef := n.obj()["$ref"]
		if t, ok := w.ref(n); ok {
			visit(t)
		}
		if w.legacy && hasRef {
			return
		}
		out = append(out, n)
		for _, c := range n.children("allOf") {
			visit(c)
		}
	}
	visit(n)
	return out
}

func (w *walker) top() node { return node{v: w.root} }

// describesObject reports whether no schema applying to the top level declares
// a type other than "object".
func (w *walker) describesObject() bool {
	for _, c := range w.closure(w.top()) {
		switch t := c.obj()["type"].(type) {
		case string:
			if t != "object" {
				return false
			}
		case []any:
			for _, e := range t {
				if e != "object" {
					return false
				}
			}
		}
	}
	return true
}

func (w *walker) required() []string {
	var out []string
	for _, c := range w.closure(w.top()) {
		arr, _ := c.obj()["required"].([]any)
		for _, e := range arr {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (w *walker) closed() bool {
	for _, c := range w.closure(w.top()) {
		m := c.obj()
		if m["additionalProperties"] == false || (!w.legacy && m["unevaluatedProperties"] == false) {
			return true
		}
	}
	return false
}

func (w *walker) hasPath(path []string) bool {
	q := &pathQuery{w: w, path: path, memo: map[memoKey]bool{}}
	return q.mayHave(w.top(), 0)
}

// pathQuery answers one HasPath call. The answer for a schema depends only on
// which suffix of the path remains, so results are memoised by (node, index):
// that bounds the work and ends $ref cycles.
type pathQuery struct {
	w    *walker
	path []string
	memo map[memoKey]bool
}

type memoKey struct {
	loc string
	i   int
}

// mayHave reports whether a value valid against n may have path[i:].
func (q *pathQuery) mayHave(n node, i int) bool {
	k := memoKey{n.loc, i}
	if r, ok := q.memo[k]; ok {
		return r
	}
	q.memo[k] = true // a cycle back to this question adds no constraint
	r := q.check(n, i)
	q.memo[k] = r
	return r
}

func (q *pathQuery) check(n node, i int) bool {
	for _, c := range q.w.closure(n) {
		if b, ok := c.v.(bool); ok {
			if !b {
				return false
			}
			continue
		}
		if i < len(q.path) && !q.levelAllows(c, i) {
			return false
		}
	}
	return true
}

// levelAllows reports whether the object schema c, on its own (its $ref and
// allOf are separate members of the closure), lets path[i] exist with the rest
// of the path below it.
func (q *pathQuery) levelAllows(c node, i int) bool {
	if c.obj() == nil {
		return true
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		branches := c.children(kw)
		if len(branches) > 0 && !slices.ContainsFunc(branches, func(b node) bool { return q.mayHave(b, i) }) {
			return false
		}
	}
	if _, ok := c.obj()["if"]; ok {
		then, hasThen := c.child("then")
		els, hasElse := c.child("else")
		if (hasThen && !q.mayHave(then, i)) && (hasElse && !q.mayHave(els, i)) {
			return false
		}
	}

	name := q.path[i]
	subs, declared := q.w.propertySchemas(c, name)
	for _, s := range subs {
		if !q.mayHave(s, i+1) {
			return false
		}
	}
	if !declared {
		if ap, ok := c.child("additionalProperties"); ok && !q.mayHave(ap, i+1) {
			return false
		}
	}
	if !q.w.legacy {
		if up, ok := c.child("unevaluatedProperties"); ok && !q.w.evaluates(c, name) && !q.mayHave(up, i+1) {
			return false
		}
	}
	return true
}

// propertySchemas returns the schemas c's properties and patternProperties
// give the property name, and whether any of them covers it. A pattern that
// does not compile counts as covering the name without adding a schema.
func (w *walker) propertySchemas(c node, name string) (subs []node, declared bool) {
	if props, ok := c.child("properties"); ok {
		if s, ok := props.child(name); ok {
			subs = append(subs, s)
			declared = true
		}
	}
	pats, ok := c.child("patternProperties")
	if !ok {
		return subs, declared
	}
	keys := make([]string, 0, len(pats.obj()))
	for k := range pats.obj() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, p := range keys {
		re, err := regexp.Compile(p)
		if err != nil {
			declared = true
			continue
		}
		if re.MatchString(name) {
			declared = true
			if s, ok := pats.child(p); ok {
				subs = append(subs, s)
			}
		}
	}
	return subs, declared
}

// evaluates reports whether some schema that unevaluatedProperties of c can
// see (c and its in-place applicators: $ref, allOf, anyOf, oneOf, if, then,
// else, dependentSchemas) evaluates the property name. Branches are counted
// whether or not they would match, which can only make the answer "yes".
func (w *walker) evaluates(c node, name string) bool {
	seen := map[string]bool{}
	var visit func(n node) bool
	visit = func(n node) bool {
		if seen[n.loc] || n.obj() == nil {
			return false
		}
		seen[n.loc] = true
		if _, declared := w.propertySchemas(n, name); declared {
			return true
		}
		m := n.obj()
		if _, ok := m["additionalProperties"]; ok {
			return true
		}
		if _, ok := m["unevaluatedProperties"]; ok && n.loc != c.loc {
			return true
		}
		if t, ok := w.ref(n); ok && visit(t) {
			return true
		}
		var next []node
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			next = append(next, n.children(kw)...)
		}
		for _, kw := range []string{"if", "then", "else"} {
			if s, ok := n.child(kw); ok {
				next = append(next, s)
			}
		}
		if deps, ok := n.child("dependentSchemas"); ok {
			for k := range deps.obj() {
				if s, ok := deps.child(k); ok {
					next = append(next, s)
				}
			}
		}
		return slices.ContainsFunc(next, visit)
	}
	return visit(c)
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

func unescapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

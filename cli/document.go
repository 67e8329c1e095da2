package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDocumentBytes bounds an action document (the server takes at most
// 4 MiB per request).
const maxDocumentBytes = 8 << 20

// maxYAMLNodes bounds the values a YAML document expands to, aliases
// included, so that a few aliases cannot blow up into gigabytes.
const maxYAMLNodes = 1_000_000

// actionDocument is what apply reads: the action's id and the rest of the
// document, ActionInput's fields, as a JSON object.
type actionDocument struct {
	ID    string
	Input json.RawMessage
}

// readActionDocument reads one action from r: a JSON object, or a YAML
// mapping (one document). JSON passes through byte for byte (only
// compacted); YAML numbers keep the digits written (0x1F, 1_000 and +1 are
// rewritten as JSON integers; .inf and .nan are refused), so no value of
// the definition goes through a float. Errors are usage errors naming
// what is wrong.
func readActionDocument(r io.Reader, name string) (actionDocument, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return actionDocument{}, usagef("%s: %v", name, err)
	}
	if len(raw) > maxDocumentBytes {
		return actionDocument{}, usagef("%s: larger than %d bytes", name, maxDocumentBytes)
	}
	var fields map[string]json.RawMessage
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' {
		fields, err = jsonObject(trimmed)
	} else {
		fields, err = yamlObject(raw)
	}
	if err != nil {
		return actionDocument{}, usagef("%s: %v", name, err)
	}
	idRaw, ok := fields["id"]
	if !ok {
		return actionDocument{}, usagef("%s: no id (the action's UUID, beside the fields of ActionInput)", name)
	}
	var id string
	if err := json.Unmarshal(idRaw, &id); err != nil || strings.TrimSpace(id) == "" {
		return actionDocument{}, usagef("%s: id must be a string (the action's UUID)", name)
	}
	delete(fields, "id")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return actionDocument{}, usagef("%s: %v", name, err)
	}
	return actionDocument{ID: id, Input: bytes.TrimSpace(b.Bytes())}, nil
}

// jsonObject splits one JSON object into its fields, values untouched.
func jsonObject(raw []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid JSON: more after the object")
	}
	return fields, nil
}

// yamlObject converts a YAML document whose top is a mapping into its
// fields as JSON.
func yamlObject(raw []byte) (map[string]json.RawMessage, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, fmt.Errorf("not valid YAML or JSON: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document: apply one action per file")
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return nil, errors.New("the document must be a mapping (id, name, kind, ...)")
	}
	c := &yamlConverter{}
	fields := make(map[string]json.RawMessage, len(top.Content)/2)
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, err := c.key(top.Content[i])
		if err != nil {
			return nil, err
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("line %d: %q appears twice", top.Content[i].Line, key)
		}
		var b bytes.Buffer
		if err := c.value(&b, top.Content[i+1], 0); err != nil {
			return nil, err
		}
		fields[key] = b.Bytes()
	}
	return fields, nil
}

// yamlConverter writes YAML nodes as JSON.
type yamlConverter struct {
	nodes int
}

const maxYAMLDepth = 200

func (c *yamlConverter) value(b *bytes.Buffer, n *yaml.Node, depth int) error {
	c.nodes++
	if c.nodes > maxYAMLNodes {
		return fmt.Errorf("more than %d values (aliases included)", maxYAMLNodes)
	}
	if depth > maxYAMLDepth {
		return fmt.Errorf("line %d: nested deeper than %d", n.Line, maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: empty document", n.Line)
		}
		return c.value(b, n.Content[0], depth+1)
	case yaml.AliasNode:
		return c.value(b, n.Alias, depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, err := c.key(n.Content[i])
			if err != nil {
				return err
			}
			if seen[key] {
				return fmt.Errorf("line %d: %q appears twice", n.Content[i].Line, key)
			}
			seen[key] = true
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, key)
			b.WriteByte(':')
			if err := c.value(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := c.value(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return c.scalar(b, n)
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return nil
}

// key returns a mapping key as a string; merge keys (<<) are refused
// rather than half supported.
func (c *yamlConverter) key(n *yaml.Node) (string, error) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: a key must be a plain value", n.Line)
	}
	if n.ShortTag() == "!!merge" {
		return "", fmt.Errorf("line %d: merge keys (<<) are not supported; write the fields out", n.Line)
	}
	return n.Value, nil
}

var (
	jsonInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	jsonNumber  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	yamlFloat   = regexp.MustCompile(`^([-+]?)([0-9]*)(?:\.([0-9]*))?([eE][-+]?[0-9]+)?$`)
)

func (c *yamlConverter) scalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		fmt.Fprint(b, v)
	case "!!int":
		if jsonInteger.MatchString(n.Value) {
			b.WriteString(n.Value) // any size, digits as written
			return nil
		}
		var i int64
		if err := n.Decode(&i); err == nil {
			fmt.Fprint(b, i)
			return nil
		}
		var u uint64
		if err := n.Decode(&u); err != nil {
			return fmt.Errorf("line %d: integer %s: write it in decimal", n.Line, n.Value)
		}
		fmt.Fprint(b, u)
	case "!!float":
		s, err := jsonFloat(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		b.WriteString(s)
	default: // !!str, !!timestamp, !!binary and own tags: the text as written
		writeJSONString(b, n.Value)
	}
	return nil
}

// jsonFloat rewrites a YAML float as a JSON number with the same digits:
// a leading + and leading zeros dropped, .5 as 0.5, 5. as 5. Infinities and
// NaN have no JSON form.
func jsonFloat(s string) (string, error) {
	if jsonNumber.MatchString(s) {
		return s, nil
	}
	m := yamlFloat.FindStringSubmatch(strings.ReplaceAll(s, "_", ""))
	if m == nil || (m[2] == "" && m[3] == "") {
		return "", fmt.Errorf("%s is not a number JSON can hold", s)
	}
	sign, whole, frac, exp := m[1], strings.TrimLeft(m[2], "0"), m[3], m[4]
	if sign == "+" {
		sign = ""
	}
	if whole == "" {
		whole = "0"
	}
	out := sign + whole
	if frac != "" {
		out += "." + frac
	}
	out += exp
	if !jsonNumber.MatchString(out) {
		return "", fmt.Errorf("%s is not a number JSON can hold", s)
	}
	return out, nil
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // the encoder's newline
}

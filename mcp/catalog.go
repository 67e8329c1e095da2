package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
)

// entry is one tool action as a caller sees it over MCP.
type entry struct {
	name   string // unique in the caller's list
	v      action.Version
	schema json.RawMessage
	// gated: the tool's owner requires approval for every call; it is not
	// listed, and a call naming it is refused with APPROVAL_REQUIRED.
	gated bool
}

func (e *entry) tool() *gomcp.Tool {
	t := e.v.Definition.Tool
	out := &gomcp.Tool{Name: e.name, InputSchema: e.schema, Title: e.v.Definition.Name,
		Meta: gomcp.Meta{MetaActionID: e.v.ActionID.String(), "actionsledger/version": e.v.Version}}
	if t.Description != nil {
		out.Description = *t.Description
	}
	return out
}

// catalog lists the tools p may call (CALL on the action, issue 11), in
// scope (one action, or uuid.Nil for all), sorted by name; tools whose
// input cannot be a JSON object (an MCP call's arguments always are) are
// left out. Names are the tools' own; when several listed tools share one,
// each of them is listed as <name>__<first 8 hex digits of its action id>.
func (s *Server) catalog(ctx context.Context, p auth.Principal, scope uuid.UUID) ([]entry, error) {
	vs, err := s.opts.Actions.Current(ctx, true, nil)
	if err != nil {
		return nil, err
	}
	var out []entry
	count := map[string]int{}
	for _, v := range vs {
		t := v.Definition.Tool
		if t == nil || (scope != uuid.Nil && v.ActionID != scope) || !p.Allows(auth.Call, auth.ActionResource(v.ActionID)) {
			continue
		}
		schema, ok := objectSchema(json.RawMessage(t.InputSchema))
		if !ok {
			continue
		}
		out = append(out, entry{name: t.Name, v: v, schema: schema, gated: t.Approval == action.ApprovalRequired})
		count[t.Name]++
	}
	for i := range out {
		if count[out[i].name] > 1 {
			out[i].name += "__" + out[i].v.ActionID.String()[:8]
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// objectSchema is a tool's inputSchema as MCP needs it, an object schema:
// none is {"type":"object"}, a schema without a type gets "type":"object"
// (the tool's own schema still validates the call), and a schema whose
// type is not "object" cannot be served (ok false).
func objectSchema(raw json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(`{"type":"object"}`), true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	typ, ok := m["type"]
	if !ok {
		m["type"] = json.RawMessage(`"object"`)
		out, err := json.Marshal(m)
		return out, err == nil
	}
	var name string
	if json.Unmarshal(typ, &name) != nil || name != "object" {
		return nil, false
	}
	return raw, true
}

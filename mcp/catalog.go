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

// entry is one action as a caller sees it over MCP: a tool action, or an
// action served over MCP (its mcp block, I4).
type entry struct {
	name   string // unique in the caller's list
	v      action.Version
	schema json.RawMessage
	// gated: the tool's owner requires approval for every call; it is not
	// listed, and a call naming it is refused with APPROVAL_REQUIRED.
	gated bool
	// served: the action's mcp block; a call is a request to one of its
	// sessions (ask.go).
	served bool
}

func (e *entry) tool() *gomcp.Tool {
	out := &gomcp.Tool{Name: e.name, InputSchema: e.schema, Title: e.v.Definition.Name,
		Meta: gomcp.Meta{MetaActionID: e.v.ActionID.String(), "actionsledger/version": e.v.Version}}
	switch {
	case e.served:
		out.Meta[MetaKind] = KindRequest
		if d := e.v.Definition.MCP.Description; d != nil {
			out.Description = *d
		}
	case e.v.Definition.Tool.Description != nil:
		out.Description = *e.v.Definition.Tool.Description
	}
	return out
}

// Kinds of listed tools (_meta actionsledger/kind).
const (
	// KindRequest: a call is a request to a session of the action, which a
	// turn answers (I4).
	KindRequest = "request"
)

// catalog lists what p may call (CALL on the action, issue 11), in scope
// (one action, or uuid.Nil for all), sorted by name: tool actions, under
// their tool's name, and actions served over MCP, under their mcp block's
// name. Tools whose input cannot be a JSON object (an MCP call's arguments
// always are) are left out. When several listed entries share a name,
// each of them is listed as <name>__<first 8 hex digits of its action id>.
func (s *Server) catalog(ctx context.Context, p auth.Principal, scope uuid.UUID) ([]entry, error) {
	vs, err := s.opts.Actions.Current(ctx, true, true)
	if err != nil {
		return nil, err
	}
	var out []entry
	count := map[string]int{}
	for _, v := range vs {
		if (scope != uuid.Nil && v.ActionID != scope) || !p.Allows(auth.Call, auth.ActionResource(v.ActionID)) {
			continue
		}
		var e entry
		switch def := v.Definition; {
		case def.Tool != nil:
			schema, ok := objectSchema(json.RawMessage(def.Tool.InputSchema))
			if !ok {
				continue
			}
			e = entry{name: def.Tool.Name, v: v, schema: schema, gated: def.Tool.Approval == action.ApprovalRequired}
		case def.MCP != nil && def.Session != nil:
			name, schema := def.MCP.Name, json.RawMessage(def.MCP.InputSchema)
			if name == "" {
				name = action.DefaultMCPName
			}
			if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
				schema = json.RawMessage(action.DefaultMCPSchema)
			}
			e = entry{name: name, v: v, schema: schema, served: true}
		default:
			continue
		}
		out = append(out, e)
		count[e.name]++
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

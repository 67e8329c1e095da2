package action

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Permissions is what a definition declares it reaches beyond its own
// sessions (issue 11; docs/security.md). Each list is optional; nothing is
// granted by default beyond what the definition implies (the namespaces of
// the event types its triggers pin, the tools an agent's config refers to).
type Permissions struct {
	// Read are ledger namespaces whose events its triggers may match and
	// whose records its code reads (ledger.get); "*" for every namespace.
	Read []string `json:"read,omitempty"`
	// Write are ledger namespaces whose records its code writes (ledger.put).
	Write []string `json:"write,omitempty"`
	// Tools are tool actions its code calls (call_tool).
	Tools []uuid.UUID `json:"tools,omitempty"`
	// Sessions are actions whose sessions its code reads (session()).
	Sessions []uuid.UUID `json:"sessions,omitempty"`
}

// MaxPermissions bounds each list of Permissions.
const MaxPermissions = 64

// ToolRefsFunc lists the tool actions a handler kind's config refers to
// (an agent's config.tools), which its version may then call without
// declaring them; nil when the kind refers to none. The i-th id is the i-th
// reference's (uuid.Nil where it names none), so errors can point at it.
type ToolRefsFunc func(kind string, config jsonvalue.Value) []uuid.UUID

// Approval settings of a tool block (issue 11): a tool's owner may require
// that every call an agent makes waits for a person's approval (P1); no
// reference can lower it.
const (
	ApprovalRequired = "REQUIRED"
	ApprovalNone     = "NONE"
)

// permissions checks the declared permissions.
func (c *compiler) permissions(p *Permissions) {
	if p == nil {
		return
	}
	namespaces := func(list []string, field string, write bool) {
		if len(list) > MaxPermissions {
			c.fail(field, fault.BadInput, "at most %d entries", MaxPermissions)
		}
		for i, ns := range list {
			if ns == auth.AllNamespaces {
				continue
			}
			f := fmt.Sprintf("%s[%d]", field, i)
			err := ledger.ValidateNamespace(ns, f)
			if fe := fault.As(err); fe != nil && (write || fe.Code != fault.ReservedEventType) {
				c.add(err, "")
			}
		}
	}
	namespaces(p.Read, "permissions.read", false)
	namespaces(p.Write, "permissions.write", true)
	if len(p.Tools) > MaxPermissions {
		c.fail("permissions.tools", fault.BadInput, "at most %d entries", MaxPermissions)
	}
	if len(p.Sessions) > MaxPermissions {
		c.fail("permissions.sessions", fault.BadInput, "at most %d entries", MaxPermissions)
	}
}

// grants are the version's declared and implied grants (see Permissions),
// each with the policy storing it needs and the field it comes from.
func grants(def Definition, triggers []*CompiledTrigger, refs ToolRefsFunc) (auth.Grants, []auth.Need) {
	var g auth.Grants
	var needs []auth.Need
	read := func(ns, field, what string) {
		g.Read = append(g.Read, ns)
		needs = append(needs, auth.Need{Action: auth.Read, Resource: auth.LedgerResource(ns), Field: field, What: what})
	}
	tool := func(id uuid.UUID, field string) {
		g.Tools = append(g.Tools, id)
		needs = append(needs, auth.Need{Action: auth.Call, Resource: auth.ActionResource(id), Field: field, What: "call tool action " + id.String()})
	}
	if p := def.Permissions; p != nil {
		for i, ns := range p.Read {
			read(ns, fmt.Sprintf("permissions.read[%d]", i), "read ledger namespace "+ns)
		}
		for i, ns := range p.Write {
			g.Write = append(g.Write, ns)
			needs = append(needs, auth.Need{Action: auth.Write, Resource: auth.LedgerResource(ns),
				Field: fmt.Sprintf("permissions.write[%d]", i), What: "write ledger namespace " + ns})
		}
		for i, id := range p.Tools {
			tool(id, fmt.Sprintf("permissions.tools[%d]", i))
		}
		for i, id := range p.Sessions {
			g.Sessions = append(g.Sessions, id)
			needs = append(needs, auth.Need{Action: auth.Read, Resource: auth.ActionResource(id),
				Field: fmt.Sprintf("permissions.sessions[%d]", i), What: "read the sessions of action " + id.String()})
		}
	}
	for _, t := range triggers {
		if t.Schedule != nil {
			continue // A4: a schedule trigger sees its own firings, needing no grant
		}
		for _, typ := range t.EventTypes {
			ns := auth.EventNamespace(typ)
			read(ns, fmt.Sprintf("triggers[%d].event", t.Index), fmt.Sprintf("read the events of ledger namespace %s (%s)", ns, typ))
		}
	}
	if refs != nil {
		for i, id := range refs(def.Kind, def.Config) {
			if id != uuid.Nil {
				tool(id, fmt.Sprintf("config.tools[%d].action", i))
			}
		}
	}
	return g.Normalize(), needs
}

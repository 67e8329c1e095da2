package expr

import (
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"
)

// Role says where an expression sits in an action definition. It fixes which
// variables and fields the expression may read and which type it must
// produce (SPEC A3).
type Role int

// The expression roles of an action definition.
const (
	// StartPredicate is a trigger's event predicate on a start trigger.
	// Reads event; bool.
	StartPredicate Role = iota + 1
	// ResumePredicate is a resume trigger's event predicate. Reads event,
	// session.id and session.input; bool; must constrain events (A3).
	ResumePredicate
	// StartMapping is one property of a start trigger's session.start.input.
	// Reads event; any JSON value.
	StartMapping
	// ResumeID is a resume trigger's session.resume.id. Reads event; string.
	ResumeID
	// SessionID is the action's session.id. Reads session.input; string.
	SessionID
	// Ends is the action's session.ends. Reads session.input and
	// session.started_at; timestamp.
	Ends
	// ToolMapping is one property of a tool's session.start.input. Reads
	// tool.input; any JSON value.
	ToolMapping
	// RequestMapping is one property of an MCP serve block's
	// session.start.input (issue 17, I4). Reads request; any JSON value.
	RequestMapping
	// RequestID is an MCP serve block's session.resume.id. Reads request;
	// string.
	RequestID
	// EventPredicate is a trigger's event predicate in an action without a
	// session block (issue 15). Reads event; bool. Reading session is an
	// A3 violation: there is no session.
	EventPredicate
	// ConcurrencyKey is an action's concurrency.key (issue 15): the group
	// whose executions share the concurrency limit. Reads event; string.
	ConcurrencyKey
)

// String returns the role's readable name, e.g. "start predicate".
func (r Role) String() string {
	if s, ok := specs[r]; ok {
		return s.name
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Names of the variables expressions can read, and of the object types that
// declare their fields to the type checker.
const (
	varEvent   = "event"
	varSession = "session"
	varTool    = "tool"
	varRequest = "request"

	eventType   = "actionsledger.Event"
	sessionType = "actionsledger.Session"
	toolType    = "actionsledger.Tool"
	requestType = "actionsledger.Request"
)

// eventFields are the fields of event in every role that declares it, in the
// order they are listed in messages.
var eventFields = []string{"id", "type", "data", "commit_time", "position"}

// output is what a role's expression must produce.
type output int

const (
	anyJSON output = iota
	boolOut
	stringOut
	timestampOut
)

// roleSpec describes one role: its name as used in messages, the variables it
// declares, the session fields it may read, and its output.
type roleSpec struct {
	name    string // "start predicate"
	subject string // "a start predicate", used to start messages
	vars    []string
	session []string // readable session fields when vars has session
	out     output
	// why explains, per undeclared variable, why the role cannot read it.
	why map[string]string
}

var specs = map[Role]roleSpec{
	StartPredicate: {
		name: "start predicate", subject: "a start predicate",
		vars: []string{varEvent}, out: boolOut,
		why: map[string]string{varSession: "the session may not exist yet"},
	},
	ResumePredicate: {
		name: "resume predicate", subject: "a resume predicate",
		vars: []string{varEvent, varSession}, session: []string{"id", "input"}, out: boolOut,
	},
	StartMapping: {
		name: "start mapping", subject: "a start mapping",
		vars: []string{varEvent}, out: anyJSON,
		why: map[string]string{varSession: "the session may not exist yet"},
	},
	ResumeID: {
		name: "resume id", subject: "a resume id",
		vars: []string{varEvent}, out: stringOut,
		why: map[string]string{varSession: "it names the session to resume, from event fields"},
	},
	SessionID: {
		name: "session id", subject: "the session id expression",
		vars: []string{varSession}, session: []string{"input"}, out: stringOut,
		why: map[string]string{varEvent: "it is computed from session.input alone"},
	},
	Ends: {
		name: "session end", subject: "session.ends",
		vars: []string{varSession}, session: []string{"input", "started_at"}, out: timestampOut,
		why: map[string]string{varEvent: "it is computed from session.input and session.started_at"},
	},
	EventPredicate: {
		name: "event predicate", subject: "a trigger of an action without a session block",
		vars: []string{varEvent}, out: boolOut,
		why: map[string]string{varSession: "the action has no session block, so there is no session"},
	},
	ConcurrencyKey: {
		name: "concurrency key", subject: "concurrency.key",
		vars: []string{varEvent}, out: stringOut,
		why: map[string]string{varSession: "the action has no session block, so there is no session"},
	},
	ToolMapping: {
		name: "tool mapping", subject: "a tool session mapping",
		vars: []string{varTool}, out: anyJSON,
		why: map[string]string{
			varSession: "the session may not exist yet",
			varEvent:   "it maps tool.input",
		},
	},
	RequestMapping: {
		name: "request mapping", subject: "an MCP request mapping",
		vars: []string{varRequest}, out: anyJSON,
		why: map[string]string{
			varSession: "the session may not exist yet",
			varEvent:   "it maps an MCP request (request.arguments, request.principal, request.mcp_session)",
		},
	},
	RequestID: {
		name: "request id", subject: "an MCP request's resume id",
		vars: []string{varRequest}, out: stringOut,
		why: map[string]string{
			varSession: "it names the session to resume, from request fields",
			varEvent:   "it names the session from an MCP request (request.arguments, request.principal, request.mcp_session)",
		},
	},
}

// requestFields are the fields of request, in the order messages list them.
var requestFields = []string{"arguments", "principal", "mcp_session"}

func (s roleSpec) declares(v string) bool { return slices.Contains(s.vars, v) }

// data names what the role's expressions read, for messages: "event",
// "event or session input", "session input" or "tool input".
func (s roleSpec) data() string {
	var names []string
	for _, v := range s.vars {
		switch v {
		case varEvent:
			names = append(names, "event")
		case varSession:
			names = append(names, "session input")
		case varTool:
			names = append(names, "tool input")
		case varRequest:
			names = append(names, "MCP request")
		}
	}
	return strings.Join(names, " or ")
}

// cannotRead is the message for a variable the role does not declare.
func (s roleSpec) cannotRead(v string) string {
	why := s.why[v]
	if why == "" && v == varTool {
		why = "tool is readable only in a tool session mapping"
	}
	if why == "" && v == varRequest {
		why = "request is readable only in an MCP serve block's session mapping"
	}
	if why == "" {
		return fmt.Sprintf("%s cannot read %s", s.subject, v)
	}
	return fmt.Sprintf("%s cannot read %s: %s", s.subject, v, why)
}

// fieldTypes returns the declared fields of one variable's object type.
func (s roleSpec) fieldTypes(v string) map[string]*types.Type {
	switch v {
	case varEvent:
		return map[string]*types.Type{
			"id":          types.StringType,
			"type":        types.StringType,
			"data":        types.DynType,
			"commit_time": types.TimestampType,
			"position":    types.IntType,
		}
	case varSession:
		all := map[string]*types.Type{
			"id":         types.StringType,
			"input":      types.DynType,
			"started_at": types.TimestampType,
		}
		m := make(map[string]*types.Type, len(s.session))
		for _, f := range s.session {
			m[f] = all[f]
		}
		return m
	case varTool:
		return map[string]*types.Type{"input": types.DynType}
	case varRequest:
		return map[string]*types.Type{"arguments": types.DynType, "principal": types.StringType, "mcp_session": types.StringType}
	}
	return nil
}

// fieldNames lists the readable fields of v for messages, e.g. "id, type".
func (s roleSpec) fieldNames(v string) []string {
	switch v {
	case varEvent:
		return eventFields
	case varSession:
		return s.session
	case varTool:
		return []string{"input"}
	case varRequest:
		return requestFields
	}
	return nil
}

// badField is the message for v.field when the role cannot read that field.
func (s roleSpec) badField(v, field string) string {
	if v == varSession {
		if field == "state" {
			return "session.state is not readable in expressions"
		}
		readable := make([]string, len(s.session))
		for i, f := range s.session {
			readable[i] = "session." + f
		}
		return fmt.Sprintf("session.%s is not readable in %s (readable: %s)",
			field, s.subject, strings.Join(readable, ", "))
	}
	return fmt.Sprintf("%s has no field %q (fields: %s)", v, field, strings.Join(s.fieldNames(v), ", "))
}

// Package action holds action definitions: their shape (SPEC A1), the
// validation rules of A3, their compiled form (CEL programs and the input
// schema, compiled once per version and cached), and their storage as
// numbered versions (A2).
package action

import (
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Definition is an action as the client defines it. It is stored verbatim
// as JSON per version and read back through GraphQL.
type Definition struct {
	Name   string          `json:"name"`
	Kind   string          `json:"kind"`
	Config jsonvalue.Value `json:"config,omitempty"`
	// Source is the action's code, for kinds that run code (starlark).
	Source   *string     `json:"source,omitempty"`
	Triggers []Trigger   `json:"triggers"`
	Session  *SessionDef `json:"session,omitempty"`
	Tool     *ToolDef    `json:"tool,omitempty"`
	// Permissions declares what the action reaches beyond its own
	// sessions (issue 11); nil declares nothing.
	Permissions *Permissions `json:"permissions,omitempty"`
	// MCP serves the action to MCP clients as one tool whose calls are
	// REQUEST inputs of its sessions (issue 17, I4); nil: not served.
	MCP *MCPDef `json:"mcp,omitempty"`
	// Concurrency limits how many executions of an action without a
	// session block run at once (issue 15); nil: no limit beyond the
	// executors' workers.
	Concurrency *ConcurrencyDef `json:"concurrency,omitempty"`
}

// ConcurrencyDef limits the running executions of an action without a
// session block (issue 15): at most Limit at a time per value of Key, a CEL
// expression over event giving a string (the whole action is one group
// without it). Within a group, executions start in the commit order of
// their events.
type ConcurrencyDef struct {
	Limit int     `json:"limit"`
	Key   *string `json:"key,omitempty"`
}

// MCPDef serves a session action (an agent, typically) over MCP (issue
// 17, I4): clients see one tool, Name, whose every call is delivered to a
// session of the action as a REQUEST input and answered with the output
// of the turn that takes it (docs/mcp.md).
type MCPDef struct {
	// Name is the tool's name as clients call it (1-64 letters, digits, _
	// or -); default DefaultMCPName.
	Name        string  `json:"name,omitempty"`
	Description *string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the call's arguments, an object
	// schema; default DefaultMCPSchema.
	InputSchema jsonvalue.Value `json:"inputSchema,omitempty"`
	// Session says which session a request reaches, with the rules of a
	// trigger's role: exactly one of Start (a mapping over request building
	// the session input) and Resume (an id over request).
	Session *TriggerRole `json:"session"`
}

// Defaults of an MCP serve block.
const (
	DefaultMCPName = "ask"
	// DefaultMCPSchema asks for a message: {message: string}, required.
	DefaultMCPSchema = `{"type":"object","properties":{"message":{"type":"string","description":"What to ask."}},"required":["message"]}`
)

// ToolDef makes the action callable as a tool (X1-X6): by operators through
// GraphQL, and by handlers and other tools.
type ToolDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	InputSchema jsonvalue.Value `json:"inputSchema,omitempty"`
	// Session, when set, records every call in a tool session whose input
	// the start mapping builds from tool.input (X1).
	Session *ToolSessionDef `json:"session,omitempty"`
	// Approval is ApprovalRequired when every call an agent makes must wait
	// for a person's approval (P1), whatever the agent's reference says;
	// empty or ApprovalNone leaves it to the reference (issue 11).
	Approval string `json:"approval,omitempty"`
}

// ToolSessionDef is a tool's session: its start mapping over tool.input.
type ToolSessionDef struct {
	Start *StartRole `json:"start"`
}

// Trigger matches ledger events with a CEL predicate (Event) or fires on a
// clock of its own (Schedule, A4): exactly one of the two. In an action with
// a session block it starts or resumes sessions; without one each event it
// matches (each firing, for a schedule) runs one execution.
type Trigger struct {
	Name  string `json:"name"`
	Event string `json:"event,omitempty"`
	// Schedule makes the trigger fire on its own clock (A4): each firing
	// appends a schedule.fired event that this trigger alone matches.
	Schedule *TriggerSchedule `json:"schedule,omitempty"`
	Session  *TriggerRole     `json:"session,omitempty"`
}

// TriggerSchedule is a schedule trigger's clock (A4): exactly one of Cron
// (with Timezone, UTC when nil) and Every, read by the rules of a session
// clock entry (C1, C2). An every trigger fires on a grid from the time the
// trigger got this schedule (created, or changed by an update).
type TriggerSchedule struct {
	Cron     *string `json:"cron,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	Every    *string `json:"every,omitempty"`
}

// TriggerRole is a trigger's session role: exactly one of Start and Resume.
type TriggerRole struct {
	Start  *StartRole  `json:"start,omitempty"`
	Resume *ResumeRole `json:"resume,omitempty"`
}

// StartRole maps a matching event to a session input: Input is a JSON
// object whose leaves are CEL expressions over event (nested objects allowed).
type StartRole struct {
	Input jsonvalue.Value `json:"input"`
}

// ResumeRole names the session a matching event resumes: ID is a CEL
// expression over event giving the session id.
type ResumeRole struct {
	ID string `json:"id"`
}

// SessionDef is the session block: how sessions are identified and how they
// advance in turns.
type SessionDef struct {
	InputSchema jsonvalue.Value `json:"inputSchema,omitempty"`
	ID          string          `json:"id"`
	Ends        *string         `json:"ends,omitempty"`
	Schedule    []ScheduleEntry `json:"schedule,omitempty"`
	Turns       *Turns          `json:"turns,omitempty"`
	Park        *Park           `json:"park,omitempty"`
	// Concurrency 1 makes the action a singleton (G7): at most one live
	// session per slot; ConcurrencyKey (CEL over session.input) names the
	// slot, one per action when omitted.
	Concurrency    *int    `json:"concurrency,omitempty"`
	ConcurrencyKey *string `json:"concurrencyKey,omitempty"`
	// ArchiveAfterInactive archives sessions idle this long (G6).
	ArchiveAfterInactive *string `json:"archiveAfterInactive,omitempty"`
	// DisplayTitle is a CEL expression over session.input giving each
	// session's title (G8).
	DisplayTitle *string `json:"displayTitle,omitempty"`
	// MaxPerSessionUsd caps what each session's model calls may cost, in
	// US dollars (G8); copied into a session when it is created.
	MaxPerSessionUsd *float64 `json:"maxPerSessionUsd,omitempty"`
}

// Park lets a turn whose retries ran out on a transient cause (a timeout,
// a provider's 5xx) pause its session instead of failing it (G4): TTL
// bounds the pause (then the session fails), ResumeAfter resumes it by
// itself, ResumeOn names triggers whose deliveries to the session resume
// it. An operator can always resume it (resumeSession).
type Park struct {
	TTL         string   `json:"ttl"`
	ResumeAfter *string  `json:"resumeAfter,omitempty"`
	ResumeOn    []string `json:"resumeOn,omitempty"`
}

// ScheduleEntry is one entry of a session clock: exactly one of Cron (with
// Timezone) and Every.
type ScheduleEntry struct {
	Name     string  `json:"name"`
	Cron     *string `json:"cron,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	Every    *string `json:"every,omitempty"`
}

// Turns limits and gates turns (T2, T3).
type Turns struct {
	On        []string `json:"on,omitempty"`
	MaxInputs *int     `json:"maxInputs,omitempty"`
	MaxBytes  *int     `json:"maxBytes,omitempty"`
	Window    *string  `json:"window,omitempty"`
	// Debounce holds trigger deliveries until Quiet has passed since the
	// newest or Max since the oldest (G3).
	Debounce *Debounce `json:"debounce,omitempty"`
}

// Debounce is turns.debounce (G3): durations in Go syntax.
type Debounce struct {
	Quiet string `json:"quiet"`
	Max   string `json:"max"`
}

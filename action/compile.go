package action

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/inputschema"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/schedule"
)

// Limits on definitions.
const (
	MaxTriggers       = 64
	MaxScheduleItems  = 8 // C1
	MaxNameLen        = 200
	MaxInputsCap      = 1000
	DefaultMaxInputs  = MaxInputsCap
	MaxBytesCap       = 64 << 20
	maxMappingLeaves  = 256
	maxMappingDepth   = 8
	maxTriggerNameLen = 64
	// MaxSourceLen is the largest action source, in bytes.
	MaxSourceLen = 256 << 10
)

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// KindChecker validates a handler kind with its config and source, and
// whether the kind can serve calls when tool is true; it returns
// *fault.Error values with codes UnknownKind or InvalidConfig, several
// at once as an error with Unwrap() []error (see Errors).
type KindChecker func(kind string, config jsonvalue.Value, source *string, tool bool) error

// Compiled is one action version ready to run: every expression compiled
// and type-checked, the input schema compiled. Immutable; shared freely.
type Compiled struct {
	ActionID     uuid.UUID
	Version      int
	Def          Definition
	FromPosition int64 // triggers match events after this position
	// ToPosition, when not 0, is the last position the version covers: the
	// next version's FromPosition, or where the action was disabled or
	// archived. Set only on the copies Store.Active returns to the dispatcher.
	ToPosition int64
	// PinnedToPosition, when not 0, is the last position at which the
	// version's triggers still reach the open sessions pinned to it: where
	// the action was disabled or archived. Set only on Active's copies.
	PinnedToPosition int64
	Triggers         []*CompiledTrigger
	Session          *CompiledSession
	Tool             *CompiledTool
	// MCP is the compiled serve block (issue 17); nil when not served.
	MCP *CompiledMCP
	// Concurrency is the concurrency block of an action without a session
	// block (issue 15); nil: no limit.
	Concurrency *CompiledConcurrency
	// Author is the principal who stored the version ("" when unknown:
	// stored before authors were recorded).
	Author string
	// Grants are what the version declares and implies it reaches (issue
	// 11); what it may do when it runs is these intersected with what its
	// author holds then (auth.Authority).
	Grants auth.Grants

	// pinnedOnly marks an Active copy of a version that covers no event
	// after the dispatch cursor and is kept only for its open sessions.
	pinnedOnly bool
}

// Covers reports whether the version covers the event at position (A2):
// the event committed after FromPosition and, with a ToPosition, not after
// it, so it was the current version of an active action then. Only the
// covering version's start triggers create sessions, and only its triggers
// leave intake records (S5).
func (c *Compiled) Covers(position int64) bool {
	return !c.pinnedOnly && position > c.FromPosition && (c.ToPosition == 0 || position <= c.ToPosition)
}

// CoversPinned reports whether the version's triggers apply to the event at
// position for the open sessions pinned to the version (A2: a session keeps
// the version it started with): after FromPosition and, with a
// PinnedToPosition, not after it. A later version does not end this range;
// disabling or archiving the action does. It holds wherever Covers does.
func (c *Compiled) CoversPinned(position int64) bool {
	return position > c.FromPosition && (c.PinnedToPosition == 0 || position <= c.PinnedToPosition)
}

// Sessionless reports whether the version runs one execution per matching
// event (an action without a session block, with triggers; issue 15).
func (c *Compiled) Sessionless() bool { return c.Session == nil && len(c.Triggers) > 0 }

// CompiledConcurrency is a compiled concurrency block (issue 15).
type CompiledConcurrency struct {
	// Limit is how many executions of one group run at once (1-MaxConcurrencyLimit).
	Limit int
	// Key computes an execution's group from its event (ConcurrencyKey
	// role); nil: the action is one group.
	Key *expr.Program
}

// CompiledTool is a compiled tool block.
type CompiledTool struct {
	Name   string
	Schema *inputschema.Schema // nil: any object
	// Approval: every call an agent makes waits for a person (issue 11, P1).
	Approval bool
	// Session maps tool.input to the tool session's input (ToolMapping role);
	// nil when calls record no history.
	Session *Mapping
}

// CompiledMCP is a compiled MCP serve block (issue 17, I4).
type CompiledMCP struct {
	Name        string
	Description string
	// SchemaJSON is the arguments' schema as clients are shown it, and
	// Schema its compiled form (every request's arguments must match).
	SchemaJSON jsonvalue.Value
	Schema     *inputschema.Schema
	// Exactly one of Start (RequestMapping role: the session input) and
	// ResumeID (RequestID role: the open session to deliver to).
	Start    *Mapping
	ResumeID *expr.Program
}

// CompiledTrigger is a trigger with its programs.
type CompiledTrigger struct {
	Name      string
	Index     int
	Predicate *expr.Program
	// EventTypes are the event types the predicate pins; nil when it pins none
	// and must be evaluated on every event.
	EventTypes []string
	Start      *Mapping      // start trigger
	ResumeID   *expr.Program // resume trigger
	// Guard is the event-only part of a resume predicate that reads session,
	// checked before the session is looked up (nil when not needed).
	Guard *expr.Program
	// Schedule is a schedule trigger's clock (A4), named after the
	// trigger; nil for an event trigger. Its Predicate then matches the
	// schedule.fired events of a trigger of this name; the dispatcher
	// offers it only its own action's firings (FiredBy).
	Schedule *schedule.Entry
}

// CompiledSession is the compiled session block.
type CompiledSession struct {
	Schema *inputschema.Schema // nil: any object
	ID     *expr.Program
	// On names the triggers and clock entries whose inputs start a turn;
	// nil means every input does (T3, C4).
	On        map[string]bool
	MaxInputs int
	MaxBytes  int // 0: no byte limit
	// Ends computes a session's end from its input and startedAt (E1); nil
	// when the session has no end (E7).
	Ends *expr.Program
	// Clock is the session clock, entries in definition order (C1).
	Clock []*schedule.Entry
	// Window delays the first turn after the session was idle (T4); 0: none.
	Window time.Duration
	// Park is how a turn whose retries ran out on a transient cause pauses
	// the session (G4); nil: such a turn fails the session (T7).
	Park *CompiledPark
	// Singleton: session.concurrency is 1 (G7); SlotKey names a session's
	// slot (nil: one per action).
	Singleton bool
	SlotKey   *expr.Program
	// ArchiveAfter archives sessions idle this long (G6); 0: never.
	ArchiveAfter time.Duration
	// Title renders a session's display title (G8); nil: none.
	Title *expr.Program
	// DebounceQuiet and DebounceMax hold trigger deliveries (G3): a turn
	// takes them once DebounceQuiet has passed since the newest pending
	// one or DebounceMax since the oldest; 0: no debounce.
	DebounceQuiet, DebounceMax time.Duration
	// MaxUSD is session.maxPerSessionUsd (G8): each new session's spend
	// cap in US dollars; nil: none.
	MaxUSD *float64
}

// MaxSessionUSD bounds session.maxPerSessionUsd (US dollars).
const MaxSessionUSD = 1_000_000

// MaxTitleLen is the longest display title, in characters (G8).
const MaxTitleLen = 64

// CompiledPark is a checked session.park (G4).
type CompiledPark struct {
	TTL time.Duration
	// ResumeAfter resumes the session by itself; 0: only an operator or
	// a trigger in ResumeOn does.
	ResumeAfter time.Duration
	// ResumeOn names the triggers whose deliveries resume the session.
	ResumeOn []string
}

// MaxParkTTL is the longest a park may last (G4).
const MaxParkTTL = 30 * 24 * time.Hour

// MaxWindow is the longest turn window.
const MaxWindow = 24 * time.Hour

// ClockStartsTurn reports whether a firing of entry starts a turn (C4).
func (s *CompiledSession) ClockStartsTurn(entry *schedule.Entry) bool {
	return s.On == nil || s.On[entry.Name]
}

// Timed reports whether the session needs a durable timer: it has an end,
// a window, or a clock entry whose firings start turns. Sessions of other
// versions cost the timer loop nothing.
func (s *CompiledSession) Timed() bool {
	if s.Ends != nil || s.Window > 0 {
		return true
	}
	for _, e := range s.Clock {
		if s.ClockStartsTurn(e) {
			return true
		}
	}
	return false
}

// StartsTurn reports whether an input of the named triggers starts a turn (T3).
func (s *CompiledSession) StartsTurn(triggers []string) bool {
	if s.On == nil {
		return true
	}
	for _, t := range triggers {
		if s.On[t] {
			return true
		}
	}
	return false
}

// Mapping is a compiled start mapping: a tree of CEL programs (StartMapping role).
type Mapping struct {
	Program *expr.Program       // leaf
	Fields  map[string]*Mapping // object
}

// Eval evaluates the mapping for an event, giving the session input as a
// JSON-ready value (map[string]any at the top).
func (m *Mapping) Eval(ctx context.Context, vars expr.Vars) (any, error) {
	if m.Program != nil {
		return m.Program.Eval(ctx, vars)
	}
	out := make(map[string]any, len(m.Fields))
	for k, f := range m.Fields {
		v, err := f.Eval(ctx, vars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// Compile validates def against every rule of A3 and compiles it. All
// violations are returned (errors.Join of *fault.Error, each naming its field
// relative to the definition, e.g. "triggers[1].session.resume.id"). It
// judges def as a definition being stored, with the checks that it can work
// at all (issue 10; docs/definition-checks.md), except a constant end
// having passed, which needs the store's clock; with kinds nil the handler
// kind is not checked.
func Compile(def Definition, kinds KindChecker) (*Compiled, error) {
	return compile(def, kinds, nil, nil, true, time.Time{})
}

// StoreCheckFunc checks, before a definition's handler kind is validated,
// that whoever stores it holds what its grants need; a refusal stops
// validation there (the kind's errors could name tools the caller may not
// read).
type StoreCheckFunc func([]auth.Need) []error

// compile is Compile with the tool references of kinds (refs) counted in
// the grants and, with check, the grants checked before the kind.
//
// storing is false for a stored definition being loaded: the checks that a
// definition can work at all (issue 10) came after some were stored, and
// are skipped then (kinds too is nil then). now is when a definition is
// stored (zero when unknown): a constant end before it is refused.
func compile(def Definition, kinds KindChecker, refs ToolRefsFunc, check StoreCheckFunc, storing bool, now time.Time) (*Compiled, error) {
	c := &compiler{def: def, storing: storing, now: now}
	out := c.compile()
	var needs []auth.Need
	out.Grants, needs = grants(def, out.Triggers, refs)
	if check != nil {
		if errs := check(needs); len(errs) > 0 {
			return nil, joinErrors(errs)
		}
	}
	if kinds != nil {
		// An action that is a tool and has turns too needs its kind to
		// serve both (a starlark source defining call and turn).
		err := kinds(def.Kind, def.Config, def.Source, def.Tool != nil)
		if err == nil && def.Tool != nil && len(def.Triggers) > 0 {
			err = kinds(def.Kind, def.Config, def.Source, false)
		}
		c.add(err, "")
	}
	if len(c.errs) > 0 {
		return nil, joinErrors(c.errs)
	}
	return out, nil
}

type compiler struct {
	def     Definition
	storing bool      // a definition being stored, not a stored one loaded
	now     time.Time // when it is stored; zero when unknown
	errs    []error
}

func (c *compiler) fail(field, code, format string, args ...any) {
	c.errs = append(c.errs, fault.New(code, field, format, args...))
}

// add records err, each error of it when it lists several (a kind
// checker may report every problem of a config at once).
func (c *compiler) add(err error, field string) {
	for _, e := range Errors(err) {
		c.errs = append(c.errs, fault.WithField(e, field))
	}
}

func (c *compiler) program(role expr.Role, src, field string) *expr.Program {
	if strings.TrimSpace(src) == "" {
		c.fail(field, fault.InvalidExpression, "an expression is required")
		return nil
	}
	p, err := expr.Compile(role, src)
	if err != nil {
		if fault.As(err) == nil {
			err = fault.New(fault.InvalidExpression, "", "%v", err)
		}
		c.add(err, field)
		return nil
	}
	if c.storing {
		c.works(role, p, field)
	}
	return p
}

// works refuses an expression that can never work (issue 10): a predicate
// no event makes true, anything else that fails whatever it reads.
func (c *compiler) works(role expr.Role, p *expr.Program, field string) {
	if role == expr.StartPredicate || role == expr.ResumePredicate {
		if why, never := p.NeverTrue(); never {
			c.fail(field, fault.InvalidAction, "this predicate matches no event: %s", why)
		}
		return
	}
	if err := p.Fails(); err != nil {
		c.fail(field, fault.InvalidExpression, "this expression fails whatever it reads: %v", err)
	}
}

// endsLater refuses an end that every session reaches when it starts
// (issue 10, E1, E3): one at or before session.started_at by a constant
// duration, or a constant instant before the definition is stored.
func (c *compiler) endsLater(p *expr.Program) {
	if d, ok := p.StartOffset(); ok && d <= 0 {
		c.fail("session.ends", fault.InvalidAction,
			"every session would end when it starts: the end is %s session.started_at; give a later end, e.g. session.started_at + duration('720h')",
			offsetWords(d))
		return
	}
	k, ok := p.Constant()
	if !ok || k.Err != nil || c.now.IsZero() {
		return
	}
	if t, isTime := k.Value.(time.Time); isTime && !t.After(c.now) {
		c.fail("session.ends", fault.InvalidAction,
			"every session would end when it starts: the end is always %s, which has passed", t.UTC().Format(time.RFC3339Nano))
	}
}

// offsetWords says where an end lies relative to the start.
func offsetWords(d time.Duration) string {
	if d == 0 {
		return "exactly"
	}
	return (-d).String() + " before"
}

// compileSchema compiles an inputSchema; only a definition being stored
// has its schemas refused as unsatisfiable (issue 10).
func (c *compiler) compileSchema(raw []byte) (*inputschema.Schema, error) {
	if c.storing {
		return inputschema.Compile(raw)
	}
	return inputschema.CompileStored(raw)
}

func (c *compiler) compile() *Compiled {
	def := c.def
	out := &Compiled{Def: def}
	if n := len(strings.TrimSpace(def.Name)); n == 0 || len(def.Name) > MaxNameLen {
		c.fail("name", fault.BadInput, "a name is 1-%d characters", MaxNameLen)
	}
	c.permissions(def.Permissions)
	if def.Source != nil && len(*def.Source) > MaxSourceLen {
		c.fail("source", fault.PayloadTooLarge, "source is at most %d bytes", MaxSourceLen)
	}
	if len(def.Config) > 0 {
		c.add(jsonvalue.Check(def.Config, "config"), "")
	}
	if len(def.Triggers) > MaxTriggers {
		c.fail("triggers", fault.InvalidAction, "at most %d triggers", MaxTriggers)
	}

	var schema *inputschema.Schema
	if def.Session != nil && len(def.Session.InputSchema) > 0 && string(def.Session.InputSchema) != "null" {
		s, err := c.compileSchema(def.Session.InputSchema)
		c.add(err, "session.inputSchema")
		schema = s
	}

	names := map[string]bool{}
	hasStart := false
	for i, t := range def.Triggers {
		f := fmt.Sprintf("triggers[%d]", i)
		if !namePattern.MatchString(t.Name) || len(t.Name) > maxTriggerNameLen {
			c.fail(f+".name", fault.BadInput, "a trigger name is 1-%d letters, digits, _ or -, starting with a letter or _", maxTriggerNameLen)
		} else if names[t.Name] {
			c.fail(f+".name", fault.InvalidAction, "trigger name %q is used twice", t.Name)
		}
		names[t.Name] = true
		ct := &CompiledTrigger{Name: t.Name, Index: i}
		out.Triggers = append(out.Triggers, ct)

		role := t.Session
		if role != nil && role.Start == nil && role.Resume == nil {
			role = nil
		}
		event := t.Event
		if t.Schedule == nil && strings.TrimSpace(t.Event) == "" {
			c.fail(f+".event", fault.InvalidExpression, "a trigger requires an event predicate (event) or a schedule (schedule)")
			hasStart = hasStart || (role != nil && role.Start != nil)
			continue
		}
		if t.Schedule != nil {
			ct.Schedule = c.triggerSchedule(t, f)
			if t.Event != "" {
				c.fail(f+".event", fault.InvalidAction, "a trigger has exactly one of event and schedule: a schedule trigger matches its own firings")
			}
			event = FiringPredicate(t.Name)
		}
		switch {
		case def.Session == nil:
			// A3: without a session block no trigger has a role and no
			// expression reads session (the role's environment refuses it).
			if role != nil {
				c.fail(f+".session", fault.InvalidAction, "a trigger can have a session role only when the action has a session block; without one, each matching event runs one execution")
			}
			ct.Predicate = c.program(expr.EventPredicate, event, f+".event")
		case role == nil:
			c.fail(f+".session", fault.InvalidAction, "with a session block every trigger needs a session role: start or resume")
			ct.Predicate = c.program(expr.StartPredicate, event, f+".event")
		case role.Start != nil && role.Resume != nil:
			hasStart = true // one error is enough
			c.fail(f+".session", fault.InvalidAction, "a trigger has exactly one of start and resume")
		case role.Start != nil:
			hasStart = true
			ct.Predicate = c.program(expr.StartPredicate, event, f+".event")
			ct.Start = c.mapping(role.Start.Input, schema, f+".session.start.input")
		default:
			ct.Predicate = c.program(expr.ResumePredicate, event, f+".event")
			if ct.Predicate != nil {
				c.checkPaths(ct.Predicate, schema, f+".event")
				g, err := ct.Predicate.EventGuard()
				c.add(err, f+".event")
				ct.Guard = g
			}
			ct.ResumeID = c.program(expr.ResumeID, role.Resume.ID, f+".session.resume.id")
		}
		if ct.Predicate != nil && t.Schedule != nil {
			ct.EventTypes = []string{schedule.FiredType}
		} else if ct.Predicate != nil {
			if types, ok := ct.Predicate.EventTypes(); ok {
				ct.EventTypes = types
				why := noEventHas(types)
				if why == "" && c.storing {
					why = noTriggerSees(types)
				}
				if why != "" {
					c.fail(f+".event", fault.InvalidAction, "this predicate matches no event: %s", why)
				}
			}
		}
	}

	toolSession := def.Tool != nil && def.Tool.Session != nil
	if def.Tool != nil {
		out.Tool = c.tool(def.Tool, def.Session, schema)
	}
	if def.MCP != nil {
		out.MCP = c.mcp(def.MCP, schema)
	}
	mcpStart := out.MCP != nil && out.MCP.Start != nil
	switch {
	case def.Session != nil:
		out.Session = c.session(def.Session, schema, names, hasStart || toolSession || mcpStart)
	case len(def.Triggers) == 0 && def.Tool == nil:
		c.fail("triggers", fault.InvalidAction, "an action needs triggers (with or without a session block) or a tool block")
	}
	out.Concurrency = c.concurrency(def)
	return out
}

// Limits of a concurrency block (issue 15).
const (
	// MaxConcurrencyLimit is the largest concurrency.limit.
	MaxConcurrencyLimit = 1000
)

// concurrency compiles the concurrency block (issue 15): only an action
// without a session block whose triggers run executions has one (a
// session's turns already run one at a time, T1). The key reads event
// alone (A3).
func (c *compiler) concurrency(def Definition) *CompiledConcurrency {
	cd := def.Concurrency
	if cd == nil {
		return nil
	}
	switch {
	case def.Session != nil:
		c.fail("concurrency", fault.InvalidAction, "concurrency applies to actions without a session block: a session's turns already run one at a time")
		return nil
	case len(def.Triggers) == 0:
		c.fail("concurrency", fault.InvalidAction, "concurrency limits the executions triggers run; this action has no triggers")
		return nil
	}
	out := &CompiledConcurrency{Limit: cd.Limit}
	if cd.Limit < 1 || cd.Limit > MaxConcurrencyLimit {
		c.fail("concurrency.limit", fault.BadInput, "limit is 1-%d executions running at once", MaxConcurrencyLimit)
	}
	if cd.Key != nil {
		out.Key = c.program(expr.ConcurrencyKey, *cd.Key, "concurrency.key")
	}
	return out
}

// noTriggerSees returns why no trigger ever sees an event of any of the
// types a predicate pins, or "" when one may: the service writes no
// schedule. type but schedule.fired, which goes to its own session (C3) or
// schedule trigger (A4) alone, no action_session. type but action_session.responded and
// action_session.requested, and no record write deletes (issue 10: a trigger that can never fire).
func noTriggerSees(types []string) string {
	for _, t := range types {
		switch {
		case strings.HasPrefix(t, "schedule."): // schedule.FiredType among them
		case strings.HasPrefix(t, "action_session.") && t != ledger.RespondedType && t != ledger.RequestedType:
		case strings.HasSuffix(t, ".deleted"):
		default:
			return ""
		}
	}
	return fmt.Sprintf("no trigger sees %q. The service writes schedule.fired for a session clock or a schedule trigger, and each firing goes to that session or trigger alone (to fire on a clock, give the trigger a schedule instead of an event). It writes no other schedule.* type and no action_session.* type other than %s and %s, and no write deletes a record",
		types[0], ledger.RespondedType, ledger.RequestedType)
}

// noEventHas returns why no event can have any of the types a predicate
// pins (issue 10: a trigger that can never fire), or "" when one can. A
// type that ledger.ValidateType refuses only as reserved can occur: record
// writes and the service write those.
func noEventHas(types []string) string {
	if len(types) == 0 {
		return "its conjuncts require different event types"
	}
	for _, t := range types {
		if fault.CodeOf(ledger.ValidateType(t, "")) != fault.BadInput {
			return ""
		}
	}
	return fmt.Sprintf("%q is not an event type (one is 1-%d characters of dot-separated names of letters, digits, _ and -)",
		types[0], ledger.MaxTypeLen)
}

func (c *compiler) session(sd *SessionDef, schema *inputschema.Schema, triggers map[string]bool, hasStart bool) *CompiledSession {
	cs := &CompiledSession{Schema: schema, MaxInputs: DefaultMaxInputs}
	cs.ID = c.program(expr.SessionID, sd.ID, "session.id")
	if cs.ID != nil {
		c.checkPaths(cs.ID, schema, "session.id")
	}
	if !hasStart {
		c.fail("triggers", fault.InvalidAction, "an action with a session needs a start trigger, a tool with a session or an mcp block that starts sessions")
	}
	entries := map[string]bool{}
	if len(sd.Schedule) > MaxScheduleItems {
		c.fail("session.schedule", fault.InvalidAction, "a session clock has at most %d entries", MaxScheduleItems)
	}
	for i, e := range sd.Schedule {
		f := fmt.Sprintf("session.schedule[%d]", i)
		if !namePattern.MatchString(e.Name) || len(e.Name) > maxTriggerNameLen {
			c.fail(f+".name", fault.BadInput, "an entry name is 1-%d letters, digits, _ or -", maxTriggerNameLen)
		} else if entries[e.Name] || triggers[e.Name] {
			c.fail(f+".name", fault.InvalidAction, "name %q is already used by a trigger or entry", e.Name)
		}
		entries[e.Name] = true
		if (e.Cron == nil) == (e.Every == nil) {
			c.fail(f, fault.InvalidAction, "each entry has exactly one of cron and every")
			continue
		}
		if e.Cron == nil && e.Timezone != nil {
			c.fail(f+".timezone", fault.InvalidAction, "timezone applies only to a cron entry")
		}
		if entry := c.clockEntry(e, f); entry != nil {
			cs.Clock = append(cs.Clock, entry)
		}
	}
	if t := sd.Turns; t != nil {
		if t.On != nil {
			cs.On = map[string]bool{}
			if len(t.On) == 0 {
				c.fail("session.turns.on", fault.InvalidAction, "turns.on names at least one trigger or entry; omit it to let every input start a turn")
			}
			for i, n := range t.On {
				if !triggers[n] && !entries[n] {
					c.fail(fmt.Sprintf("session.turns.on[%d]", i), fault.InvalidAction, "%q is not a trigger or schedule entry of this action", n)
				}
				cs.On[n] = true
			}
		}
		if t.MaxInputs != nil {
			if *t.MaxInputs < 1 || *t.MaxInputs > MaxInputsCap {
				c.fail("session.turns.maxInputs", fault.BadInput, "maxInputs is 1-%d", MaxInputsCap)
			}
			cs.MaxInputs = *t.MaxInputs
		}
		if t.MaxBytes != nil {
			if *t.MaxBytes < 1 || *t.MaxBytes > MaxBytesCap {
				c.fail("session.turns.maxBytes", fault.BadInput, "maxBytes is 1-%d", MaxBytesCap)
			}
			cs.MaxBytes = *t.MaxBytes
		}
		if t.Window != nil {
			cs.Window = c.window(*t.Window)
		}
		if d := t.Debounce; d != nil {
			cs.DebounceQuiet = c.duration("session.turns.debounce.quiet", d.Quiet, time.Millisecond, MaxWindow)
			cs.DebounceMax = c.duration("session.turns.debounce.max", d.Max, time.Millisecond, MaxWindow)
			if cs.DebounceMax > 0 && cs.DebounceQuiet > cs.DebounceMax {
				c.fail("session.turns.debounce.max", fault.InvalidAction, "max (%s) is at least quiet (%s)", cs.DebounceMax, cs.DebounceQuiet)
			}
			if t.Window != nil {
				c.fail("session.turns.debounce", fault.InvalidAction, "give window or debounce, not both")
			}
		}
	}
	if sd.Park != nil {
		cs.Park = c.park(sd.Park, triggers)
	}
	if sd.Concurrency != nil {
		if *sd.Concurrency != 1 {
			c.fail("session.concurrency", fault.InvalidAction, "session.concurrency is 1 (a singleton) or omitted (no limit)")
		}
		cs.Singleton = true
	}
	if sd.ConcurrencyKey != nil {
		if sd.Concurrency == nil {
			c.fail("session.concurrencyKey", fault.InvalidAction, "concurrencyKey names a singleton's slot: set concurrency: 1 too")
		}
		if p := c.program(expr.SessionID, *sd.ConcurrencyKey, "session.concurrencyKey"); p != nil {
			c.checkPaths(p, schema, "session.concurrencyKey")
			cs.SlotKey = p
		}
	}
	if sd.ArchiveAfterInactive != nil {
		cs.ArchiveAfter = c.duration("session.archiveAfterInactive", *sd.ArchiveAfterInactive, time.Minute, 10*365*24*time.Hour)
	}
	if v := sd.MaxPerSessionUsd; v != nil {
		if !(*v > 0 && *v <= MaxSessionUSD) {
			c.fail("session.maxPerSessionUsd", fault.BadInput, "maxPerSessionUsd is a number of US dollars above 0 and at most %d", MaxSessionUSD)
		} else {
			cs.MaxUSD = v
		}
	}
	if sd.DisplayTitle != nil {
		if p := c.program(expr.SessionID, *sd.DisplayTitle, "session.displayTitle"); p != nil {
			c.checkPaths(p, schema, "session.displayTitle")
			cs.Title = p
		}
	}
	if sd.Ends != nil {
		if p := c.program(expr.Ends, *sd.Ends, "session.ends"); p != nil {
			c.checkPaths(p, schema, "session.ends")
			if c.storing {
				c.endsLater(p)
			}
			cs.Ends = p
		}
	}
	return cs
}

// clockEntry compiles one entry of the session clock (C1): a cron
// expression with its timezone (UTC when omitted), or an every period.
func (c *compiler) clockEntry(e ScheduleEntry, field string) *schedule.Entry {
	if e.Every != nil {
		d, err := schedule.ParseEvery(*e.Every)
		if err != nil {
			c.fail(field+".every", fault.InvalidAction, "%v", err)
			return nil
		}
		if c.storing && d > schedule.MaxEvery {
			// Firing times are computed as anchor + k·every in Go
			// durations, which end 292 years out: a longer period would
			// fire a handful of times and stop.
			c.fail(field+".every", fault.InvalidAction, "every is at most %s (a year); use cron for anything rarer", schedule.MaxEvery)
			return nil
		}
		return schedule.Every(e.Name, d)
	}
	tz := ""
	if e.Timezone != nil {
		tz = *e.Timezone
		if tz == "" {
			c.fail(field+".timezone", fault.InvalidAction, "a timezone is an IANA name such as America/New_York; omit it for UTC")
			return nil
		}
	}
	loc, err := schedule.LoadZone(tz)
	if err != nil {
		c.fail(field+".timezone", fault.InvalidAction, "%v", err)
		return nil
	}
	entry, err := schedule.Cron(e.Name, *e.Cron, loc)
	if err != nil {
		c.fail(field+".cron", fault.InvalidAction, "%v", err)
		return nil
	}
	return entry
}

// FiringPredicate is the predicate a schedule trigger named name matches
// its firings with (A4): schedule.fired events of a trigger of that name.
// Which action's firings it sees is the dispatcher's to decide (FiredBy).
func FiringPredicate(name string) string {
	return fmt.Sprintf("event.type == %q && event.data.trigger == %q", schedule.FiredType, name)
}

// triggerSchedule compiles a schedule trigger's clock (A4) with the rules
// of a session clock entry (C1, C2), the entry named after the trigger.
func (c *compiler) triggerSchedule(t Trigger, field string) *schedule.Entry {
	s, f := t.Schedule, field+".schedule"
	if (s.Cron == nil) == (s.Every == nil) {
		c.fail(f, fault.InvalidAction, "a schedule has exactly one of cron and every")
		return nil
	}
	if s.Cron == nil && s.Timezone != nil {
		c.fail(f+".timezone", fault.InvalidAction, "timezone applies only to a cron schedule")
	}
	return c.clockEntry(ScheduleEntry{Name: t.Name, Cron: s.Cron, Timezone: s.Timezone, Every: s.Every}, f)
}

// park checks session.park (G4): ttl from 1s to MaxParkTTL, resumeAfter
// from 1s to below ttl, resumeOn naming triggers of the action.
func (c *compiler) park(p *Park, triggers map[string]bool) *CompiledPark {
	cp := &CompiledPark{}
	cp.TTL = c.duration("session.park.ttl", p.TTL, time.Second, MaxParkTTL)
	if p.ResumeAfter != nil {
		cp.ResumeAfter = c.duration("session.park.resumeAfter", *p.ResumeAfter, time.Second, MaxParkTTL)
		if cp.TTL > 0 && cp.ResumeAfter >= cp.TTL {
			c.fail("session.park.resumeAfter", fault.InvalidAction, "resumeAfter (%s) is shorter than ttl (%s): the park expires first", cp.ResumeAfter, cp.TTL)
		}
	}
	seen := map[string]bool{}
	for i, n := range p.ResumeOn {
		switch {
		case !triggers[n]:
			c.fail(fmt.Sprintf("session.park.resumeOn[%d]", i), fault.InvalidAction, "%q is not a trigger of this action", n)
		case seen[n]:
			c.fail(fmt.Sprintf("session.park.resumeOn[%d]", i), fault.InvalidAction, "%q is named twice", n)
		}
		seen[n] = true
		cp.ResumeOn = append(cp.ResumeOn, n)
	}
	return cp
}

// duration parses a duration field from min to max, whole microseconds.
func (c *compiler) duration(field, src string, min, max time.Duration) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(src))
	switch {
	case err != nil:
		c.fail(field, fault.InvalidAction, "a duration such as 90s, 15m or 24h")
	case d < min || d > max:
		c.fail(field, fault.InvalidAction, "from %s to %s (got %s)", min, max, d)
	case d%time.Microsecond != 0:
		c.fail(field, fault.InvalidAction, "a whole number of microseconds (got %s)", d)
	default:
		return d
	}
	return 0
}

// window parses turns.window (T4): a duration from 1ms to MaxWindow.
func (c *compiler) window(src string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(src))
	switch {
	case err != nil:
		c.fail("session.turns.window", fault.InvalidAction, "window is a duration such as 5s or 2m")
	case d < time.Millisecond || d > MaxWindow:
		c.fail("session.turns.window", fault.InvalidAction, "window is from 1ms to %s (got %s)", MaxWindow, d)
	case d%time.Microsecond != 0:
		c.fail("session.turns.window", fault.InvalidAction, "window is a whole number of microseconds (got %s)", d)
	default:
		return d
	}
	return 0
}

// tool compiles the tool block (X1): its input schema and, for a tool with a
// session, the start mapping over tool.input. A tool session has no
// triggers, turns, ends or schedule.
func (c *compiler) tool(td *ToolDef, sd *SessionDef, sessionSchema *inputschema.Schema) *CompiledTool {
	ct := &CompiledTool{Name: td.Name}
	if !namePattern.MatchString(td.Name) || len(td.Name) > maxTriggerNameLen {
		c.fail("tool.name", fault.BadInput, "a tool name is 1-%d letters, digits, _ or -, starting with a letter or _", maxTriggerNameLen)
	}
	if td.Description != nil && len(*td.Description) > 4000 {
		c.fail("tool.description", fault.BadInput, "a description is at most 4000 bytes")
	}
	if len(td.InputSchema) > 0 && string(td.InputSchema) != "null" {
		s, err := c.compileSchema(td.InputSchema)
		c.add(err, "tool.inputSchema")
		ct.Schema = s
	}
	switch td.Approval {
	case "", ApprovalNone:
	case ApprovalRequired:
		ct.Approval = true
	default:
		c.fail("tool.approval", fault.BadInput, "approval is %s or %s", ApprovalRequired, ApprovalNone)
	}
	if td.Session == nil {
		return ct
	}
	if sd == nil {
		c.fail("tool.session", fault.InvalidAction, "a tool with a session needs the action's session block (its id and inputSchema)")
		return ct
	}
	if len(c.def.Triggers) > 0 {
		c.fail("triggers", fault.InvalidAction, "a tool with a session has no triggers: every call starts its session")
	}
	if sd.Turns != nil || sd.Ends != nil || len(sd.Schedule) > 0 {
		c.fail("session", fault.InvalidAction, "a tool session has no turns, ends or schedule: it records calls only")
	}
	if td.Session.Start == nil {
		c.fail("tool.session.start", fault.InvalidAction, "a tool session needs a start mapping over tool.input")
		return ct
	}
	ct.Session = c.mappingRole(expr.ToolMapping, td.Session.Start.Input, sessionSchema, "tool.session.start.input")
	return ct
}

// maxMCPSchemaBytes bounds an MCP serve block's inputSchema.
const maxMCPSchemaBytes = 64 << 10

// mcp compiles the MCP serve block (issue 17, I4): the tool's name,
// description and arguments schema, and the session role over request
// (a start mapping, checked against inputSchema like a start trigger's, or
// a resume id). A served action runs in turns: it needs a session block,
// and a tool action is served as a tool already.
func (c *compiler) mcp(md *MCPDef, sessionSchema *inputschema.Schema) *CompiledMCP {
	cm := &CompiledMCP{Name: md.Name}
	if cm.Name == "" {
		cm.Name = DefaultMCPName
	}
	if !mcpNamePattern.MatchString(cm.Name) {
		c.fail("mcp.name", fault.BadInput, "an MCP tool name is 1-64 letters, digits, _ or -")
	}
	if md.Description != nil {
		if len(*md.Description) > 4000 {
			c.fail("mcp.description", fault.BadInput, "a description is at most 4000 bytes")
		}
		cm.Description = *md.Description
	}
	switch {
	case c.def.Tool != nil:
		c.fail("mcp", fault.InvalidAction, "a tool action is served over MCP as its tool already: drop the mcp block")
	case c.def.Session == nil:
		c.fail("mcp", fault.InvalidAction, "an action served over MCP needs a session block: each request is an input of one of its sessions")
	}
	cm.SchemaJSON = jsonvalue.Value(DefaultMCPSchema)
	if raw := md.InputSchema; len(raw) > 0 && string(raw) != "null" {
		cm.SchemaJSON = raw
	}
	if len(cm.SchemaJSON) > maxMCPSchemaBytes {
		c.fail("mcp.inputSchema", fault.PayloadTooLarge, "inputSchema is at most %d bytes", maxMCPSchemaBytes)
	} else if !objectSchema(cm.SchemaJSON) {
		c.fail("mcp.inputSchema", fault.InvalidSchema, `an MCP tool's arguments are a JSON object: inputSchema needs "type": "object"`)
	} else {
		s, err := c.compileSchema(cm.SchemaJSON)
		c.add(err, "mcp.inputSchema")
		cm.Schema = s
	}
	role := md.Session
	switch {
	case role == nil || (role.Start == nil && role.Resume == nil):
		c.fail("mcp.session", fault.InvalidAction, "an mcp block needs a session role: start (a mapping over request) or resume (an id over request)")
	case role.Start != nil && role.Resume != nil:
		c.fail("mcp.session", fault.InvalidAction, "an mcp block's session role has exactly one of start and resume")
	case role.Start != nil:
		cm.Start = c.mappingRole(expr.RequestMapping, role.Start.Input, sessionSchema, "mcp.session.start.input")
	default:
		cm.ResumeID = c.program(expr.RequestID, role.Resume.ID, "mcp.session.resume.id")
	}
	return cm
}

var mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// objectSchema reports whether raw is a JSON object whose "type" is
// "object".
func objectSchema(raw jsonvalue.Value) bool {
	v, err := raw.Decode()
	m, ok := v.(map[string]any)
	return err == nil && ok && m["type"] == "object"
}

// checkPaths enforces A3: a path into session.input must exist in a closed inputSchema.
func (c *compiler) checkPaths(p *expr.Program, schema *inputschema.Schema, field string) {
	if schema == nil {
		return
	}
	for _, path := range p.InputPaths() {
		if !schema.HasPath(path) {
			c.fail(field, fault.InvalidAction, "session.input.%s is not a property of inputSchema, which allows no others", strings.Join(path, "."))
		}
	}
}

func (c *compiler) mapping(raw jsonvalue.Value, schema *inputschema.Schema, field string) *Mapping {
	return c.mappingRole(expr.StartMapping, raw, schema, field)
}

func (c *compiler) mappingRole(role expr.Role, raw jsonvalue.Value, schema *inputschema.Schema, field string) *Mapping {
	v, err := raw.Decode()
	if err != nil {
		c.fail(field, fault.InvalidJSON, "not valid JSON: %v", err)
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		c.fail(field, fault.InvalidAction, "a start mapping is an object whose values are CEL expressions")
		return nil
	}
	leaves := 0
	m := c.mappingNode(role, obj, field, 0, &leaves)
	if m == nil {
		return nil
	}
	if schema != nil {
		var missing []string
		for _, r := range schema.Required() {
			if _, ok := obj[r]; !ok {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			c.fail(field, fault.InvalidAction, "the mapping must set every property inputSchema requires (defaults are not inserted); missing: %s", strings.Join(missing, ", "))
		}
		for k := range obj {
			if !schema.HasPath([]string{k}) {
				c.fail(field+"."+k, fault.InvalidAction, "%q is not a property of inputSchema, which allows no others", k)
			}
		}
		c.checkTypes(m, schema, nil, field)
	}
	return m
}

// checkTypes refuses a mapping value whose result can never have a type
// that inputSchema allows for its property (issue 10): every start would
// fail with input_invalid. Values of type dyn, and properties whose type the
// schema does not fix, are left to Validate.
func (c *compiler) checkTypes(m *Mapping, schema *inputschema.Schema, path []string, field string) {
	keys := make([]string, 0, len(m.Fields))
	for k := range m.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, p := m.Fields[k], append(append([]string{}, path...), k)
		produces := []string{"object"}
		if f.Program != nil {
			produces = f.Program.JSONTypes()
		} else {
			c.checkTypes(f, schema, p, field+"."+k)
		}
		allowed, ok := schema.PropertyTypes(p)
		if !ok || len(allowed) == 0 || produces == nil || slices.ContainsFunc(produces, func(t string) bool { return slices.Contains(allowed, t) }) {
			continue
		}
		c.fail(field+"."+k, fault.InvalidAction, "this value is always of type %s, but inputSchema allows only %s for session.input.%s: every start would be refused",
			typeWords(produces), typeWords(allowed), strings.Join(p, "."))
	}
}

// typeWords writes JSON Schema types for a message: "integer" goes without
// saying next to "number".
func typeWords(types []string) string {
	if slices.Contains(types, "number") {
		types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "integer" })
	}
	return strings.Join(types, " or ")
}

func (c *compiler) mappingNode(role expr.Role, obj map[string]any, field string, depth int, leaves *int) *Mapping {
	if depth > maxMappingDepth {
		c.fail(field, fault.InvalidAction, "a start mapping nests at most %d levels", maxMappingDepth)
		return nil
	}
	m := &Mapping{Fields: make(map[string]*Mapping, len(obj))}
	ok := true
	for k, v := range obj {
		f := field + "." + k
		switch x := v.(type) {
		case string:
			*leaves++
			if *leaves > maxMappingLeaves {
				c.fail(field, fault.InvalidAction, "a start mapping has at most %d expressions", maxMappingLeaves)
				return nil
			}
			p := c.program(role, x, f)
			if p == nil {
				ok = false
				continue
			}
			m.Fields[k] = &Mapping{Program: p}
		case map[string]any:
			sub := c.mappingNode(role, x, f, depth+1, leaves)
			if sub == nil {
				ok = false
				continue
			}
			m.Fields[k] = sub
		default:
			ok = false
			c.fail(f, fault.InvalidAction, "each value of a start mapping is a CEL expression string (write constants as expressions, e.g. \"'USD'\" or \"10\")")
		}
	}
	if !ok {
		return nil
	}
	return m
}

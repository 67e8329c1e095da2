package expr

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// MaxSourceBytes is the longest expression Compile accepts, in bytes.
const MaxSourceBytes = 8 << 10

// MaxCost is the evaluation cost limit of every program, in CEL cost units
// (roughly one unit per operation, more for operations over long strings and
// lists). A field comparison costs a handful of units and a comprehension
// over a thousand-element list a few thousand; one million units take about
// 50 ms of CPU. It is the per-call limit Kubernetes uses for its CEL
// validation rules.
const MaxCost = 1_000_000

// interruptEvery is how many comprehension iterations run between checks of
// the evaluation context.
const interruptEvery = 64

// Program is a compiled and type-checked expression of one role. It is
// immutable and safe for concurrent use: compile it once (per action
// version) and share it.
type Program struct {
	role       Role
	src        string
	prg        cel.Program
	ast        *cel.Ast
	out        *types.Type     // the checked result type
	reads      map[string]bool // root variables read: event, session, tool
	eventTypes []string
	pinned     bool
	inputPaths [][]string
	env        *cel.Env // the role's, for Constant
	constantState
}

// Compile parses and type-checks src for role and analyses what it reads.
//
// Errors are *fault.Error values with an empty Field (callers prefix the
// field path with fault.WithField):
//   - fault.InvalidExpression: src is empty or longer than MaxSourceBytes,
//     does not parse, names a variable or field the role does not declare,
//     does not type-check, or produces the wrong type (predicates: bool;
//     ResumeID and SessionID: string; Ends: timestamp; mappings: a value
//     JSON can represent), costs more than MaxCost on every evaluation or
//     more on the largest data with a cost that grows faster than the data
//     (the message gives the estimates and the limit, issue 10 item 3), or
//     holds a regular expression beyond MaxRegexInsts or MaxRegexBytes.
//   - fault.InvalidAction: src breaks a rule of SPEC A3: it reads session
//     where the role cannot (start predicates and mappings), reads a session
//     field other than those of the role (session.state never), or is a
//     resume predicate that does not constrain events (see
//     ValidateResumeConstraint).
//
// Any other error is internal.
func Compile(role Role, src string) (*Program, error) {
	spec, ok := specs[role]
	if !ok {
		return nil, fmt.Errorf("expr: unknown role %d", int(role))
	}
	if len(src) > MaxSourceBytes {
		return nil, fault.New(fault.InvalidExpression, "",
			"expression is %d bytes long; the limit is %d bytes", len(src), MaxSourceBytes)
	}
	if strings.TrimSpace(src) == "" {
		return nil, fault.New(fault.InvalidExpression, "", "expression is empty")
	}
	all, err := envs()
	if err != nil {
		return nil, err
	}
	env := all[role]

	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil, issuesError(spec, iss)
	}
	sc := newScan(spec)
	if err := sc.walk(parsed.NativeRep().Expr(), nil); err != nil {
		return nil, err
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, issuesError(spec, iss)
	}
	if err := checkOutput(spec, checked.OutputType()); err != nil {
		return nil, err
	}
	// Before anything evaluates constant parts (the resume rule folds
	// them, programs compile constant regular expressions).
	if err := checkCost(env, spec, checked); err != nil {
		return nil, err
	}
	if err := checkRegexes(checked.NativeRep().Expr()); err != nil {
		return nil, err
	}

	p := &Program{
		role:       role,
		src:        src,
		ast:        checked,
		out:        checked.OutputType(),
		reads:      sc.reads,
		inputPaths: sc.paths,
		env:        env,
	}
	p.eventTypes, p.pinned = pinnedTypes(checked.NativeRep().Expr())
	if role == ResumePredicate {
		folded, err := resumeConstraint(env, checked)
		if err != nil {
			return nil, err
		}
		p.folded = folded // Constant and NeverTrue start from it
	}
	p.prg, err = env.Program(checked,
		cel.CostLimit(MaxCost),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		// What planning refuses is the expression's doing (a constant
		// checkRegexes did not foresee, say), not the service's.
		return nil, &fault.Error{Code: fault.InvalidExpression, Message: "the expression cannot be evaluated: " + err.Error(), Err: err}
	}
	return p, nil
}

// Source returns the expression as written.
func (p *Program) Source() string { return p.src }

// Role returns the role the expression was compiled for.
func (p *Program) Role() Role { return p.role }

// EventTypes returns the event types the expression pins through a top-level
// conjunct (conjuncts are joined by &&) of the form event.type == "x",
// "x" == event.type or event.type in ["x", "y"]. When several conjuncts pin,
// the result is their intersection, which may be empty (no event matches).
// ok is false when no conjunct pins: the expression may select any type. The
// returned slice is a copy in source order.
func (p *Program) EventTypes() (types []string, ok bool) {
	if !p.pinned {
		return nil, false
	}
	return append([]string{}, p.eventTypes...), true
}

// JSONTypes returns the JSON Schema types ("array", "boolean", "integer",
// "null", "number", "object", "string") that a result of the expression can
// have once converted (see Eval), sorted; nil when its type is known only at
// evaluation (dyn). A double may be integral, so it gives "integer" and
// "number"; a timestamp or duration gives "string". Issue 10: a start
// mapping whose result can never have a type its inputSchema property
// allows is refused at create.
func (p *Program) JSONTypes() []string {
	switch p.out.Kind() {
	case types.BoolKind:
		return []string{"boolean"}
	case types.IntKind, types.UintKind:
		return []string{"integer"}
	case types.DoubleKind:
		return []string{"integer", "number"}
	case types.StringKind, types.TimestampKind, types.DurationKind:
		return []string{"string"}
	case types.NullTypeKind:
		return []string{"null"}
	case types.ListKind:
		return []string{"array"}
	case types.MapKind:
		return []string{"object"}
	}
	return nil
}

// ReadsSession tells whether the expression reads the session variable at all.
func (p *Program) ReadsSession() bool { return p.reads[varSession] }

// ReadsEvent tells whether the expression reads the event variable at all.
func (p *Program) ReadsEvent() bool { return p.reads[varEvent] }

// InputPaths returns every path read under session.input (tool.input for
// ToolMapping), once each, in source order: session.input.account_id gives
// ["account_id"] and session.input.a["b"].c gives ["a", "b", "c"]. A path
// stops at the first index that is not a constant; a constant integer index
// appears as its decimal text (session.input.items[0].id gives
// ["items", "0", "id"]). Reading the whole input adds no path, and paths are
// not followed through comprehension variables
// (session.input.items.all(i, i.ok) gives ["items"]). The result is a copy.
func (p *Program) InputPaths() [][]string {
	out := make([][]string, len(p.inputPaths))
	for i, path := range p.inputPaths {
		out[i] = append([]string{}, path...)
	}
	return out
}

// checkOutput enforces the role's output type.
func checkOutput(spec roleSpec, t *types.Type) error {
	found := typeName(t)
	var want, hint string
	switch spec.out {
	case boolOut:
		if t.Kind() == types.BoolKind {
			return nil
		}
		want = "bool"
		if t.Kind() == types.DynKind {
			hint = `: compare explicitly, e.g. event.data.flag == true`
		}
	case stringOut:
		if t.Kind() == types.StringKind {
			return nil
		}
		want = "string"
		hint = `: convert with string(...), e.g. string(event.data.account_id)`
	case timestampOut:
		if t.Kind() == types.TimestampKind {
			return nil
		}
		want = "timestamp"
		hint = `: e.g. session.started_at + duration('720h') or timestamp(session.input.until)`
	default:
		if bad := nonJSON(t); bad != "" {
			if bad == found {
				return fault.New(fault.InvalidExpression, "",
					"%s must produce a JSON value; found %s", spec.subject, found)
			}
			return fault.New(fault.InvalidExpression, "",
				"%s must produce a JSON value; found %s, which contains %s", spec.subject, found, bad)
		}
		return nil
	}
	if t.Kind() == types.DynKind {
		found = "dyn (a type known only at evaluation)"
	}
	return fault.New(fault.InvalidExpression, "", "%s must produce %s, found %s%s", spec.subject, want, found, hint)
}

// nonJSON returns the name of the first part of t that JSON cannot represent,
// or "" when every value of t can be.
func nonJSON(t *types.Type) string {
	switch t.Kind() {
	case types.DynKind, types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind,
		types.StringKind, types.NullTypeKind, types.TimestampKind, types.DurationKind, types.AnyKind:
		return ""
	case types.ListKind:
		return nonJSON(t.Parameters()[0])
	case types.MapKind:
		if k := t.Parameters()[0].Kind(); k != types.StringKind && k != types.DynKind {
			return typeName(t.Parameters()[0]) + " map keys"
		}
		return nonJSON(t.Parameters()[1])
	}
	return typeName(t)
}

// typeName spells a type for users.
func typeName(t *types.Type) string {
	switch t.Kind() {
	case types.TimestampKind:
		return "timestamp"
	case types.DurationKind:
		return "duration"
	}
	return t.String()
}

// issuesError turns parser or checker issues into a fault, one line per
// issue (at most three), each with its position.
func issuesError(spec roleSpec, iss *cel.Issues) error {
	errs := iss.Errors()
	msgs := make([]string, 0, 3)
	for i, e := range errs {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		msg := strings.TrimSuffix(e.Message, " (in container '')")
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			msg = fmt.Sprintf("%s (line %d, column %d)", msg, loc.Line(), loc.Column()+1)
		}
		if strings.HasPrefix(msg, "undeclared reference to") {
			msg += fmt.Sprintf("; %s can read only %s", spec.subject, strings.Join(spec.vars, " and "))
		}
		msgs = append(msgs, msg)
	}
	return &fault.Error{
		Code:    fault.InvalidExpression,
		Message: strings.Join(msgs, "; "),
		Err:     iss.Err(),
	}
}

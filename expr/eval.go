package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Event is the event variable: a ledger event (SPEC L1) as expressions see
// it. Data is decoded JSON (see Vars).
type Event struct {
	ID         string // a UUID
	Type       string // e.g. "account.inserted"
	Data       any
	CommitTime time.Time // read as UTC
	Position   int64
}

// Session is the session variable. Each role reads only some fields:
// ResumePredicate id and input, SessionID input, Ends input and started_at.
type Session struct {
	ID        string
	Input     any
	StartedAt time.Time // read as UTC
}

// Request is the request variable (issue 17, I4): an MCP client's request
// to an action served over MCP. Arguments is decoded JSON (see Vars), the
// request's tool arguments; Principal the caller's principal name;
// MCPSession the client's Mcp-Session-Id ("" when it sent none).
type Request struct {
	Arguments  any
	Principal  string
	MCPSession string
}

// Vars are the values an expression is evaluated with. Set the variables the
// role declares (Event for the event roles, Session for ResumePredicate,
// SessionID and Ends, ToolInput for ToolMapping); the others are ignored.
//
// Event.Data, Session.Input and ToolInput hold decoded JSON: nil, bool,
// string, json.Number (decode with UseNumber), map[string]any and []any;
// float64 and Go integers are accepted too. Numbers are converted as they
// are read: a json.Number without fraction or exponent becomes a CEL int when
// it fits int64, else a CEL uint when it fits uint64, else a double; any
// other number becomes a double. So integers up to 19 digits compare exactly.
// The values are only read, never modified.
type Vars struct {
	Event     *Event
	Session   *Session
	ToolInput any
	// Request is set for RequestMapping and RequestID.
	Request *Request
}

// toolValue is what the tool variable is bound to.
type toolValue struct{ input any }

// activation resolves the role variables from Vars without building a map,
// and the evaluation's size budget (see boundedCall).
type activation struct {
	vars   *Vars
	budget *budget
}

func (a activation) ResolveName(name string) (any, bool) {
	switch name {
	case budgetVar:
		return a.budget, true
	case varEvent:
		if a.vars.Event != nil {
			return a.vars.Event, true
		}
	case varSession:
		if a.vars.Session != nil {
			return a.vars.Session, true
		}
	case varTool:
		return toolValue{input: a.vars.ToolInput}, true
	case varRequest:
		if a.vars.Request != nil {
			return a.vars.Request, true
		}
	}
	return nil, false
}

func (a activation) Parent() interpreter.Activation { return nil }

// ErrCostLimit is returned (wrapped) by Eval when an evaluation exceeds
// MaxCost.
var ErrCostLimit = fmt.Errorf("expression is too costly to evaluate (cost limit %d)", MaxCost)

// Eval evaluates the program with vars and returns its result as a plain Go
// value ready for encoding/json: nil, bool, string, int64 (CEL int), uint64
// (CEL uint), float64 (CEL double), time.Time in UTC (timestamp), string
// such as "1h0m0s" (duration), []any and map[string]any of those values.
//
// Errors are plain errors with a short message meant for users (they become
// diagnostics and intake reasons): a missing map key, a type mismatch or a
// failed conversion (with the position in the source), a variable the
// expression reads that vars does not set, ErrCostLimit, a cancelled or
// expired ctx (wrapping ctx's cause, so errors.Is(err, context.Canceled)
// works), ErrSizeLimit (a call refused before it would build more than
// MaxBuildBytes in the evaluation), or a result that JSON cannot represent
// (bytes, NaN or infinite doubles, maps with non-string keys, types) or
// that is larger than MaxResultBytes.
func (p *Program) Eval(ctx context.Context, vars Vars) (any, error) {
	v, err := p.eval(ctx, &vars)
	if err != nil {
		return nil, err
	}
	left := int64(MaxResultBytes)
	return toJSON(v, &left)
}

// EvalBool evaluates a predicate (StartPredicate, ResumePredicate).
// Errors are those of Eval.
func (p *Program) EvalBool(ctx context.Context, vars Vars) (bool, error) {
	v, err := p.eval(ctx, &vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression produced %s, not bool", typeName(v.Type().(*types.Type)))
	}
	return bool(b), nil
}

// EvalString evaluates an id (ResumeID, SessionID). Errors are those of Eval.
func (p *Program) EvalString(ctx context.Context, vars Vars) (string, error) {
	v, err := p.eval(ctx, &vars)
	if err != nil {
		return "", err
	}
	s, ok := v.(types.String)
	if !ok {
		return "", fmt.Errorf("expression produced %s, not string", typeName(v.Type().(*types.Type)))
	}
	return string(s), nil
}

// EvalTime evaluates an end (Ends) and returns the instant in UTC. Errors
// are those of Eval.
func (p *Program) EvalTime(ctx context.Context, vars Vars) (time.Time, error) {
	v, err := p.eval(ctx, &vars)
	if err != nil {
		return time.Time{}, err
	}
	ts, ok := v.(types.Timestamp)
	if !ok {
		return time.Time{}, fmt.Errorf("expression produced %s, not timestamp", typeName(v.Type().(*types.Type)))
	}
	return ts.Time.UTC(), nil
}

func (p *Program) eval(ctx context.Context, vars *Vars) (ref.Val, error) {
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	if p.reads[varEvent] && vars.Event == nil {
		return nil, errors.New("no event to evaluate the expression with")
	}
	if p.reads[varSession] && vars.Session == nil {
		return nil, errors.New("no session to evaluate the expression with")
	}
	if p.reads[varRequest] && vars.Request == nil {
		return nil, errors.New("no request to evaluate the expression with")
	}
	act := activation{vars: vars, budget: newBudget()}
	out, _, err := p.prg.ContextEval(ctx, act)
	if err != nil {
		return nil, p.evalError(ctx, err, act.budget)
	}
	return out, nil
}

func stopped(ctx context.Context) error {
	return fmt.Errorf("evaluation stopped: %w", context.Cause(ctx))
}

// evalError rewrites an evaluation error for users.
func (p *Program) evalError(ctx context.Context, err error, b *budget) error {
	if ctx.Err() != nil {
		return stopped(ctx)
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return ErrCostLimit
	}
	if b.refused != nil {
		return fmt.Errorf("%w: %s%s", ErrSizeLimit, b.refused.msg, p.at(b.refused.node))
	}
	msg := err.Error()
	if msg == "no such overload" {
		msg = "this operation does not accept values of these types"
	}
	var node interface{ NodeID() int64 }
	if errors.As(err, &node) {
		return errors.New(msg + p.at(node.NodeID()))
	}
	return errors.New(msg)
}

// at returns " (line L, column C)" for an expression node, or "".
func (p *Program) at(node int64) string {
	if node == 0 {
		return ""
	}
	loc := p.ast.NativeRep().SourceInfo().GetStartLocation(node)
	if loc.Line() <= 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d, column %d)", loc.Line(), loc.Column()+1)
}

// MaxResultBytes bounds the result of Eval, in bytes of JSON: the largest
// value the service stores (jsonvalue.MaxBytes). A list may hold the same
// long string many times at little cost, so the result is measured as it is
// converted, before anything is encoded (issue 10 item 3).
const MaxResultBytes = jsonvalue.MaxBytes

// toJSON converts a CEL result to a plain Go value (see Eval), counting its
// JSON size down from *left.
func toJSON(v ref.Val, left *int64) (any, error) {
	*left -= jsonSize(v)
	if *left < 0 {
		return nil, fmt.Errorf("the result is larger than %d bytes of JSON, the largest value the service stores", MaxResultBytes)
	}
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("the result contains %v, which JSON cannot represent", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Timestamp:
		return v.Time.UTC(), nil
	case types.Duration:
		return v.Duration.String(), nil
	case *types.Err:
		return nil, errors.New(v.Error())
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return nil, errors.New("the result contains a list of unknown size")
		}
		if int64(n) > *left {
			return nil, fmt.Errorf("the result is larger than %d bytes of JSON, the largest value the service stores", MaxResultBytes)
		}
		out := make([]any, n)
		for i := range out {
			el, err := toJSON(v.Get(types.Int(i)), left)
			if err != nil {
				return nil, err
			}
			out[i] = el
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("the result contains a map key of type %s (%v); JSON object keys must be strings",
					typeName(k.Type().(*types.Type)), k.Value())
			}
			*left -= int64(len(ks)) + 3 // "key":
			el, err := toJSON(v.Get(k), left)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = el
		}
		return out, nil
	}
	name := fmt.Sprintf("%T", v)
	if t, ok := v.Type().(*types.Type); ok {
		name = typeName(t)
	}
	return nil, fmt.Errorf("the result contains a %s value, which JSON cannot represent", name)
}

// jsonSize is about the JSON size of a scalar with the comma after it (a
// string without its escapes), or of a container's brackets alone.
func jsonSize(v ref.Val) int64 {
	var buf [24]byte
	switch v := v.(type) {
	case types.String:
		return int64(len(v)) + 3
	case types.Int:
		return int64(len(strconv.AppendInt(buf[:0], int64(v), 10))) + 1
	case types.Uint:
		return int64(len(strconv.AppendUint(buf[:0], uint64(v), 10))) + 1
	case types.Bool, types.Null:
		return 6
	case traits.Lister, traits.Mapper:
		return 3
	}
	return 32 // doubles, timestamps, durations
}

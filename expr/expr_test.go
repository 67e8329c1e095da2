package expr_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// decode decodes JSON the way the service does: numbers stay json.Number.
func decode(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// vars is a test bundle with one event, one session and a tool input.
func vars(t testing.TB) expr.Vars {
	t.Helper()
	return expr.Vars{
		Event: &expr.Event{
			ID:         "5b0b3c1e-8f5a-4a53-9a57-8b1f0a3c2d11",
			Type:       "entry.inserted",
			Data:       decode(t, `{"account_id": 9007199254740993123, "amount": 12, "note": "x", "flag": true, "items": [{"id": 1}, {"id": 2.5}]}`),
			CommitTime: time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600)),
			Position:   42,
		},
		Session: &expr.Session{
			ID:        "acc-1",
			Input:     decode(t, `{"account_id": "9007199254740993123", "days": 30}`),
			StartedAt: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
		},
		ToolInput: decode(t, `{"account_id": 7}`),
	}
}

// requireFault checks a compile error's code and message, and that Field is
// left for the caller to fill.
func requireFault(t *testing.T, err error, code, contains string) {
	t.Helper()
	require.Error(t, err)
	fe := fault.As(err)
	require.NotNil(t, fe, "want *fault.Error, got %T: %v", err, err)
	require.Equal(t, code, fe.Code, fe.Message)
	require.Empty(t, fe.Field)
	require.Contains(t, fe.Message, contains)
}

// TestCompileRoles covers SPEC A3: each role accepts its valid forms and
// rejects undeclared variables, unknown fields, session.state, and session
// where the session may not exist.
func TestCompileRoles(t *testing.T) {
	t.Parallel()
	const (
		ok        = ""
		badExpr   = fault.InvalidExpression
		badAction = fault.InvalidAction
	)
	tests := []struct {
		name     string
		role     expr.Role
		src      string
		code     string
		contains string
	}{
		// StartPredicate
		{"A3 start predicate: event.type", expr.StartPredicate, `event.type == "account.inserted"`, ok, ""},
		{"A3 start predicate: index form", expr.StartPredicate, `event["type"] == "account.inserted"`, ok, ""},
		{"A3 start predicate: every event field", expr.StartPredicate,
			`event.id != "" && event.data.x == 1 && event.commit_time > timestamp("2020-01-01T00:00:00Z") && event.position > 0`, ok, ""},
		{"A3 start predicate: macros and strings", expr.StartPredicate,
			`has(event.data.items) && event.data.items.exists(i, i.id == 1) && event.type.startsWith("acc") && event.type.lowerAscii() == event.type`, ok, ""},
		{"A3 start predicate: comprehension variable may shadow", expr.StartPredicate,
			`[{"type": "a"}].exists(event, event.type == "a")`, ok, ""},
		{"A3 start predicate: session", expr.StartPredicate, `session.id == "x"`, badAction,
			"a start predicate cannot read session: the session may not exist yet"},
		{"A3 start predicate: session inside a macro", expr.StartPredicate, `[1].exists(x, session.input.a == x)`, badAction,
			"cannot read session"},
		{"A3 start predicate: undeclared variable", expr.StartPredicate, `account.id == "x"`, badExpr,
			"undeclared reference to 'account'"},
		{"A3 start predicate: unknown event field", expr.StartPredicate, `event.kind == "x"`, badExpr,
			`event has no field "kind"`},
		{"A3 start predicate: unknown event field, index form", expr.StartPredicate, `event["kind"] == "x"`, badExpr,
			`event has no field "kind"`},
		{"A3 start predicate: computed event field", expr.StartPredicate, `event[event.type] == "x"`, badExpr,
			"event fields must be named literally"},
		{"A3 start predicate: whole event", expr.StartPredicate, `event == {}`, badExpr,
			"event cannot be used as a whole"},
		{"A3 start predicate: dot-prefixed variable", expr.StartPredicate, `.event.type == "x"`, badExpr,
			"write event instead of .event"},
		{"A3 start predicate: tool", expr.StartPredicate, `tool.input.a == 1`, badExpr,
			"a start predicate cannot read tool"},
		{"A3 start predicate: dyn result", expr.StartPredicate, `event.data.flag`, badExpr,
			"must produce bool, found dyn"},
		{"A3 start predicate: string result", expr.StartPredicate, `event.type`, badExpr,
			"must produce bool, found string"},
		{"A3 start predicate: syntax error", expr.StartPredicate, `event.type ==`, badExpr, "line 1, column 14"},
		{"A3 start predicate: type error", expr.StartPredicate, `event.position + "1" == 2`, badExpr,
			"found no matching overload"},
		{"A3 start predicate: empty", expr.StartPredicate, "  ", badExpr, "expression is empty"},
		{"A3 start predicate: object construction", expr.StartPredicate,
			`google.protobuf.Timestamp{seconds: 1} == event.commit_time`, badExpr, "object construction"},

		// ResumePredicate
		{"A3 resume predicate: event and session", expr.ResumePredicate,
			`event.type == "entry.inserted" && session.input.account_id == string(event.data.account_id) && session.id != ""`, ok, ""},
		{"A3 resume predicate: session index form", expr.ResumePredicate,
			`event.type == "a" && session["input"]["k"] == 1`, ok, ""},
		{"A3 resume predicate: session.state", expr.ResumePredicate, `event.type == "a" && session.state == "x"`, badAction,
			"session.state is not readable in expressions"},
		{"A3 resume predicate: session.state, index form", expr.ResumePredicate, `event.type == "a" && session["state"] == "x"`, badAction,
			"session.state is not readable in expressions"},
		{"A3 resume predicate: session.started_at", expr.ResumePredicate,
			`event.type == "a" && session.started_at < event.commit_time`, badAction,
			"session.started_at is not readable in a resume predicate (readable: session.id, session.input)"},
		{"A3 resume predicate: tool", expr.ResumePredicate, `event.type == "a" && tool.input == 1`, badExpr, "cannot read tool"},

		// StartMapping
		{"A3 start mapping: string", expr.StartMapping, `string(event.data.account_id)`, ok, ""},
		{"A3 start mapping: dyn", expr.StartMapping, `event.data.items`, ok, ""},
		{"A3 start mapping: map and timestamp", expr.StartMapping, `{"at": event.commit_time, "n": event.position}`, ok, ""},
		{"A3 start mapping: session", expr.StartMapping, `session.input.a`, badAction,
			"a start mapping cannot read session: the session may not exist yet"},
		{"A3 start mapping: bytes", expr.StartMapping, `b"abc"`, badExpr, "must produce a JSON value; found bytes"},
		{"A3 start mapping: int map keys", expr.StartMapping, `{1: event.type}`, badExpr, "int map keys"},

		// ResumeID
		{"A3 resume id: string", expr.ResumeID, `string(event.data.account_id)`, ok, ""},
		{"A3 resume id: dyn", expr.ResumeID, `event.data.account_id`, badExpr,
			"a resume id must produce string, found dyn"},
		{"A3 resume id: session", expr.ResumeID, `session.id`, badAction, "a resume id cannot read session"},

		// SessionID
		{"A3 session id: from input", expr.SessionID, `string(session.input.account_id)`, ok, ""},
		{"A3 session id: event", expr.SessionID, `string(event.data.x)`, badExpr,
			"the session id expression cannot read event"},
		{"A3 session id: session.id", expr.SessionID, `session.id`, badAction, "session.id is not readable"},
		{"A3 session id: int", expr.SessionID, `1`, badExpr, "must produce string, found int"},

		// Ends
		{"E1 ends: started_at plus duration", expr.Ends, `session.started_at + duration('720h')`, ok, ""},
		{"E1 ends: from input", expr.Ends, `session.started_at + duration(string(session.input.days * 24) + "h")`, ok, ""},
		{"E1 ends: timestamp literal", expr.Ends, `timestamp("2030-01-01T00:00:00Z")`, ok, ""},
		{"E1 ends: duration is not a timestamp", expr.Ends, `duration('720h')`, badExpr,
			"session.ends must produce timestamp, found duration"},
		{"E1 ends: dyn", expr.Ends, `session.input.until`, badExpr, "must produce timestamp, found dyn"},
		{"E1 ends: session.state", expr.Ends, `session.state.until`, badAction, "session.state is not readable in expressions"},
		{"E1 ends: event", expr.Ends, `event.commit_time`, badExpr, "session.ends cannot read event"},

		// ToolMapping
		{"X1 tool mapping: input", expr.ToolMapping, `tool.input.account_id`, ok, ""},
		{"X1 tool mapping: index form", expr.ToolMapping, `tool["input"]["account_id"]`, ok, ""},
		{"X1 tool mapping: unknown tool field", expr.ToolMapping, `tool.name`, badExpr, `tool has no field "name" (fields: input)`},
		{"X1 tool mapping: event", expr.ToolMapping, `event.data`, badExpr, "a tool session mapping cannot read event"},
		{"X1 tool mapping: session", expr.ToolMapping, `session.input`, badAction, "cannot read session: the session may not exist yet"},

		// EventPredicate and ConcurrencyKey (issue 15: no session block)
		{"A3 event predicate: event", expr.EventPredicate, `event.type == "entry.inserted" && event.data.n > 1`, ok, ""},
		{"A3 event predicate: session", expr.EventPredicate, `session.id == "x"`, badAction,
			"a trigger of an action without a session block cannot read session: the action has no session block, so there is no session"},
		{"A3 event predicate: not bool", expr.EventPredicate, `event.type`, badExpr, "must produce bool"},
		{"A3 concurrency key: string", expr.ConcurrencyKey, `string(event.data.account_id)`, ok, ""},
		{"A3 concurrency key: session", expr.ConcurrencyKey, `session.input.a`, badAction, "concurrency.key cannot read session"},
		{"A3 concurrency key: int", expr.ConcurrencyKey, `event.position`, badExpr, "concurrency.key must produce string, found int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(tt.role, tt.src)
			if tt.code == ok {
				require.NoError(t, err)
				require.Equal(t, tt.src, p.Source())
				require.Equal(t, tt.role, p.Role())
				return
			}
			require.Nil(t, p)
			requireFault(t, err, tt.code, tt.contains)
		})
	}
}

// TestResumeConstraint covers the SPEC A3 rule that a resume predicate must
// constrain the events it selects through event fields.
func TestResumeConstraint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src string
		ok  bool
	}{
		{`event.type == "a"`, true},
		{`event.type == "a" && session.input.x == event.data.x`, true},
		{`session.id == string(event.data.id) && event.type in ["a", "b"]`, true},
		{`event.type == "a" || event.type == "b"`, true},
		{`true && event.data.kind == "a"`, true},
		{`true`, false},
		{`session.id == "x"`, false},
		{`session.id == string(event.data.id)`, false},
		{`event.type == "a" || session.id == "b"`, false},
		{`event.type == "a" || true`, false},
		{`session.id == "x" && (event.type == "a" || session.id == "y")`, false},
		{`1 == 1 && session.input.x == 2`, false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(expr.ResumePredicate, tt.src)
			if tt.ok {
				require.NoError(t, err)
				require.NoError(t, expr.ValidateResumeConstraint(p))
				return
			}
			requireFault(t, err, fault.InvalidAction, `add a condition on event fields alone, joined to the rest with &&, such as event.type == "..."`)
		})
	}

	t.Run("A3 rule applied to a start predicate on request", func(t *testing.T) {
		t.Parallel()
		p, err := expr.Compile(expr.StartPredicate, `true`)
		require.NoError(t, err)
		requireFault(t, expr.ValidateResumeConstraint(p), fault.InvalidAction, "must constrain the events it selects")
	})
}

// TestEventTypes covers the pinning of event types used to route events to
// triggers (A1 triggers, S2/S4 delivery).
func TestEventTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src   string
		types []string
		ok    bool
	}{
		{`event.type == "account.inserted"`, []string{"account.inserted"}, true},
		{`"account.inserted" == event.type`, []string{"account.inserted"}, true},
		{`event["type"] == "a"`, []string{"a"}, true},
		{`event.type in ["a", "b", "a"]`, []string{"a", "b"}, true},
		{`event.data.x == 1 && event.type == "a"`, []string{"a"}, true},
		{`(event.data.x == 1 && event.type == "a") && event.position > 3`, []string{"a"}, true},
		{`event.type in ["a", "b"] && event.type == "b"`, []string{"b"}, true},
		{`event.type == "a" && event.type == "b"`, []string{}, true},
		{`event.type == "a" || event.type == "b"`, nil, false},
		{`event.type != "a"`, nil, false},
		{`event.type in ["a", event.id]`, nil, false},
		{`event.type.startsWith("a")`, nil, false},
		{`[{"type": "a"}].exists(event, event.type == "a")`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(expr.StartPredicate, tt.src)
			require.NoError(t, err)
			types, ok := p.EventTypes()
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.types, types)
		})
	}
}

// TestInputPaths covers the paths into session.input (and tool.input) that
// A3 checks against inputSchema.
func TestInputPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		role  expr.Role
		src   string
		paths [][]string
		reads bool
	}{
		{expr.SessionID, `string(session.input.account_id)`, [][]string{{"account_id"}}, true},
		{expr.SessionID, `string(session.input.a["b"].c)`, [][]string{{"a", "b", "c"}}, true},
		{expr.SessionID, `string(session["input"]["a"])`, [][]string{{"a"}}, true},
		{expr.SessionID, `string(session.input.a[session.input.k].c)`, [][]string{{"a"}, {"k"}}, true},
		{expr.SessionID, `string(session.input.items[0].id)`, [][]string{{"items", "0", "id"}}, true},
		{expr.SessionID, `string(session.input.items.all(i, i.ok))`, [][]string{{"items"}}, true},
		{expr.SessionID, `string(has(session.input.x.y)) + string(session.input.x.y)`, [][]string{{"x", "y"}}, true},
		{expr.SessionID, `string(session.input)`, [][]string{}, true},
		{expr.Ends, `session.started_at + duration(string(session.input.days) + "h")`, [][]string{{"days"}}, true},
		{expr.ResumePredicate, `event.type == "a" && session.input.account_id == event.data.account_id`, [][]string{{"account_id"}}, true},
		{expr.ResumePredicate, `event.type == "a"`, [][]string{}, false},
		{expr.ToolMapping, `{"a": tool.input.a, "b": tool["input"].b.c}`, [][]string{{"a"}, {"b", "c"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(tt.role, tt.src)
			require.NoError(t, err)
			require.Equal(t, tt.paths, p.InputPaths())
			require.Equal(t, tt.reads, p.ReadsSession())
		})
	}
}

// TestNumbers covers HARD-PARTS 6: JSON integers stay exact through
// predicates and mappings, and int/double comparisons work.
func TestNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	predicates := []string{
		`event.data.account_id == 9007199254740993123`,
		`event.data.account_id != 9007199254740993122`,
		`string(event.data.account_id) == "9007199254740993123"`,
		`event.data.amount > 10.5`,
		`event.data.amount == 12.0`,
		`event.data.items[1].id == 2.5`,
		`event.data.items.exists(i, i.id == 1)`,
		`event.data.big == 18446744073709551615u`,
		`event.data.big > 9223372036854775807`,
	}
	v := vars(t)
	v.Event.Data = decode(t, `{"account_id": 9007199254740993123, "amount": 12, "items": [{"id": 1}, {"id": 2.5}], "big": 18446744073709551615}`)
	for _, src := range predicates {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(expr.StartPredicate, src)
			require.NoError(t, err)
			got, err := p.EvalBool(ctx, v)
			require.NoError(t, err)
			require.True(t, got)
		})
	}

	t.Run("HARD-PARTS 6 mapping round trip", func(t *testing.T) {
		t.Parallel()
		p, err := expr.Compile(expr.StartMapping, `event.data`)
		require.NoError(t, err)
		out, err := p.Eval(ctx, v)
		require.NoError(t, err)
		m := out.(map[string]any)
		require.Equal(t, int64(9007199254740993123), m["account_id"])
		require.Equal(t, uint64(18446744073709551615), m["big"])
		require.Equal(t, 2.5, m["items"].([]any)[1].(map[string]any)["id"])
		b, err := json.Marshal(out)
		require.NoError(t, err)
		require.JSONEq(t, `{"account_id": 9007199254740993123, "amount": 12, "items": [{"id": 1}, {"id": 2.5}], "big": 18446744073709551615}`, string(b))
		require.Contains(t, string(b), `9007199254740993123`)
	})

	t.Run("HARD-PARTS 6 huge integers become doubles", func(t *testing.T) {
		t.Parallel()
		p, err := expr.Compile(expr.StartMapping, `event.data.n`)
		require.NoError(t, err)
		w := vars(t)
		w.Event.Data = decode(t, `{"n": 123456789012345678901234567890}`)
		out, err := p.Eval(ctx, w)
		require.NoError(t, err)
		require.InDelta(t, 1.2345678901234568e29, out, 1e14)
	})
}

// TestEvalResults covers the conversion of results to JSON-ready Go values.
func TestEvalResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		role expr.Role
		src  string
		want any
	}{
		{expr.StartMapping, `event.type`, "entry.inserted"},
		{expr.StartMapping, `event.position`, int64(42)},
		{expr.StartMapping, `event.data.flag`, true},
		{expr.StartMapping, `null`, nil},
		{expr.StartMapping, `event.commit_time`, time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)},
		{expr.StartMapping, `duration('1h')`, "1h0m0s"},
		{expr.StartMapping, `[event.id, 1u, 1.5]`, []any{"5b0b3c1e-8f5a-4a53-9a57-8b1f0a3c2d11", uint64(1), 1.5}},
		{expr.StartMapping, `{"a": {"b": [event.data.amount]}}`, map[string]any{"a": map[string]any{"b": []any{int64(12)}}}},
		{expr.StartMapping, `"%s-%d".format([event.type, event.position])`, "entry.inserted-42"},
		{expr.ResumeID, `string(event.data.account_id)`, "9007199254740993123"},
		{expr.SessionID, `session.input.account_id + "/" + string(session.input.days)`, "9007199254740993123/30"},
		{expr.Ends, `session.started_at + duration('720h')`, time.Date(2025, 3, 31, 0, 0, 0, 0, time.UTC)},
		{expr.ToolMapping, `tool.input.account_id`, int64(7)},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(tt.role, tt.src)
			require.NoError(t, err)
			got, err := p.Eval(ctx, vars(t))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("typed helpers", func(t *testing.T) {
		t.Parallel()
		v := vars(t)
		pred, err := expr.Compile(expr.ResumePredicate, `event.type == "entry.inserted" && session.id == "acc-1"`)
		require.NoError(t, err)
		ok, err := pred.EvalBool(ctx, v)
		require.NoError(t, err)
		require.True(t, ok)

		id, err := expr.Compile(expr.SessionID, `string(session.input.days)`)
		require.NoError(t, err)
		s, err := id.EvalString(ctx, v)
		require.NoError(t, err)
		require.Equal(t, "30", s)

		ends, err := expr.Compile(expr.Ends, `session.started_at + duration('24h')`)
		require.NoError(t, err)
		at, err := ends.EvalTime(ctx, v)
		require.NoError(t, err)
		require.Equal(t, time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC), at)
	})
}

// TestEvalErrors covers the short evaluation errors that become diagnostics
// and intake reasons (S5, E1).
func TestEvalErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name     string
		role     expr.Role
		src      string
		vars     func(expr.Vars) expr.Vars
		contains string
	}{
		{"missing key", expr.StartPredicate, `event.data.missing == 1`, nil, "no such key: missing (line 1, column 11)"},
		{"type mismatch", expr.StartPredicate, `event.data.note + 1 == 2`, nil, "does not accept values of these types (line 1, column 17)"},
		{"bad conversion", expr.Ends, `timestamp(session.input.account_id)`, nil, "timestamp"},
		{"non-string map key", expr.StartMapping, `{event.data.amount: 1}`, nil, "JSON object keys must be strings"},
		{"infinity", expr.StartMapping, `1.0 / 0.0`, nil, "JSON cannot represent"},
		{"bytes at run time", expr.StartMapping, `dyn(b"x")`, nil, "bytes value, which JSON cannot represent"},
		{"no event", expr.StartPredicate, `event.type == "a"`, func(v expr.Vars) expr.Vars { v.Event = nil; return v }, "no event"},
		{"no session", expr.SessionID, `string(session.input.a)`, func(v expr.Vars) expr.Vars { v.Session = nil; return v }, "no session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := expr.Compile(tt.role, tt.src)
			require.NoError(t, err)
			v := vars(t)
			if tt.vars != nil {
				v = tt.vars(v)
			}
			_, err = p.Eval(ctx, v)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.contains)
			require.Nil(t, fault.As(err), "eval errors are plain errors")
		})
	}
}

// blowup nests five maps over ten-element lists: 100,000 innermost
// evaluations, about 2.5 million cost units whatever the event.
const blowup = `[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, ` +
	`[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, a+b+c+d+e))))).size() > 0`

// within nests four maps: about 230,000 cost units, under MaxCost.
const within = `[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, ` +
	`[1,2,3,4,5,6,7,8,9,10].map(d, a*b*c*d)))).size() > 0`

// perItem costs about 250 units per element of event.data.items: fine on
// ordinary events, over MaxCost on one with 10,000 items.
const perItem = `event.data.items.map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, a+b+c))).size() > 0`

func TestCostLimit(t *testing.T) {
	t.Parallel()
	// An expression that exceeds MaxCost on every evaluation can never
	// work: refused at compile (issue 10).
	_, err := expr.Compile(expr.StartPredicate, blowup)
	requireFault(t, err, fault.InvalidExpression, "every evaluation of this expression costs at least 2466653 units; the limit is 1000000")

	// One whose cost follows the event is refused at run time on an event
	// too large for it.
	p, err := expr.Compile(expr.StartPredicate, perItem)
	require.NoError(t, err)
	v := vars(t)
	v.Event.Data = map[string]any{"items": make([]any, 10_000)}
	for i := range 10_000 {
		v.Event.Data.(map[string]any)["items"].([]any)[i] = json.Number("1")
	}
	_, err = p.Eval(context.Background(), v)
	require.ErrorIs(t, err, expr.ErrCostLimit)
	require.Contains(t, err.Error(), "cost limit 1000000")
	require.Nil(t, fault.As(err), "eval errors are plain errors")
	v.Event.Data = decode(t, `{"items": [1, 2, 3]}`)
	ok, err := p.EvalBool(context.Background(), v)
	require.NoError(t, err)
	require.True(t, ok)

	p, err = expr.Compile(expr.StartPredicate, within)
	require.NoError(t, err)
	ok, err = p.EvalBool(context.Background(), vars(t))
	require.NoError(t, err)
	require.True(t, ok)
}

// lateCancel is a context that reports no error to the first Err call (made
// before evaluation starts) and is cancelled for everything after, so the
// test sees cancellation arrive during evaluation without sleeping.
type lateCancel struct {
	context.Context
	calls atomic.Int32
	done  chan struct{}
}

func newLateCancel() *lateCancel {
	c := &lateCancel{Context: context.Background(), done: make(chan struct{})}
	close(c.done)
	return c
}

func (c *lateCancel) Done() <-chan struct{} { return c.done }

func (c *lateCancel) Err() error {
	if c.calls.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	p, err := expr.Compile(expr.StartPredicate, within)
	require.NoError(t, err)

	t.Run("cancelled before evaluation", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := p.Eval(ctx, vars(t))
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "evaluation stopped: context canceled", err.Error())
	})
	t.Run("cancelled during evaluation", func(t *testing.T) {
		t.Parallel()
		ctx := newLateCancel()
		_, err := p.Eval(ctx, vars(t))
		require.ErrorIs(t, err, context.Canceled)
		require.Greater(t, ctx.calls.Load(), int32(1))
	})
	t.Run("deadline passed", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		_, err := p.Eval(ctx, vars(t))
		require.True(t, errors.Is(err, context.DeadlineExceeded), err)
	})
}

func TestSourceLimit(t *testing.T) {
	t.Parallel()
	src := `event.type == "` + strings.Repeat("a", expr.MaxSourceBytes) + `"`
	_, err := expr.Compile(expr.StartPredicate, src)
	requireFault(t, err, fault.InvalidExpression, "the limit is 8192 bytes")
}

func TestRoleString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "start predicate", expr.StartPredicate.String())
	require.Equal(t, "tool mapping", expr.ToolMapping.String())
	require.Equal(t, "Role(99)", expr.Role(99).String())
	_, err := expr.Compile(expr.Role(99), `true`)
	require.Error(t, err)
}

// TestConcurrentEval shares one program between goroutines (run with -race).
func TestConcurrentEval(t *testing.T) {
	t.Parallel()
	pred, err := expr.Compile(expr.ResumePredicate,
		`event.type == "entry.inserted" && session.input.account_id == string(event.data.account_id) && event.data.items.exists(i, i.id == 1)`)
	require.NoError(t, err)
	mapping, err := expr.Compile(expr.StartMapping, `{"id": event.data.account_id, "n": event.position}`)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			v := vars(t)
			v.Event.Position = int64(g)
			for range 50 {
				ok, err := pred.EvalBool(context.Background(), v)
				if err != nil || !ok {
					errs <- errors.Join(err, errors.New("predicate did not match"))
					return
				}
				out, err := mapping.Eval(context.Background(), v)
				if err != nil {
					errs <- err
					return
				}
				if out.(map[string]any)["n"] != int64(g) {
					errs <- errors.New("mapping saw another goroutine's event")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func BenchmarkPredicateEval(b *testing.B) {
	p, err := expr.Compile(expr.ResumePredicate,
		`event.type == "entry.inserted" && event.data.amount > 10 && session.input.account_id == string(event.data.account_id)`)
	require.NoError(b, err)
	v := vars(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.EvalBool(ctx, v)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// TestEventGuard_S4 checks the event-only part of a resume predicate that reads session.
func TestEventGuard_S4(t *testing.T) {
	t.Parallel()
	p, err := expr.Compile(expr.ResumePredicate, `event.type == "entry.inserted" && event.data.amount > 100 && session.input.tier == "gold"`)
	require.NoError(t, err)
	g, err := p.EventGuard()
	require.NoError(t, err)
	require.NotNil(t, g)
	require.False(t, g.ReadsSession())
	require.Contains(t, g.Source(), "event.data.amount > 100")
	require.NotContains(t, g.Source(), "session")

	plain, err := expr.Compile(expr.ResumePredicate, `event.type == "entry.inserted"`)
	require.NoError(t, err)
	g, err = plain.EventGuard()
	require.NoError(t, err)
	require.Nil(t, g, "a predicate without session terms needs no guard")
}

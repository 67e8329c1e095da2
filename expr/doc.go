// Package expr holds the CEL environments of actionsledger: one per place an
// expression can appear in an action definition (its role), each declaring
// only what that place may read, plus the analysis the action validator
// needs (SPEC A3) and evaluation with bounded cost.
//
// # Roles
//
// Every expression is compiled for one Role. A variable or field that the
// role does not list is a compile error that names it.
//
//	role             where it appears                       reads                                     produces
//	StartPredicate   trigger event, start role              event                                     bool
//	EventPredicate   trigger event, no session block        event                                     bool
//	ConcurrencyKey   concurrency.key, no session block      event                                     string
//	ResumePredicate  trigger event, resume role             event, session.id, session.input          bool
//	StartMapping     session.start.input.<property>         event                                     any JSON value
//	ResumeID         session.resume.id                      event                                     string
//	SessionID        session.id                             session.input                             string
//	Ends             session.ends                           session.input, session.started_at         timestamp
//	ToolMapping      tool session.start.input.<property>    tool.input                                any JSON value
//	RequestMapping   mcp.session.start.input.<property>     request                                   any JSON value
//	RequestID        mcp.session.resume.id                  request                                   string
//
// event has the fields id (string), type (string), data (any JSON),
// commit_time (timestamp) and position (int); request (issue 17) has
// arguments (any JSON), principal (string) and mcp_session (string). session.state, and every
// session field a role does not list, are never readable. Fields may be
// written event.type or event["type"]; both are checked alike. The variables
// themselves cannot be used whole (event == x): read a field.
//
// Predicates must be bool and ids must be string even where the value would
// be right at run time: event.data.flag has type dyn, so write
// event.data.flag == true, and string(event.data.account_id) for an id.
//
// A resume predicate must also constrain the events it selects (see
// ValidateResumeConstraint); Compile enforces that rule. Compile reports
// problems as *fault.Error values: fault.InvalidExpression for what does not
// parse or type-check, fault.InvalidAction for the session rules of A3.
//
// The environments enable the standard macros (has, all, exists,
// exists_one, map, filter), the string extension library (ext.Strings),
// comparisons across int, uint and double (event.data.amount > 10.5 works
// when amount is an integer), and UTC as the default time zone of timestamp
// accessors. Expressions are limited to MaxSourceBytes.
//
// # Numbers
//
// JSON numbers must not pass through float64 (HARD-PARTS 6): an id such as
// 9007199254740993123 would silently change. Callers decode JSON with
// UseNumber and hand json.Number values to Eval untouched. As a value is
// read, a number written without a fraction or exponent becomes a CEL int if
// it fits in int64, else a CEL uint if it fits in uint64; everything else
// becomes a double. So `event.data.n == 9007199254740993123` is exact, and
// string(event.data.n) gives back the digits that were sent. A number written
// 1.0 or 1e3 is a double, and string() of a double uses exponent notation for
// large values: keep identifiers as JSON integers or strings.
//
// Results come back as values encoding/json writes faithfully: int64 for
// int, uint64 for uint, float64 for double (NaN and infinities are errors),
// time.Time in UTC for timestamps, and a Go duration string ("1h0m0s") for
// durations. A map with a non-string key, bytes or a type value is an error.
//
// # Cost, size and cancellation
//
// Every evaluation is limited to MaxCost cost units and checks its context
// every few comprehension iterations, so neither a costly expression nor a
// cancelled request keeps a goroutine busy. cel-go prices a call only after
// it returns, so the calls that can build much more than their inputs (+ on
// strings and bytes, replace, join, format, split, strings.quote, and
// matches with a pattern from data) are sized from their evaluated
// arguments first: an evaluation may build MaxBuildBytes in all, and a call
// that would go beyond is refused before it allocates (ErrSizeLimit). A
// result is at most MaxResultBytes of JSON. The same limits apply when
// constant parts are folded at compile.
//
// Compile also refuses, with cel-go's cost estimator, an expression that
// exceeds MaxCost on every evaluation, or whose cost on the largest event,
// session input or tool input (jsonvalue.MaxBytes) exceeds MaxCost and grows
// faster than the data (see estimate.go), and a regular expression written
// in the source that compiles beyond MaxRegexInsts. A Program is immutable:
// compile once per action version and share it between goroutines.
package expr

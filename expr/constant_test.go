package expr_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/expr"
)

// TestConstant_Issue10: an expression that reads nothing once its constant
// parts are folded is constant, and its evaluation error (if any) is the
// one every evaluation gives; one that reads a variable where it matters
// is not constant.
func TestConstant_Issue10(t *testing.T) {
	for _, tt := range []struct {
		role  expr.Role
		src   string
		value any
		err   string // "" for no error
	}{
		{expr.StartMapping, `1 + 2`, int64(3), ""},
		{expr.StartMapping, `string(1 / 0)`, nil, "division by zero"},
		{expr.ResumeID, `["a", "b"][2]`, nil, "index out of bounds"},
		{expr.StartMapping, `false ? event.id : "x"`, "x", ""},
		{expr.StartMapping, `[1, 2].map(x, x * 2)`, []any{int64(2), int64(4)}, ""},
		{expr.Ends, `timestamp("2030-01-02T03:04:05Z")`, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), ""},
		{expr.StartMapping, `1.0 / 0.0`, nil, "JSON"},
	} {
		p, err := expr.Compile(tt.role, tt.src)
		require.NoError(t, err, tt.src)
		k, ok := p.Constant()
		require.True(t, ok, tt.src)
		if tt.err != "" {
			require.Error(t, k.Err, tt.src)
			require.Contains(t, k.Err.Error(), tt.err, tt.src)
			continue
		}
		require.NoError(t, k.Err, tt.src)
		require.Equal(t, tt.value, k.Value, tt.src)
	}
	for _, src := range []string{
		`event.id`,
		`string(event.data.n / 0)`,
		`true ? event.id : string(1 / 0)`,
		`[1, 2].exists(x, x == event.data.n) ? "a" : "b"`,
	} {
		p, err := expr.Compile(expr.StartMapping, src)
		require.NoError(t, err, src)
		_, ok := p.Constant()
		require.False(t, ok, src)
	}
}

// TestNeverTrue_Issue10: a predicate false or failing whatever the event,
// as a whole or in one condition joined with &&, is reported; one that
// reads event or session where it matters never is.
func TestNeverTrue_Issue10(t *testing.T) {
	for _, tt := range []struct {
		role expr.Role
		src  string
		why  string
	}{
		{expr.StartPredicate, `false`, "it is false whatever the event"},
		{expr.StartPredicate, `1 / 0 == 1`, "it fails whatever the event: division by zero"},
		{expr.StartPredicate, `event.type == "a" && ["a"].exists(x, x == "b")`, "it is false whatever the event"},
		{expr.StartPredicate, `event.type == "a" && event.data.n == 1 && ["a"][1] == "b"`, "its condition 3 of 3 joined with && (line 1, column 44) fails whatever the event: index out of bounds"},
		{expr.StartPredicate, `event.type == "a" && 1 / 0 == 1`, "division by zero"},
		{expr.StartPredicate, `event.type == "a" && (1 / 0 == 1 || [1][3] == 1)`, "in every alternative"},
		{expr.ResumePredicate, `event.type == "a" && session.id == "x" && [1][2] == 1`, "fails whatever the event"},
	} {
		p, err := expr.Compile(tt.role, tt.src)
		require.NoError(t, err, tt.src)
		why, never := p.NeverTrue()
		require.True(t, never, tt.src)
		require.Contains(t, why, tt.why, tt.src)
	}
	for _, tt := range []struct {
		role expr.Role
		src  string
	}{
		{expr.StartPredicate, `true`},
		{expr.StartPredicate, `event.type == "a"`},
		{expr.StartPredicate, `event.type == "a" && (1 / 0 == 1 || event.data.ok == true)`},
		{expr.StartPredicate, `event.data.n / 0 == 1`},
		{expr.StartPredicate, `event.type == "a" && [1, 2].exists(x, x == event.data.n)`},
		{expr.StartPredicate, `event.data.items.all(i, i.ok == true) || false`},
		{expr.ResumePredicate, `event.type == "a" && session.input.n == 1`},
		{expr.ResumePredicate, `event.type == "a" && session.id == string(event.data.id)`},
	} {
		p, err := expr.Compile(tt.role, tt.src)
		require.NoError(t, err, tt.src)
		why, never := p.NeverTrue()
		require.False(t, never, "%s: %s", tt.src, why)
	}
	// Other roles are never reported.
	p, err := expr.Compile(expr.StartMapping, `false`)
	require.NoError(t, err)
	_, never := p.NeverTrue()
	require.False(t, never)
}

// TestNeverTrueBounded_Issue10: judging conditions that cost the whole
// evaluation limit each stops once twice MaxCost is spent, so a predicate
// of many costly constant conditions is judged in bounded time.
func TestNeverTrueBounded_Issue10(t *testing.T) {
	const nest = `[1,2,3,4,5,6,7,8,9,10].exists(a, [1,2,3,4,5,6,7,8,9,10].exists(b, [1,2,3,4,5,6,7,8,9,10].exists(c, ` +
		`[1,2,3,4,5,6,7,8,9,10].exists(d, [1,2,3,4,5,6,7,8,9,10].exists(e, [1,2,3,4,5,6,7,8,9,10].exists(f, a+b+c+d+e+f < 0))))))`
	conds := []string{`event.type == "e"`}
	for range 20 {
		conds = append(conds, "(event.data.x == 1 || "+nest+")")
	}
	p, err := expr.Compile(expr.StartPredicate, strings.Join(conds, " && "))
	require.NoError(t, err)
	start := time.Now()
	_, never := p.NeverTrue()
	t.Logf("judged in %s", time.Since(start))
	require.False(t, never)
	// Each condition reads event, so none is evaluated at all; now the
	// same conditions alone.
	conds = conds[:1]
	for range 20 {
		conds = append(conds, nest)
	}
	start = time.Now()
	p, err = expr.Compile(expr.StartPredicate, strings.Join(conds, " && "))
	require.NoError(t, err)
	t.Logf("compiled in %s", time.Since(start))
	start = time.Now()
	why, never := p.NeverTrue()
	// The first costly condition is over MaxCost on every evaluation.
	require.True(t, never)
	require.Contains(t, why, "too costly")
	t.Logf("judged in %s", time.Since(start))
}

// TestFails_Issue10: a constant part that every evaluation runs and that
// fails makes the whole expression fail whatever it reads; one that an
// evaluation may skip does not.
func TestFails_Issue10(t *testing.T) {
	for _, tt := range []struct {
		role expr.Role
		src  string
		err  string
	}{
		{expr.StartMapping, `string(1 / 0)`, "division by zero"},
		{expr.StartMapping, `string(event.data.n) + string(1 / 0)`, "division by zero"},
		{expr.StartMapping, `{"a": event.id, "b": [1][5]}`, "index out of bounds"},
		{expr.Ends, `session.started_at + duration(string(1 / 0))`, "division by zero"},
		{expr.StartMapping, `event.data.items.map(x, x)[0] + [1][2]`, "index out of bounds"},
		{expr.StartMapping, `(1 / 0 == 1) ? event.id : "x"`, "division by zero"},
	} {
		p, err := expr.Compile(tt.role, tt.src)
		require.NoError(t, err, tt.src)
		err = p.Fails()
		require.Error(t, err, tt.src)
		require.Contains(t, err.Error(), tt.err, tt.src)
	}
	for _, tt := range []struct {
		role expr.Role
		src  string
	}{
		{expr.StartMapping, `event.id`},
		{expr.StartMapping, `event.data.ok == true ? string(1 / 0) : "x"`},
		{expr.StartMapping, `event.data.ok == true && 1 / 0 == 1`},
		{expr.StartMapping, `event.data.ok == true || [1][2] == 1`},
		{expr.StartMapping, `event.data.items.map(x, x / 0)`},
		{expr.StartMapping, `event.data.items.exists(x, x == 1) ? 1 : [1][2]`},
		{expr.Ends, `session.started_at + duration('720h')`},
	} {
		p, err := expr.Compile(tt.role, tt.src)
		require.NoError(t, err, tt.src)
		require.NoError(t, p.Fails(), tt.src)
	}
}

// TestConstantConcurrent_Issue10: a Program is shared between goroutines;
// its constant judgements are made once and read by all (run with -race).
func TestConstantConcurrent_Issue10(t *testing.T) {
	p, err := expr.Compile(expr.StartPredicate, `event.type == "a" && event.data.n == [1][3]`)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, never := p.NeverTrue()
			require.True(t, never)
			_, ok := p.Constant()
			require.False(t, ok)
			require.NoError(t, p.Fails())
			_, ok = p.StartOffset()
			require.False(t, ok)
		}()
	}
	wg.Wait()
}

// TestStartOffset_Issue10: an end that is the start moved by a constant
// duration gives that duration; other ends give none.
func TestStartOffset_Issue10(t *testing.T) {
	for src, want := range map[string]time.Duration{
		`session.started_at + duration('720h')`:   720 * time.Hour,
		`session.started_at`:                      0,
		`duration('-1h') + session.started_at`:    -time.Hour,
		`session.started_at - duration('90m')`:    -90 * time.Minute,
		`session.started_at - duration('-1h30m')`: 90 * time.Minute,
	} {
		p, err := expr.Compile(expr.Ends, src)
		require.NoError(t, err, src)
		d, ok := p.StartOffset()
		require.True(t, ok, src)
		require.Equal(t, want, d, src)
	}
	for _, src := range []string{
		`timestamp(session.input.until)`,
		`session.started_at + duration(string(session.input.d))`,
		`session.started_at - duration('1h') + duration('2h')`,
		`timestamp('2030-01-01T00:00:00Z')`,
	} {
		p, err := expr.Compile(expr.Ends, src)
		require.NoError(t, err, src)
		_, ok := p.StartOffset()
		require.False(t, ok, src)
	}
}

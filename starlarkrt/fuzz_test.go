package starlarkrt

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// fuzzLimits are small, so that each input runs in milliseconds and a
// hole in the accounting shows as allocation far beyond the budget.
var fuzzLimits = Limits{
	MaxSteps:  50_000,
	Timeout:   2 * time.Second,
	MaxOutput: 64 << 10,
	MaxSource: 64 << 10,
	MaxAlloc:  100_000,
	MaxMemory: 2 << 20,
}

// fuzzMargin is how much a run may allocate in all (runtime.MemStats
// TotalAlloc, garbage included) without failing FuzzStarlark: four times
// the budget (the charges are estimates), plus what the interpreter
// allocates for itself and never charges (call frames, argument tuples,
// iterators), at most a few hundred bytes per step.
var fuzzMargin = 4*fuzzLimits.MaxMemory + 512*int64(fuzzLimits.MaxSteps)

// FuzzStarlark compiles and runs arbitrary source under the sandbox with
// small limits, as a snippet (top-level code) and as a script (main with
// the event), issue 10 item 2. It fails when a Go panic escapes or is
// recovered as KindPanic (the fake host never panics, so that is a bug of
// the runtime or the interpreter), or when a run allocates more than
// fuzzMargin: the memory budget did not hold.
//
//	go test -run '^$' -fuzz '^FuzzStarlark$' -fuzztime 60s ./starlarkrt/
func FuzzStarlark(f *testing.F) {
	f.Add("def main(event):\n    return event\nresult = main(None)\n", []byte(`{"a": [1, 2.5, "x"]}`))
	f.Add("x = []\nfor i in range(2000):\n    x.append([0] * 999999)\nresult = len(x)\n", []byte(`null`))
	f.Fuzz(func(t *testing.T, src string, event []byte) {
		ev := jsonvalue.Value(event)
		if jsonvalue.Check(event, "event") != nil {
			ev = nil
		}
		// Compile outside the measurement: the cache keeps the program.
		_, _ = compileIn(snippetDialect, "fuzz.star", src)
		_, _ = compile("fuzz.star", src)
		fuzzRun(t, "snippet", func() error {
			_, err := RunSnippet(context.Background(), "fuzz.star", src, fuzzSnippetHost{}, fuzzLimits)
			return err
		})
		fuzzRun(t, "script", func() error {
			_, err := Call(context.Background(), "fuzz.star", src, "main", ev, benchHost{}, fuzzLimits)
			return err
		})
	})
}

// fuzzRun runs one input and checks it. TotalAlloc counts every
// goroutine of the process, so an excess may be another's (a script
// abandoned by an earlier test); the run is deterministic, so the input
// fails only if it exceeds the margin three times in a row.
func fuzzRun(t *testing.T, what string, run func() error) {
	var allocated int64
	var err error
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = run()
		runtime.ReadMemStats(&after)
		if se, ok := err.(*ScriptError); ok && se.Kind == KindPanic {
			t.Fatalf("%s: %s\n%s", what, se.Message, se.GoStack)
		}
		if allocated = int64(after.TotalAlloc - before.TotalAlloc); allocated <= fuzzMargin {
			return
		}
	}
	t.Fatalf("%s allocated %d bytes, more than %d for a budget of %d (error: %v)", what, allocated, fuzzMargin, fuzzLimits.MaxMemory, err)
}

type fuzzSnippetHost struct{}

func (fuzzSnippetHost) CallTool(_ context.Context, _ string, in jsonvalue.Value) (jsonvalue.Value, error) {
	return in, nil
}
func (fuzzSnippetHost) Now() time.Time { return time.Unix(0, 0) }

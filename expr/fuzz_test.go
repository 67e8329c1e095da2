package expr_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// maxFuzzAlloc bounds what one compile and evaluation may allocate: the
// size budget, what the cost limit lets linear calls build after it, and
// the result, with room to spare. An unbounded call takes gigabytes.
const maxFuzzAlloc = 256 << 20

// hangAfter is how long one compile and evaluation may take, while
// fuzzing, before the fuzz target reports a hang; MaxCost is about 50 ms of
// CPU. The seed corpus that `go test` runs has no watchdog (a hang there
// meets the test binary's timeout): on a loaded machine with -race a
// wall-clock bound is a flaky timing assertion.
const hangAfter = 60 * time.Second

// fuzzing reports whether the test binary runs with -fuzz.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzCEL compiles arbitrary expression text for a role and evaluates it
// over arbitrary event JSON, which is also the session input and tool
// input (issue 10 item 3). Properties: no panic; compile errors are
// *fault.Error values and evaluation errors plain errors; a result is a
// value jsonvalue.Encode writes; and neither allocates more than
// maxFuzzAlloc bytes.
func FuzzCEL(f *testing.F) {
	f.Fuzz(func(t *testing.T, src string, data []byte, role int) {
		r := expr.Role(1 + uint(role)%7)
		// A hang would otherwise only stall the fuzzer: crash the worker,
		// which records the input.
		if fuzzing() {
			watchdog := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("%s %q over %q took over %s", r, src, data, hangAfter)) })
			defer watchdog.Stop()
		}
		before := allocated()
		defer func() {
			if grown := allocated() - before; grown > maxFuzzAlloc {
				t.Fatalf("%s %q over %d bytes of data allocated %d bytes", r, src, len(data), grown)
			}
		}()
		p, err := expr.Compile(r, src)
		if err != nil {
			if fault.As(err) == nil {
				t.Fatalf("compile error %v (%T) is not a fault", err, err)
			}
			return
		}
		d := json.NewDecoder(strings.NewReader(string(data)))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			v = string(data)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := p.Eval(ctx, expr.Vars{
			Event: &expr.Event{ID: "5b0b3c1e-8f5a-4a53-9a57-8b1f0a3c2d11", Type: "fuzz.inserted", Data: v,
				CommitTime: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Position: 42},
			Session:   &expr.Session{ID: "s-1", Input: v, StartedAt: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
			ToolInput: v,
		})
		if err != nil {
			if fault.As(err) != nil {
				t.Fatalf("evaluation error %v is a fault", err)
			}
			return
		}
		if _, err := jsonvalue.Encode(out); err != nil {
			t.Fatalf("result %#v does not encode: %v", out, err)
		}
	})
}

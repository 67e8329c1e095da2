package starlarkrt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// benchHost answers every host call at once.
type benchHost struct{}

func (benchHost) LedgerGet(context.Context, string, string) (jsonvalue.Value, bool, error) {
	return jsonvalue.Value(`{"amount": 100}`), true, nil
}
func (benchHost) LedgerPut(context.Context, string, string, jsonvalue.Value) (int64, error) {
	return 1, nil
}
func (benchHost) Session(context.Context, string, string) (*SessionView, error) { return nil, nil }
func (benchHost) CallTool(_ context.Context, _ string, in jsonvalue.Value) (jsonvalue.Value, error) {
	return in, nil
}
func (benchHost) Now() time.Time { return time.Unix(0, 0) }

// benchSource is a small turn handler: read a balance, apply the turn's
// entries, write it back.
const benchSource = `
def apply(balance, entry):
    if entry["kind"] == "credit":
        return balance + entry["amount"]
    return balance - entry["amount"]

def main(event):
    current = ledger.get("balances", event["session"]["id"])
    balance = current["amount"] if current else 0
    for entry in event["inputs"]:
        balance = apply(balance, entry)
    ledger.put("balances", event["session"]["id"], {"amount": balance})
    return {"state": {"balance": balance}, "status": "OPEN", "output": "balance %d" % balance}
`

var benchEvent = jsonvalue.Value(`{"session": {"id": "acc-1", "input": {}}, "inputs": [
    {"kind": "credit", "amount": 25}, {"kind": "debit", "amount": 5}, {"kind": "credit", "amount": 9007199254740993}]}`)

// BenchmarkCall is a call of a cached program: what every call after the
// first costs.
//
// Caching is worth it. Measured on the development machine (2 vCPUs,
// go test -bench . -benchmem, noisy): a cached call of benchSource takes
// about 30µs and 185 allocations; the same call compiling its source
// (BenchmarkCallUncached) takes 110-150µs and 568 allocations, three to
// four times as much, nearly all of it the compile (BenchmarkCompile,
// 85-120µs). An action version's source never changes, so the cache keyed
// by (file name, sha256(source)) compiles once per version.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	if _, err := Call(ctx, "bench.star", benchSource, "main", benchEvent, benchHost{}, Limits{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Call(ctx, "bench.star", benchSource, "main", benchEvent, benchHost{}, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallUncached changes the source every time, so every call
// compiles: what a call would cost without the cache.
func BenchmarkCallUncached(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		src := benchSource + fmt.Sprintf("# %d\n", i)
		if _, err := Call(ctx, "bench.star", src, "main", benchEvent, benchHost{}, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompile is parse, rewrite, resolve and compile alone.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compileSource("bench.star", benchSource); err != nil {
			b.Fatal(err)
		}
	}
}

// arithmeticLoop is dominated by guarded operators (+, +=, *).
const arithmeticLoop = `
def main(event):
    total = 0
    for i in range(100000):
        total += i * 2 + 1
    return total
`

// BenchmarkGuardedArithmetic and BenchmarkPlainArithmetic compare the
// same loop with the guarded operators of rewrite.go and in plain
// starlark-go, to show what the guards cost.
func BenchmarkGuardedArithmetic(b *testing.B) {
	ctx := context.Background()
	lim := Limits{MaxSteps: 1 << 40}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Call(ctx, "bench.star", arithmeticLoop, "main", nil, benchHost{}, lim); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlainArithmetic(b *testing.B) {
	_, prog, err := starlark.SourceProgramOptions(&syntax.FileOptions{}, "bench.star", arithmeticLoop, starlark.StringDict{}.Has)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		thread := &starlark.Thread{}
		globals, err := prog.Init(thread, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := starlark.Call(thread, globals["main"], starlark.Tuple{starlark.None}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// containerLoop builds and reads lists and dicts: literals, a
// comprehension, append, index assignment, slices and methods, each of
// which the memory accounting charges (issue 10 item 2).
const containerLoop = `
def main(event):
    rows = []
    by_key = {}
    for i in range(2000):
        row = {"id": i, "name": "row", "tags": [i % 3, i % 5]}
        rows.append(row)
        by_key[str(i % 100)] = row
    evens = [r["id"] for r in rows if r["id"] % 2 == 0]
    head = rows[:10]
    names = ",".join([r["name"] for r in head])
    return [len(rows), len(by_key), len(evens), len(names), sorted(by_key.keys())[:3]]
`

// BenchmarkGuardedContainers runs containerLoop: what the charges cost on
// container-heavy code. Measured on the development machine (2 vCPUs,
// shared and noisy; the fastest of five one-second runs): 5.5ms before the
// memory accounting, 7.8ms after (user CPU 4.5ms and 6.0ms per run), with
// 19,173 allocations per run instead of 14,152. BenchmarkGuardedArithmetic
// did not change (88-93ms either way, within the noise).
func BenchmarkGuardedContainers(b *testing.B) {
	ctx := context.Background()
	lim := Limits{MaxSteps: 1 << 40}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Call(ctx, "bench.star", containerLoop, "main", nil, benchHost{}, lim); err != nil {
			b.Fatal(err)
		}
	}
}

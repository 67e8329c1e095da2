package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/actionsledger/actionsledger/server"
)

// BenchmarkIssue12TurnTracing measures one turn end to end (an entry
// written through GraphQL, dispatched, its turn run and committed) with
// tracing off and on (every span recorded, batched to an exporter that
// drops them: the cost of recording, not of the network). Issue 12 asks
// for the figure, not a bound.
//
//	go test -run '^$' -bench Issue12TurnTracing -benchtime 200x ./server/
func BenchmarkIssue12TurnTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			cfg := server.Config{}
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				cfg.TracerProvider = tp
			}
			e := newSteppedEnv(b, cfg)
			e.createMonitor(b)
			acct := uuid.NewString()
			e.put(b, "account", acct, map[string]any{"account_id": acct}, "")
			e.step(b)
			i := 0
			for b.Loop() {
				i++
				e.put(b, "entry", fmt.Sprintf("e%d", i), map[string]any{"account_id": acct, "amount": i}, "")
				e.step(b)
			}
			if turns := e.countRows(b, `SELECT count(*) FROM session_turns`); turns < b.N {
				b.Fatalf("%d turns for %d iterations", turns, b.N)
			}
		})
	}
}

package tools_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/handlers/script"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/tools"
	"github.com/actionsledger/actionsledger/turns"
)

// BenchmarkToolCalls measures direct tool calls (each its own committed
// transaction) of a Starlark tool with a session, into one session and
// spread over many, with GOMAXPROCS*4 callers:
//
//	go test -run '^$' -bench ToolCalls -benchtime 5s ./tools/
func BenchmarkToolCalls(b *testing.B) {
	pool := pgtest.NewPool(b)
	clk := clock.Real{}
	kinds := turns.NewRegistry(script.Kind())
	actions := action.NewStore(pool, clk, kinds)
	svc := tools.NewService(pool, actions, kinds, clk, slog.New(slog.DiscardHandler))
	src := "def call(event):\n    return {\"seen\": len(event[\"session\"][\"inputs\"])}\n"
	def := notifyTool()
	def.Kind, def.Source = script.KindName, &src
	id := uuid.New()
	if _, err := actions.Create(b.Context(), id, def); err != nil {
		b.Fatal(err)
	}
	for _, sessions := range []int{1, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := n.Add(1) % int64(sessions)
					in := jsonvalue.Value(fmt.Sprintf(`{"account_id":"acct-%d-%d","note":"bench"}`, sessions, k))
					if _, err := svc.Call(b.Context(), id, in); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

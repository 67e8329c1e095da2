package session_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// BenchmarkDryRun100k times a dry run of the monitor over 100,000 events
// (1,000 accounts, 99 entries each; issue 15): every event is judged,
// 1,000 sessions started and 99,000 inputs delivered, in a transaction that
// is rolled back. It reports events/s.
//
//	go test ./session -run '^$' -bench DryRun100k -benchtime 3x
func BenchmarkDryRun100k(b *testing.B) {
	f := setup(b)
	const accounts, perAccount = 1000, 99
	var batch []ledger.ValueInput
	flush := func() {
		_, err := f.app.Ledger.PutValues(f.ctx, batch)
		require.NoError(b, err)
		batch = batch[:0]
	}
	for a := range accounts {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", a)
		batch = append(batch, ledger.ValueInput{Namespace: "account", Key: id, Value: []byte(account(id))})
		for n := range perAccount {
			batch = append(batch, ledger.ValueInput{Namespace: "entry", Key: fmt.Sprintf("%d-%d", a, n), Value: []byte(entry(id, n))})
			if len(batch) == 1000 {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	comp, err := f.app.Actions.Proposed(f.ctx, monitor())
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		d, err := f.app.Dispatcher.DryRun(f.ctx, comp, "", 1, 0, session.MaxDryRunEvents, 0, nil)
		require.NoError(b, err)
		require.Equal(b, accounts*(perAccount+1), d.Events)
		require.Equal(b, accounts, d.Sessions)
		b.ReportMetric(float64(d.Events)/d.Took.Seconds(), "events/s")
	}
}

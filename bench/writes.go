package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// writes are a pass's answered writes: how many, over how long, and for
// each entry its event id and when its write was answered.
type writes struct {
	n     int64
	took  time.Duration // first write sent -> last one answered
	start time.Time
	acks  map[uuid.UUID]time.Time // single writes only
}

func (w writes) rate() float64 { return float64(w.n) / w.took.Seconds() }

// singleWrites writes entries with putValue, one per request, from every
// client, round-robin over the accounts: as fast as they go for d (rate
// 0), or paced at rate per second on a schedule that does not drift, for
// d. prefix keeps the keys of passes and runs apart.
func (r *rig) singleWrites(ctx context.Context, prefix string, d time.Duration, rate float64) (writes, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := writes{start: time.Now(), acks: map[uuid.UUID]time.Time{}}
	deadline := w.start.Add(d)
	var next atomic.Int64 // the next entry's number
	var mu sync.Mutex
	var last atomic.Int64 // latest answer, as a duration since start
	errs := make(chan error, len(r.clients))
	var wg sync.WaitGroup
	for ci, c := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if rate > 0 {
					at := w.start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if !at.Before(deadline) || sleepCtx(ctx, time.Until(at)) != nil {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				acct := r.accounts[(ci*7919+i)%len(r.accounts)]
				var id uuid.UUID
				if err := r.put(ctx, c, "entry", fmt.Sprintf("%s-%d", prefix, i), entry(acct, i), &id); err != nil {
					errs <- err
					cancel()
					return
				}
				answered := time.Now()
				mu.Lock()
				w.acks[id] = answered
				mu.Unlock()
				since := int64(answered.Sub(w.start))
				for old := last.Load(); since > old && !last.CompareAndSwap(old, since); old = last.Load() {
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return w, err
	}
	w.n, w.took = int64(len(w.acks)), time.Duration(last.Load())
	return w, nil
}

// putValuesOp is the bulk write: entry records, whose entry.inserted
// events the monitor's sessions take (appendEvents refuses the .inserted
// types, which only record writes append).
const putValuesOp = `mutation($recs: [ValueInput!]!) { ledger { putValues(records: $recs) { key } } }`

// errNoBulk is returned when the server has no putValues mutation.
var errNoBulk = errors.New("the server has no ledger.putValues mutation (bulk writes, issue 14): the bulk figures are skipped")

// probeBulk checks that the server offers putValues, with one record that
// no trigger matches.
func (r *rig) probeBulk(ctx context.Context) error {
	err := r.clients[0].do(ctx, putValuesOp, map[string]any{"recs": []any{
		map[string]any{"namespace": "bench_probe", "key": uuid.NewString(), "value": map[string]any{}}}}, nil)
	var ae *answerError
	if errors.As(err, &ae) && ae.has("GRAPHQL_VALIDATION_FAILED", "putValues") {
		return errNoBulk
	}
	return err
}

// bulkWrites writes entry records (entry.inserted events) with putValues, size per
// request (one transaction each), from every client, round-robin over the
// accounts, until d has passed or max events are written.
func (r *rig) bulkWrites(ctx context.Context, prefix string, size int, d time.Duration, maxEvents int64) (writes, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := writes{start: time.Now()}
	deadline := w.start.Add(d)
	var next, written, last atomic.Int64
	errs := make(chan error, len(r.clients))
	var wg sync.WaitGroup
	for _, c := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				from := next.Add(int64(size)) - int64(size)
				if from >= maxEvents {
					return
				}
				n := min(int64(size), maxEvents-from)
				evs := make([]any, n)
				for j := range evs {
					i := int(from) + j
					key := fmt.Sprintf("%s-%d", prefix, i)
					evs[j] = map[string]any{"namespace": "entry", "key": key, "value": entry(r.accounts[i%len(r.accounts)], i),
						"idempotencyKey": key}
				}
				if err := c.do(ctx, putValuesOp, map[string]any{"recs": evs}, nil); err != nil {
					errs <- fmt.Errorf("bench: putValues: %w", err)
					cancel()
					return
				}
				written.Add(n)
				since := int64(time.Since(w.start))
				for old := last.Load(); since > old && !last.CompareAndSwap(old, since); old = last.Load() {
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return w, err
	}
	w.n, w.took = written.Load(), time.Duration(last.Load())
	return w, nil
}

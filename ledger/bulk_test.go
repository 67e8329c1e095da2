package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

func events(n int, typ string) []ledger.EventInput {
	out := make([]ledger.EventInput, n)
	for i := range out {
		out[i] = ledger.EventInput{Type: typ, Data: jsonvalue.Value(fmt.Sprintf(`{"i": %d}`, i))}
	}
	return out
}

// faults returns the *fault.Error values of a joined error, as (code, field) pairs.
func faults(t *testing.T, err error) [][2]string {
	t.Helper()
	require.Error(t, err)
	var out [][2]string
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	for _, e := range list {
		fe := fault.As(e)
		require.NotNil(t, fe, "%T: %v", e, e)
		out = append(out, [2]string{fe.Code, fe.Field})
	}
	return out
}

// Issue 14 (L1-L3 in bulk): appendEvents writes its events in the order
// given, at consecutive positions with one commit time.
func TestBulkAppendEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.store.AppendEvent(ctx, "before.one", jsonvalue.Value(`1`), "")
	require.NoError(t, err)
	in := events(ledger.MaxBulk, "bulk.item")
	evs, err := b.store.AppendEvents(ctx, in)
	require.NoError(t, err)
	require.Len(t, evs, ledger.MaxBulk)
	for i, e := range evs {
		require.EqualValues(t, 2+i, e.Position)
		require.Equal(t, "bulk.item", e.Type)
		require.JSONEq(t, string(in[i].Data), string(e.Data))
		require.Equal(t, evs[0].CommitTime, e.CommitTime)
		require.Nil(t, e.Record)
	}
	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Equal(t, evs, final[1:])
}

// Issue 14 (L2 in bulk): putValues writes each record with its event; a
// key written by several items takes consecutive versions and keeps the
// last value; created time stays with the key's first write.
func TestBulkPutValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	first, err := b.store.PutValue(ctx, "acct", "a", jsonvalue.Value(`{"v": 0}`), "")
	require.NoError(t, err)
	b.clock.Advance(time.Minute)
	kvs, err := b.store.PutValues(ctx, []ledger.ValueInput{
		{Namespace: "acct", Key: "b", Value: jsonvalue.Value(`{"v": 1}`)},
		{Namespace: "acct", Key: "a", Value: jsonvalue.Value(`{"v": 2}`)},
		{Namespace: "entry", Key: "b", Value: jsonvalue.Value(`{"v": 3}`)},
		{Namespace: "acct", Key: "b", Value: jsonvalue.Value(`{"v": 4}`)},
		{Namespace: "acct", Key: "b", Value: jsonvalue.Value(`{"v": 5}`)},
	})
	require.NoError(t, err)
	wantVersions := []int64{1, 2, 1, 2, 3}
	for i, kv := range kvs {
		require.Equal(t, wantVersions[i], kv.Version, "item %d", i)
		require.Equal(t, kvs[0].UpdatedAt, kv.UpdatedAt)
	}
	require.Equal(t, first.CreatedAt, kvs[1].CreatedAt, "created time stays with the first write")
	require.Equal(t, kvs[0].UpdatedAt, kvs[0].CreatedAt, "a new key is created at its commit time")
	require.Equal(t, epoch.Add(time.Minute), kvs[0].UpdatedAt)

	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	var got []string
	for _, e := range final[1:] {
		got = append(got, fmt.Sprintf("%s %s v%d %s", e.Type, e.Record.Key, e.Record.Version, e.Data))
	}
	require.Equal(t, []string{
		`acct.inserted b v1 {"v": 1}`, `acct.updated a v2 {"v": 2}`, `entry.inserted b v1 {"v": 3}`,
		`acct.updated b v2 {"v": 4}`, `acct.updated b v3 {"v": 5}`}, got)
	for i, kv := range kvs {
		require.Equal(t, final[1+i].ID, kv.EventID)
	}
	cur, err := b.store.Value(ctx, "acct", "b")
	require.NoError(t, err)
	require.JSONEq(t, `{"v": 5}`, string(cur.Value))
	require.EqualValues(t, 3, cur.Version)
	require.Equal(t, kvs[4].EventID, cur.EventID)
}

// Issue 14: a bulk write is all or nothing: every invalid item is named by
// its index with a stable code, and nothing is written; so is a call with
// no items or too many.
func TestBulkInvalidItemsWriteNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	in := events(10, "ok.item")
	in[3].Data = jsonvalue.Value(`{"a": "\u0000"}`)
	in[5].Type = "account.inserted"
	in[7].IdempotencyKey = strings.Repeat("k", ledger.MaxIdemKeyLen+1)
	_, err := b.store.AppendEvents(ctx, in)
	require.Equal(t, [][2]string{
		{fault.InvalidJSON, "events[3].data"},
		{fault.ReservedEventType, "events[5].type"},
		{fault.BadInput, "events[7].idempotencyKey"},
	}, faults(t, err))

	_, err = b.store.PutValues(ctx, []ledger.ValueInput{
		{Namespace: "acct", Key: "a", Value: jsonvalue.Value(`1`)},
		{Namespace: "schedule", Key: "a", Value: jsonvalue.Value(`1`)},
		{Namespace: "acct", Key: "", Value: jsonvalue.Value(`1`)},
		{Namespace: "acct", Key: "c", Value: jsonvalue.Value(`{`)},
	})
	require.Equal(t, [][2]string{
		{fault.ReservedEventType, "records[1].namespace"},
		{fault.BadInput, "records[2].key"},
		{fault.InvalidJSON, "records[3].value"},
	}, faults(t, err))

	many := events(100, "x.y")
	for i := range many {
		many[i].Data = jsonvalue.Value(`"\u0000"`)
	}
	_, err = b.store.AppendEvents(ctx, many)
	require.Len(t, faults(t, err), 20, "at most 20 invalid items are reported")

	_, err = b.store.AppendEvents(ctx, nil)
	requireFault(t, err, fault.BadInput, "events")
	_, err = b.store.AppendEvents(ctx, events(ledger.MaxBulk+1, "x.y"))
	requireFault(t, err, fault.PayloadTooLarge, "events")
	_, err = b.store.PutValues(ctx, nil)
	requireFault(t, err, fault.BadInput, "records")

	head, err := ledger.Head(ctx, b.pool)
	require.NoError(t, err)
	require.Zero(t, head)
	for _, table := range []string{"events", "kv_values", "idempotency_keys"} {
		require.Zero(t, b.count(t, table), table)
	}
}

// L3 in bulk: each item's idempotency key works as a single write's, keys
// are shared with the single writes, a conflict anywhere fails the whole
// call (nothing written, the item named), and a key repeated within one
// call is one write when the items agree and a conflict when they do not.
func TestBulkIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	single, err := b.store.PutValue(ctx, "acct", "s", jsonvalue.Value(`{"n": 1}`), "single")
	require.NoError(t, err)

	in := []ledger.ValueInput{
		{Namespace: "acct", Key: "x", Value: jsonvalue.Value(`{"n": 2}`), IdempotencyKey: "x-1"},
		{Namespace: "acct", Key: "s", Value: jsonvalue.Value(`{"n": 1}`), IdempotencyKey: "single"}, // the single write again
		{Namespace: "acct", Key: "y", Value: jsonvalue.Value(`{"n": 3}`)},
		{Namespace: "acct", Key: "x", Value: jsonvalue.Value(`{"n": 2}`), IdempotencyKey: "x-1"}, // item 0 again
	}
	kvs, err := b.store.PutValues(ctx, in)
	require.NoError(t, err)
	requireSameKV(t, single, kvs[1])
	requireSameKV(t, kvs[0], kvs[3])
	require.EqualValues(t, 1, kvs[0].Version)
	require.Equal(t, 3, b.count(t, "events"), "s, x and y: the replays wrote nothing")

	// The same call again: the keyed items return their first results; the
	// item without a key writes again.
	b.clock.Advance(time.Minute)
	again, err := b.store.PutValues(ctx, in)
	require.NoError(t, err)
	requireSameKV(t, kvs[0], again[0])
	requireSameKV(t, kvs[1], again[1])
	requireSameKV(t, kvs[3], again[3])
	require.EqualValues(t, 2, again[2].Version)
	require.Equal(t, 4, b.count(t, "events"))

	// A single write finds a bulk item's key.
	one, err := b.store.PutValue(ctx, "acct", "x", jsonvalue.Value(`{"n": 2}`), "x-1")
	require.NoError(t, err)
	requireSameKV(t, kvs[0], one)

	head, err := ledger.Head(ctx, b.pool)
	require.NoError(t, err)
	keys := b.count(t, "idempotency_keys")

	// Conflicts fail the whole call, naming the item; nothing is written.
	for _, c := range []struct {
		name  string
		items []ledger.ValueInput
		field string
	}{
		{"a key used before for another record", []ledger.ValueInput{
			{Namespace: "acct", Key: "fresh", Value: jsonvalue.Value(`1`), IdempotencyKey: "fresh"},
			{Namespace: "acct", Key: "s", Value: jsonvalue.Value(`{"n": 9}`), IdempotencyKey: "single"},
		}, "records[1].idempotencyKey"},
		{"a key used before by appendEvent's kind", []ledger.ValueInput{
			{Namespace: "acct", Key: "fresh", Value: jsonvalue.Value(`1`)},
			{Namespace: "acct", Key: "fresh2", Value: jsonvalue.Value(`1`), IdempotencyKey: "ev-key"},
		}, "records[1].idempotencyKey"},
		{"a key repeated within the call for another record", []ledger.ValueInput{
			{Namespace: "acct", Key: "fresh", Value: jsonvalue.Value(`1`), IdempotencyKey: "in-call"},
			{Namespace: "acct", Key: "fresh", Value: jsonvalue.Value(`2`), IdempotencyKey: "in-call"},
		}, "records[1].idempotencyKey"},
	} {
		if c.name == "a key used before by appendEvent's kind" {
			_, err := b.store.AppendEvent(ctx, "note.made", jsonvalue.Value(`1`), "ev-key")
			require.NoError(t, err)
			head++
			keys++
		}
		_, err := b.store.PutValues(ctx, c.items)
		requireFault(t, err, fault.IdempotencyConflict, c.field)
		h, err := ledger.Head(ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, head, h, c.name)
		require.Equal(t, keys, b.count(t, "idempotency_keys"), c.name)
		v, err := b.store.Value(ctx, "acct", "fresh")
		require.NoError(t, err)
		require.Nil(t, v, c.name)
	}

	// appendEvents: the same rules.
	evs, err := b.store.AppendEvents(ctx, []ledger.EventInput{
		{Type: "note.made", Data: jsonvalue.Value(`1`), IdempotencyKey: "ev-key"},
		{Type: "note.made", Data: jsonvalue.Value(`2`), IdempotencyKey: "ev-2"},
		{Type: "note.made", Data: jsonvalue.Value(`2`), IdempotencyKey: "ev-2"},
	})
	require.NoError(t, err)
	require.Equal(t, head, evs[0].Position, "the appendEvent's event")
	require.Equal(t, head+1, evs[1].Position)
	require.Equal(t, evs[1], evs[2])
	_, err = b.store.AppendEvents(ctx, []ledger.EventInput{
		{Type: "note.made", Data: jsonvalue.Value(`3`)},
		{Type: "note.other", Data: jsonvalue.Value(`2`), IdempotencyKey: "ev-2"},
	})
	requireFault(t, err, fault.IdempotencyConflict, "events[1].idempotencyKey")
	h, err := ledger.Head(ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, head+1, h)
}

// L1 with bulk writes: bulk calls, single writes and turn-like
// transactions at once, and a reader paging all along that never sees a
// gap; each bulk call's events are consecutive.
func TestL1BulkUnderLoadMissesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const bulks, size, singles = 8, 25, 40
	r := startReader(ctx, b.pool, bulks*size+singles)
	var wg sync.WaitGroup
	errs := make(chan error, bulks+singles)
	results := make([][]ledger.Event, bulks)
	for i := range bulks {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				results[i], err = b.store.AppendEvents(ctx, events(size, fmt.Sprintf("bulk.b%d", i)))
			} else {
				in := make([]ledger.ValueInput, size)
				for j := range in {
					in[j] = ledger.ValueInput{Namespace: "acct", Key: fmt.Sprintf("k%d", j%7), Value: jsonvalue.Value(fmt.Sprintf(`[%d, %d]`, i, j)),
						IdempotencyKey: fmt.Sprintf("b%d-%d", i, j)}
				}
				var kvs []ledger.KVValue
				kvs, err = b.store.PutValues(ctx, in)
				for _, kv := range kvs {
					results[i] = append(results[i], ledger.Event{ID: kv.EventID})
				}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	for i := range singles {
		wg.Go(func() {
			if _, err := b.store.PutValue(ctx, "acct", fmt.Sprintf("k%d", i%7), jsonvalue.Value(fmt.Sprintf(`{"s": %d}`, i)), ""); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	final := allEvents(t, b.pool)
	requireCommitOrdered(t, final)
	require.Len(t, final, bulks*size+singles)
	require.Equal(t, final, r.wait(t))
	pos := map[string]int64{}
	for _, e := range final {
		pos[e.ID.String()] = e.Position
	}
	for i, res := range results {
		for j, e := range res {
			require.Equal(t, pos[res[0].ID.String()]+int64(j), pos[e.ID.String()], "bulk %d item %d", i, j)
		}
	}
	seen := map[string]int64{}
	for _, e := range final {
		if e.Record != nil {
			seen[e.Record.Key]++
			require.Equal(t, seen[e.Record.Key], e.Record.Version)
		}
	}
}

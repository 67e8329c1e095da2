package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// testBundle is what each ledger test works with: a fresh migrated database.
type testBundle struct {
	pool  *pgxpool.Pool
	clock *clock.Manual
	store *ledger.Store
}

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// setup returns a bundle on a fresh database. The pool has room for the
// concurrent writers and readers of the L1 tests.
func setup(t *testing.T) testBundle {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	require.NoError(t, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c := clock.NewManual(epoch)
	return testBundle{pool: pool, clock: c, store: ledger.NewStore(pool, c)}
}

func (b testBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

func allEvents(t *testing.T, q ledger.Querier) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	after := int64(0)
	for {
		page, err := ledger.ReadAfter(context.Background(), q, after, ledger.MaxPage, "")
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Position
	}
}

// requireFault asserts err is a *fault.Error with code and field.
func requireFault(t *testing.T, err error, code, field string) {
	t.Helper()
	require.Error(t, err)
	fe := fault.As(err)
	require.NotNil(t, fe, "want *fault.Error %s, got %T: %v", code, err, err)
	require.Equal(t, code, fe.Code, "code of %v", err)
	require.Equal(t, field, fe.Field, "field of %v", err)
}

// L2: the first write of a key is <ns>.inserted, later ones <ns>.updated;
// the version counts writes; the event's data is the value and its record
// is the KVValue as that write left it.
func TestL2PutValueInsertedThenUpdated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	v1 := jsonvalue.Value(`{"account_id": "a-1", "balance": 10}`)
	kv1, err := b.store.PutValue(ctx, "account", "a-1", v1, "")
	require.NoError(t, err)
	require.Equal(t, "account", kv1.Namespace)
	require.Equal(t, "a-1", kv1.Key)
	require.EqualValues(t, 1, kv1.Version)
	require.JSONEq(t, string(v1), string(kv1.Value))
	require.Equal(t, epoch, kv1.CreatedAt)
	require.Equal(t, epoch, kv1.UpdatedAt)

	b.clock.Advance(time.Minute)
	v2 := jsonvalue.Value(`{"account_id": "a-1", "balance": 25}`)
	kv2, err := b.store.PutValue(ctx, "account", "a-1", v2, "")
	require.NoError(t, err)
	require.EqualValues(t, 2, kv2.Version)
	require.Equal(t, kv1.CreatedAt, kv2.CreatedAt, "created_at stays with the first write")
	require.Equal(t, epoch.Add(time.Minute), kv2.UpdatedAt)

	evs, err := b.store.Events(ctx, 0, 10, "")
	require.NoError(t, err)
	require.Len(t, evs, 2)
	for i, want := range []struct {
		typ string
		kv  ledger.KVValue
		val jsonvalue.Value
	}{{"account.inserted", kv1, v1}, {"account.updated", kv2, v2}} {
		ev := evs[i]
		require.Equal(t, want.typ, ev.Type)
		require.EqualValues(t, i+1, ev.Position)
		require.JSONEq(t, string(want.val), string(ev.Data), "event data is the value")
		require.Equal(t, &ledger.RecordRef{Namespace: "account", Key: "a-1", Version: want.kv.Version}, ev.Record)
		require.Equal(t, want.kv.EventID, ev.ID)
		require.Equal(t, want.kv.UpdatedAt, ev.CommitTime)

		// The event's record is the KVValue as this write left it, even after
		// later writes of the key.
		rec := ev.RecordAt()
		require.NotNil(t, rec)
		require.Equal(t, want.kv.Namespace, rec.Namespace)
		require.Equal(t, want.kv.Key, rec.Key)
		require.Equal(t, want.kv.Version, rec.Version)
		require.Equal(t, want.kv.EventID, rec.EventID)
		require.Equal(t, want.kv.UpdatedAt, rec.UpdatedAt)
		require.JSONEq(t, string(want.val), string(rec.Value))
	}

	cur, err := b.store.Value(ctx, "account", "a-1")
	require.NoError(t, err)
	require.NotNil(t, cur)
	require.EqualValues(t, 2, cur.Version)
	require.Equal(t, kv2.EventID, cur.EventID)
	require.JSONEq(t, string(v2), string(cur.Value))

	// An event without a record has no RecordAt.
	plain, err := b.store.AppendEvent(ctx, "order.shipped", jsonvalue.Value(`{"n":1}`), "")
	require.NoError(t, err)
	require.Nil(t, plain.RecordAt())
	require.Equal(t, "order.shipped", plain.Type)
	require.EqualValues(t, 3, plain.Position)
}

// L3: a retried write with the same idempotency key returns the first
// result and appends nothing; the same key with a different request fails.
func TestL3Idempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	v := jsonvalue.Value(`{"b": 1, "a": [1, 2.50]}`)
	first, err := b.store.PutValue(ctx, "account", "k", v, "idem-1")
	require.NoError(t, err)

	b.clock.Advance(time.Hour) // a retry later returns the same record, not a new write
	// The same request, written with other key order and whitespace.
	again, err := b.store.PutValue(ctx, "account", "k", jsonvalue.Value(`{"a":[1,2.50],"b":1}`), "idem-1")
	require.NoError(t, err)
	requireSameKV(t, first, again)
	require.Equal(t, 1, b.count(t, "events"), "a retried write appends no event")

	_, err = b.store.PutValue(ctx, "account", "k", jsonvalue.Value(`{"b": 2}`), "idem-1")
	requireFault(t, err, fault.IdempotencyConflict, "idempotencyKey")
	_, err = b.store.PutValue(ctx, "account", "other-key", v, "idem-1")
	requireFault(t, err, fault.IdempotencyConflict, "idempotencyKey")
	_, err = b.store.AppendEvent(ctx, "order.shipped", v, "idem-1")
	requireFault(t, err, fault.IdempotencyConflict, "idempotencyKey")
	require.Equal(t, 1, b.count(t, "events"))

	// AppendEvent is idempotent the same way.
	e1, err := b.store.AppendEvent(ctx, "order.shipped", jsonvalue.Value(`{"n": 1}`), "idem-2")
	require.NoError(t, err)
	e2, err := b.store.AppendEvent(ctx, "order.shipped", jsonvalue.Value(`{"n": 1}`), "idem-2")
	require.NoError(t, err)
	require.Equal(t, e1.ID, e2.ID)
	require.Equal(t, e1.Position, e2.Position)
	require.Equal(t, e1.CommitTime, e2.CommitTime)
	_, err = b.store.AppendEvent(ctx, "order.cancelled", jsonvalue.Value(`{"n": 1}`), "idem-2")
	requireFault(t, err, fault.IdempotencyConflict, "idempotencyKey")
	require.Equal(t, 2, b.count(t, "events"))

	// Without a key every call writes.
	_, err = b.store.PutValue(ctx, "account", "k", v, "")
	require.NoError(t, err)
	_, err = b.store.PutValue(ctx, "account", "k", v, "")
	require.NoError(t, err)
	require.Equal(t, 4, b.count(t, "events"))
}

// L3: concurrent calls with one idempotency key write once and all get the
// same result.
func TestL3IdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	const n = 20
	results := make([]ledger.KVValue, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = b.store.PutValue(ctx, "account", "k", jsonvalue.Value(`{"n": 1}`), "same-key")
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "call %d", i)
		requireSameKV(t, results[0], results[i])
	}
	require.Equal(t, 1, b.count(t, "events"))
	require.Equal(t, 1, b.count(t, "kv_values"))
	require.EqualValues(t, 1, results[0].Version)
}

func requireSameKV(t *testing.T, want, got ledger.KVValue) {
	t.Helper()
	require.JSONEq(t, string(want.Value), string(got.Value))
	want.Value, got.Value = nil, nil
	// The event that wrote the record, returned with it: the same event,
	// its data equal as JSON (a replay reads it back as stored).
	require.NotNil(t, want.Written)
	require.NotNil(t, got.Written)
	require.JSONEq(t, string(want.Written.Data), string(got.Written.Data))
	we, ge := *want.Written, *got.Written
	we.Data, ge.Data = nil, nil
	require.Equal(t, we, ge)
	want.Written, got.Written = nil, nil
	require.Equal(t, want, got)
}

// HARD-PARTS 6: numbers keep every digit from write to read, through the
// record, its event and an idempotent replay.
func TestNumbersRoundTripExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	const (
		big = "9007199254740993123"             // 19 digits; float64 would give 9007199254740993000
		dec = "1234567890.12345678901234567891" // 30 digits
		neg = "-9223372036854775808"
	)
	v := jsonvalue.Value(fmt.Sprintf(`{"big": %s, "dec": %s, "list": [%s], "neg": %s}`, big, dec, big, neg))

	check := func(what string, raw jsonvalue.Value) {
		t.Helper()
		d, err := raw.Decode()
		require.NoError(t, err, what)
		m := d.(map[string]any)
		require.Equal(t, json.Number(big), m["big"], what)
		require.Equal(t, json.Number(dec), m["dec"], what)
		require.Equal(t, json.Number(neg), m["neg"], what)
		require.Equal(t, []any{json.Number(big)}, m["list"], what)
	}

	written, err := b.store.PutValue(ctx, "n", "k", v, "num-key")
	require.NoError(t, err)
	check("returned record", written.Value)

	read, err := b.store.Value(ctx, "n", "k")
	require.NoError(t, err)
	check("read record", read.Value)

	replay, err := b.store.PutValue(ctx, "n", "k", v, "num-key")
	require.NoError(t, err)
	check("idempotent replay", replay.Value)

	evs, err := b.store.Events(ctx, 0, 10, "")
	require.NoError(t, err)
	require.Len(t, evs, 1)
	check("event data", evs[0].Data)
	check("event record", evs[0].RecordAt().Value)

	ev, err := b.store.AppendEvent(ctx, "number.seen", v, "")
	require.NoError(t, err)
	check("appended event", ev.Data)
	got, err := b.store.Event(ctx, ev.ID)
	require.NoError(t, err)
	check("read event", got.Data)
}

// nested returns a value of depth levels of arrays around a 1.
func nested(depth int) jsonvalue.Value {
	return jsonvalue.Value(strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth))
}

// HARD-PARTS 7, L2, L3: input that cannot be stored is refused at the edge
// with a code and the field, and nothing is written.
func TestBadInputIsRefusedAndNothingWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	ok := jsonvalue.Value(`{"a": 1}`)
	tooBig := jsonvalue.Value(`"` + strings.Repeat("x", jsonvalue.MaxBytes) + `"`)
	put := func(ns, key string, v jsonvalue.Value, idem string) func() error {
		return func() error { _, err := b.store.PutValue(ctx, ns, key, v, idem); return err }
	}
	appendEv := func(typ string, v jsonvalue.Value) func() error {
		return func() error { _, err := b.store.AppendEvent(ctx, typ, v, ""); return err }
	}
	cases := []struct {
		name  string
		call  func() error
		code  string
		field string
	}{
		{"namespace empty", put("", "k", ok, ""), fault.BadInput, "namespace"},
		{"namespace with dot", put("a.b", "k", ok, ""), fault.BadInput, "namespace"},
		{"namespace starts with digit", put("1a", "k", ok, ""), fault.BadInput, "namespace"},
		{"namespace with space", put("a b", "k", ok, ""), fault.BadInput, "namespace"},
		{"namespace with NUL", put("a\x00b", "k", ok, ""), fault.BadInput, "namespace"},
		{"namespace too long", put(strings.Repeat("n", ledger.MaxNamespaceLen+1), "k", ok, ""), fault.BadInput, "namespace"},
		{"key empty", put("ns", "", ok, ""), fault.BadInput, "key"},
		{"key too long", put("ns", strings.Repeat("k", ledger.MaxKeyLen+1), ok, ""), fault.BadInput, "key"},
		{"key with NUL", put("ns", "a\x00b", ok, ""), fault.BadInput, "key"},
		{"key not UTF-8", put("ns", "a\xffb", ok, ""), fault.BadInput, "key"},
		{"NUL in string", put("ns", "k", jsonvalue.Value(`{"a": "x\u0000y"}`), ""), fault.InvalidJSON, "value"},
		{"NUL in nested string", put("ns", "k", jsonvalue.Value(`{"a": {"b": ["ok", "\u0000"]}}`), ""), fault.InvalidJSON, "value"},
		{"NUL in object key", put("ns", "k", jsonvalue.Value(`{"a\u0000": 1}`), ""), fault.InvalidJSON, "value"},
		{"NUL as top-level string", put("ns", "k", jsonvalue.Value(`"\u0000"`), ""), fault.InvalidJSON, "value"},
		{"lone surrogate", put("ns", "k", jsonvalue.Value(`{"a": "\ud800"}`), ""), fault.InvalidJSON, "value"},
		{"high surrogate without low", put("ns", "k", jsonvalue.Value(`["\ud83d x"]`), ""), fault.InvalidJSON, "value"},
		{"invalid UTF-8 in string", put("ns", "k", jsonvalue.Value("{\"a\": \"\xff\"}"), ""), fault.InvalidJSON, "value"},
		{"number beyond numeric", put("ns", "k", jsonvalue.Value(`{"a": 1e1000000}`), ""), fault.InvalidJSON, "value"},
		{"number just beyond numeric", put("ns", "k", jsonvalue.Value(`[1e131072]`), ""), fault.InvalidJSON, "value"},
		{"number with too many fraction digits", put("ns", "k", jsonvalue.Value(`[1.5e-16383]`), ""), fault.InvalidJSON, "value"},
		{"not JSON", put("ns", "k", jsonvalue.Value(`{"a":`), ""), fault.InvalidJSON, "value"},
		{"trailing data", put("ns", "k", jsonvalue.Value(`{} {}`), ""), fault.InvalidJSON, "value"},
		{"value too large", put("ns", "k", tooBig, ""), fault.PayloadTooLarge, "value"},
		{"value too deep", put("ns", "k", nested(jsonvalue.MaxDepth+1), ""), fault.InvalidJSON, "value"},
		{"idempotency key too long", put("ns", "k", ok, strings.Repeat("i", ledger.MaxIdemKeyLen+1)), fault.BadInput, "idempotencyKey"},
		{"idempotency key with NUL", put("ns", "k", ok, "a\x00"), fault.BadInput, "idempotencyKey"},

		{"type schedule.", appendEv("schedule.x", ok), fault.ReservedEventType, "type"},
		{"type schedule.fired", appendEv("schedule.fired", ok), fault.ReservedEventType, "type"},
		{"type action_session.", appendEv("action_session.x", ok), fault.ReservedEventType, "type"},
		{"type .inserted", appendEv("foo.inserted", ok), fault.ReservedEventType, "type"},
		{"type .updated", appendEv("foo.updated", ok), fault.ReservedEventType, "type"},
		{"type .deleted", appendEv("foo.deleted", ok), fault.ReservedEventType, "type"},
		{"type empty", appendEv("", ok), fault.BadInput, "type"},
		{"type empty segment", appendEv("a..b", ok), fault.BadInput, "type"},
		{"type with space", appendEv("a b", ok), fault.BadInput, "type"},
		{"type with NUL", appendEv("a\x00", ok), fault.BadInput, "type"},
		{"type too long", appendEv(strings.Repeat("t", ledger.MaxTypeLen+1), ok), fault.BadInput, "type"},
		{"event data NUL", appendEv("a.b", jsonvalue.Value(`["\u0000"]`)), fault.InvalidJSON, "data"},
		{"event data lone surrogate", appendEv("a.b", jsonvalue.Value(`"\udc00"`)), fault.InvalidJSON, "data"},
		{"event data too large", appendEv("a.b", tooBig), fault.PayloadTooLarge, "data"},
		{"event data too deep", appendEv("a.b", nested(jsonvalue.MaxDepth+1)), fault.InvalidJSON, "data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireFault(t, c.call(), c.code, c.field)
		})
	}

	head, err := ledger.Head(ctx, b.pool)
	require.NoError(t, err)
	require.Zero(t, head, "no position was taken")
	for _, table := range []string{"events", "kv_values", "idempotency_keys"} {
		require.Zero(t, b.count(t, table), table)
	}
}

// The limits themselves are accepted (the refusals above are off by one,
// not off by more).
func TestLimitsAreInclusive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	ns := "n" + strings.Repeat("_", ledger.MaxNamespaceLen-1)
	key := strings.Repeat("k", ledger.MaxKeyLen)
	_, err := b.store.PutValue(ctx, ns, key, nested(jsonvalue.MaxDepth), strings.Repeat("i", ledger.MaxIdemKeyLen))
	require.NoError(t, err)
	maxSize := jsonvalue.Value(`"` + strings.Repeat("x", jsonvalue.MaxBytes-2) + `"`)
	_, err = b.store.PutValue(ctx, ns, "big", maxSize, "")
	require.NoError(t, err)
	_, err = b.store.AppendEvent(ctx, strings.Repeat("t", ledger.MaxTypeLen), jsonvalue.Value(`{"k": "été ✓"}`), "")
	require.NoError(t, err)
	// Paired surrogates, an escaped backslash before "ud800", and the
	// largest and smallest numbers PostgreSQL's numeric holds are stored.
	edge := jsonvalue.Value(`{"emoji": "\ud83d\ude00", "text": "\\ud800", "big": 1e131071, "small": 1e-16383, "zero": 0e5}`)
	kv, err := b.store.PutValue(ctx, "edge", "k", edge, "")
	require.NoError(t, err)
	d, err := kv.Value.Decode()
	require.NoError(t, err)
	require.Equal(t, "😀", d.(map[string]any)["emoji"])
	require.Equal(t, `\ud800`, d.(map[string]any)["text"])
	require.Equal(t, 4, b.count(t, "events"))
}

// L4: events page by position with first/after and an optional type;
// values page by key within a namespace.
func TestL4Paging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	for i := range 7 {
		_, err := b.store.PutValue(ctx, "acct", fmt.Sprintf("k%02d", i+1), jsonvalue.Value(fmt.Sprintf(`{"i": %d}`, i+1)), "")
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = b.store.AppendEvent(ctx, "note.added", jsonvalue.Value(`{}`), "")
			require.NoError(t, err)
		}
	}
	_, err := b.store.PutValue(ctx, "acct", "k02", jsonvalue.Value(`{"i": 22}`), "")
	require.NoError(t, err)
	_, err = b.store.PutValue(ctx, "zother", "k01", jsonvalue.Value(`1`), "")
	require.NoError(t, err)
	const total = 7 + 3 + 2

	// Pages of 3 are contiguous and cover everything once.
	var seen []ledger.Event
	after := int64(0)
	for {
		page, err := b.store.Events(ctx, after, 3, "")
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 3)
		if len(page) == 0 {
			break
		}
		for i, e := range page {
			require.Equal(t, after+int64(i)+1, e.Position)
		}
		seen = append(seen, page...)
		after = page[len(page)-1].Position
	}
	require.Len(t, seen, total)
	all, err := b.store.Events(ctx, 0, 0, "")
	require.NoError(t, err)
	require.Equal(t, seen, all, "first <= 0 means a full page")

	// By type.
	var ins []ledger.Event
	after = 0
	for {
		page, err := b.store.Events(ctx, after, 2, "acct.inserted")
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		ins = append(ins, page...)
		after = page[len(page)-1].Position
	}
	require.Len(t, ins, 7)
	for i, e := range ins {
		require.Equal(t, "acct.inserted", e.Type)
		require.Equal(t, fmt.Sprintf("k%02d", i+1), e.Record.Key)
	}
	upd, err := b.store.Events(ctx, 0, 10, "acct.updated")
	require.NoError(t, err)
	require.Len(t, upd, 1)
	none, err := b.store.Events(ctx, 0, 10, "nothing.here")
	require.NoError(t, err)
	require.Empty(t, none)
	past, err := b.store.Events(ctx, total, 10, "")
	require.NoError(t, err)
	require.Empty(t, past)

	// Values by key, one namespace at a time, current versions.
	var keys []string
	afterKey := ""
	for {
		page, err := b.store.Values(ctx, "acct", afterKey, 3)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 3)
		if len(page) == 0 {
			break
		}
		for _, kv := range page {
			require.Equal(t, "acct", kv.Namespace)
			keys = append(keys, kv.Key)
			if kv.Key == "k02" {
				require.EqualValues(t, 2, kv.Version)
				require.JSONEq(t, `{"i": 22}`, string(kv.Value))
			}
		}
		afterKey = page[len(page)-1].Key
	}
	require.Equal(t, []string{"k01", "k02", "k03", "k04", "k05", "k06", "k07"}, keys)
	other, err := b.store.Values(ctx, "zother", "", 10)
	require.NoError(t, err)
	require.Len(t, other, 1)

	missing, err := b.store.Value(ctx, "acct", "nope")
	require.NoError(t, err)
	require.Nil(t, missing)
	_, err = b.store.Event(ctx, uuid.New())
	requireFault(t, err, fault.NotFound, "id")
	byID, err := b.store.EventsByID(ctx, []uuid.UUID{all[0].ID, all[4].ID, uuid.New()})
	require.NoError(t, err)
	require.Len(t, byID, 2)
	require.Equal(t, all[4], byID[all[4].ID])
}

// L4: first is capped at MaxPage.
func TestL4PageCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	evs := make([]ledger.NewEvent, ledger.MaxPage+5)
	for i := range evs {
		evs[i] = ledger.NewEvent{Type: "bulk.item", Data: jsonvalue.Value(fmt.Sprint(i))}
	}
	_, err = ledger.Append(ctx, tx, b.clock.Now(), evs...)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	page, err := b.store.Events(ctx, 0, ledger.MaxPage+100, "")
	require.NoError(t, err)
	require.Len(t, page, ledger.MaxPage)
	rest, err := b.store.Events(ctx, page[len(page)-1].Position, ledger.MaxPage, "")
	require.NoError(t, err)
	require.Len(t, rest, 5)
}

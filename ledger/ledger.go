package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// NotifyChannel is the LISTEN/NOTIFY channel that appends signal once
// committed (the Store's writes through its Notifier, appends in a
// caller's transaction with it). The payload is the newest position, as
// decimal text. A notification is only a wake-up: readers always read the
// table.
const NotifyChannel = "actionsledger_ledger"

// Limits on identifiers.
const (
	MaxTypeLen      = 200
	MaxNamespaceLen = 100
	MaxKeyLen       = 512
	MaxIdemKeyLen   = 200
	// MaxPage is the largest page any listing returns.
	MaxPage = 500
)

var (
	typePattern      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$`)
	namespacePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// Event is one committed ledger event.
type Event struct {
	ID         uuid.UUID
	Position   int64
	Type       string
	Data       jsonvalue.Value
	CommitTime time.Time // UTC, microseconds
	Record     *RecordRef
}

// RecordRef names the key-value record write an event records.
type RecordRef struct {
	Namespace string
	Key       string
	Version   int64
}

// KVValue is a key-value record (L2). Version counts writes of the key from 1.
type KVValue struct {
	Namespace string
	Key       string
	Value     jsonvalue.Value
	Version   int64
	EventID   uuid.UUID
	CreatedAt time.Time
	UpdatedAt time.Time
	// Written is the event that wrote this version when the record comes
	// from a write (PutValue, PutValues), so its caller need not read it
	// back; nil when the record was read.
	Written *Event
}

// RecordAt returns the record as that event wrote it.
func (e Event) RecordAt() *KVValue {
	if e.Record == nil {
		return nil
	}
	return &KVValue{Namespace: e.Record.Namespace, Key: e.Record.Key, Value: e.Data,
		Version: e.Record.Version, EventID: e.ID, UpdatedAt: e.CommitTime}
}

// NewEvent is an event to append. ID is generated when zero.
type NewEvent struct {
	ID     uuid.UUID
	Type   string
	Data   jsonvalue.Value
	Record *RecordRef
}

// Querier is what ledger functions need from a pool, connection or transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store reads and writes the ledger through a pool.
type Store struct {
	pool     *pgxpool.Pool
	clock    clock.Clock
	group    *committer
	notifier *Notifier

	// Group commit of concurrent single writes (group.go); zero fields
	// take the defaults. MaxGroup is the most writes per transaction,
	// MaxGroupBytes their data in bytes, GroupRunners how many group
	// transactions may be in flight at once. Set before first use.
	MaxGroup      int
	MaxGroupBytes int
	GroupRunners  int
}

// NewStore returns a Store using pool and clock, and a Notifier of its
// own on pool for what its writes commit (Notifier).
func NewStore(pool *pgxpool.Pool, c clock.Clock) *Store {
	s := &Store{pool: pool, clock: c, notifier: NewNotifier(pool)}
	s.group = &committer{s: s}
	return s
}

// Notifier returns the Notifier that announces the Store's writes once
// they committed; the process's other committers share it (issue 14).
func (s *Store) Notifier() *Notifier { return s.notifier }

// The action_session. types the service writes, which triggers see: an
// answer to a session (P5, H5), a request to one over MCP (I4) and a
// message or control sent to one (G1).
const (
	RespondedType = "action_session.responded"
	RequestedType = "action_session.requested"
	// CommandedType records a message or control sent to a session (G1).
	CommandedType = "action_session.commanded"
	// StartedType records a session started by startSession (G7), its origin.
	StartedType = "action_session.started"
)

// TypeShaped reports whether t has the shape of an event type (1 to
// MaxTypeLen characters of dot-separated names), whoever writes it: a
// filter on any other type matches nothing.
func TypeShaped(t string) bool {
	return len(t) > 0 && len(t) <= MaxTypeLen && typePattern.MatchString(t)
}

// ValidateType checks a client-supplied event type. Types ending in
// .inserted, .updated or .deleted are written by record writes, and the
// prefixes schedule. and action_session. belong to the service.
// Errors: fault.BadInput, fault.ReservedEventType.
func ValidateType(t, field string) error {
	if err := ValidateTypeShape(t, field); err != nil {
		return err
	}
	for _, p := range []string{"schedule.", "action_session."} {
		if strings.HasPrefix(t, p) {
			return fault.New(fault.ReservedEventType, field, "event types starting with %q are written by the service", p)
		}
	}
	for _, s := range []string{".inserted", ".updated", ".deleted"} {
		if strings.HasSuffix(t, s) {
			return fault.New(fault.ReservedEventType, field, "event types ending in %q are written by record writes: use putValue", s)
		}
	}
	return nil
}

// ValidateNamespace checks a record namespace. The namespaces schedule and
// action_session are the service's (their events would pose as clock
// firings and responses). Errors: fault.BadInput, fault.ReservedEventType.
func ValidateNamespace(ns, field string) error {
	if err := ValidateNamespaceShape(ns, field); err != nil {
		return err
	}
	if ns == "schedule" || ns == "action_session" {
		return fault.New(fault.ReservedEventType, field, "namespace %q is reserved: its events are written by the service", ns)
	}
	return nil
}

// ValidateTypeShape checks an event type to read by: the shape
// ValidateType asks, the service's types included. Errors: fault.BadInput.
func ValidateTypeShape(t, field string) error {
	if !TypeShaped(t) {
		return fault.New(fault.BadInput, field, "an event type is 1-%d characters of dot-separated names (letters, digits, _ and -), such as order.shipped", MaxTypeLen)
	}
	return nil
}

// ValidateNamespaceShape checks a namespace to read: the shape
// ValidateNamespace asks, the reserved namespaces included. Errors:
// fault.BadInput.
func ValidateNamespaceShape(ns, field string) error {
	if len(ns) == 0 || len(ns) > MaxNamespaceLen || !namespacePattern.MatchString(ns) {
		return fault.New(fault.BadInput, field, "a namespace is 1-%d letters, digits, _ or -, starting with a letter or _", MaxNamespaceLen)
	}
	return nil
}

// ValidateKey checks a record key: 1-MaxKeyLen bytes of valid UTF-8
// without NUL. Errors: fault.BadInput.
func ValidateKey(key, field string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fault.New(fault.BadInput, field, "a key is 1-%d bytes", MaxKeyLen)
	}
	if strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key) {
		return fault.New(fault.BadInput, field, "a key must be valid UTF-8 without NUL characters")
	}
	return nil
}

func validateIdemKey(k, field string) error {
	if len(k) > MaxIdemKeyLen || strings.IndexByte(k, 0) >= 0 || !utf8.ValidString(k) {
		return fault.New(fault.BadInput, field, "an idempotency key is at most %d bytes of UTF-8 without NUL", MaxIdemKeyLen)
	}
	return nil
}

// Append appends events in tx and returns them with positions and their
// shared commit time. It takes the ledger head (see the package doc) in the
// same statement that inserts the events, so call it as the last write of
// the transaction: the head stays locked until the transaction ends. now is
// the caller's clock reading; the commit time is the later of now and one
// microsecond after the previous commit time, so it never decreases.
func Append(ctx context.Context, tx pgx.Tx, now time.Time, evs ...NewEvent) ([]Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	n := len(evs)
	ids := make([]uuid.UUID, n)
	types := make([]string, n)
	datas := make([]string, n)
	nss := make([]*string, n)
	keys := make([]*string, n)
	vers := make([]*int64, n)
	for i, e := range evs {
		ids[i] = e.ID
		if ids[i] == uuid.Nil {
			ids[i] = NewID()
		}
		types[i] = e.Type
		data := e.Data
		if len(data) == 0 {
			data = jsonvalue.Value("null")
		}
		evs[i].Data, datas[i] = data, string(data)
		if e.Record != nil {
			nss[i], keys[i], vers[i] = &e.Record.Namespace, &e.Record.Key, &e.Record.Version
		}
	}
	var last int64
	var ct time.Time
	err := tx.QueryRow(ctx, `
		WITH head AS (
			UPDATE ledger_head
			   SET position = position + $1,
			       commit_time = greatest(commit_time + interval '1 microsecond', $2::timestamptz)
			 RETURNING position, commit_time),
		ins AS (
			INSERT INTO events (id, position, type, data, commit_time, record_namespace, record_key, record_version)
			SELECT e.id, head.position - $1 + e.ord, e.type, e.data::jsonb, head.commit_time, e.ns, e.key, e.ver
			  FROM head, unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
			       WITH ORDINALITY AS e (id, type, data, ns, key, ver, ord)
			RETURNING 1)
		SELECT head.position, head.commit_time, pg_notify($9, head.position::text), (SELECT count(*) FROM ins)
		  FROM head`, n, now, ids, types, datas, nss, keys, vers, NotifyChannel).Scan(&last, &ct, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("ledger: append: %w", err)
	}
	ct = ct.UTC()
	out := make([]Event, n)
	for i, e := range evs {
		out[i] = Event{ID: ids[i], Position: last - int64(n) + 1 + int64(i), Type: e.Type, Data: e.Data, CommitTime: ct, Record: e.Record}
	}
	return out, nil
}

// Put writes a key-value record in tx and appends its event,
// <namespace>.inserted for the first write of the key and
// <namespace>.updated after (L2). The event's data is the value. The
// record is written first and the ledger head taken last, so the head is
// held only for the append itself.
func Put(ctx context.Context, tx pgx.Tx, now time.Time, ns, key string, value jsonvalue.Value) (KVValue, Event, error) {
	ne, _, created, err := putRecord(ctx, tx, now, ns, key, value)
	if err != nil {
		return KVValue{}, Event{}, err
	}
	evs, err := Append(ctx, tx, now, ne)
	if err != nil {
		return KVValue{}, Event{}, err
	}
	ev := evs[0]
	kv := KVValue{Namespace: ns, Key: key, Value: value, Version: ne.Record.Version, EventID: ev.ID, CreatedAt: created, UpdatedAt: ev.CommitTime}
	if kv.Version == 1 {
		kv.CreatedAt = ev.CommitTime
	}
	return kv, ev, nil
}

// AppendEvent appends one event with no record (L3). A repeated
// idempotencyKey (non-empty) returns the first call's event. Concurrent
// calls are committed together (see group.go); each keeps its own outcome.
// When ctx ends before the write's group is committing, it returns ctx's
// error and nothing is committed (issue 10 item 1).
// Errors: fault.BadInput, fault.ReservedEventType, fault.InvalidJSON,
// fault.PayloadTooLarge, fault.IdempotencyConflict.
func (s *Store) AppendEvent(ctx context.Context, typ string, data jsonvalue.Value, idemKey string) (Event, error) {
	w, err := eventWrite(typ, data, idemKey, "")
	if err != nil {
		return Event{}, err
	}
	o := s.group.submit(ctx, w)
	return o.ev, o.err
}

// PutValue writes a key-value record and appends its event (L2, L3). A
// repeated idempotencyKey (non-empty) returns the first call's record.
// Concurrent calls are committed together (see group.go); each keeps its
// own outcome and its ctx as AppendEvent's. Errors: fault.BadInput, fault.InvalidJSON,
// fault.PayloadTooLarge, fault.IdempotencyConflict.
func (s *Store) PutValue(ctx context.Context, ns, key string, value jsonvalue.Value, idemKey string) (KVValue, error) {
	w, err := valueWrite(ns, key, value, idemKey, "")
	if err != nil {
		return KVValue{}, err
	}
	o := s.group.submit(ctx, w)
	if o.err != nil {
		return KVValue{}, o.err
	}
	return o.kv(), nil
}

// eventWrite validates an appendEvent (or an item of appendEvents, whose
// fields are named under prefix) and makes its write.
func eventWrite(typ string, data jsonvalue.Value, idemKey, prefix string) (write, error) {
	if err := ValidateType(typ, prefix+"type"); err != nil {
		return write{}, err
	}
	if err := jsonvalue.Check(data, prefix+"data"); err != nil {
		return write{}, err
	}
	if err := validateIdemKey(idemKey, prefix+"idempotencyKey"); err != nil {
		return write{}, err
	}
	w := write{op: opAppend, id: NewID(), typ: typ, data: data, idem: idemKey}
	if idemKey != "" {
		w.hash = requestHash(opAppend, []any{typ, data})
	}
	return w, nil
}

// valueWrite validates a putValue (or an item of putValues, whose fields
// are named under prefix) and makes its write.
func valueWrite(ns, key string, value jsonvalue.Value, idemKey, prefix string) (write, error) {
	if err := ValidateNamespace(ns, prefix+"namespace"); err != nil {
		return write{}, err
	}
	if err := ValidateKey(key, prefix+"key"); err != nil {
		return write{}, err
	}
	if err := jsonvalue.Check(value, prefix+"value"); err != nil {
		return write{}, err
	}
	if err := validateIdemKey(idemKey, prefix+"idempotencyKey"); err != nil {
		return write{}, err
	}
	w := write{op: opPut, id: NewID(), ns: ns, key: key, data: value, idem: idemKey}
	if idemKey != "" {
		w.hash = requestHash(opPut, []any{ns, key, value})
	}
	return w, nil
}

func requestHash(op string, req []any) string {
	h := sha256.New()
	h.Write([]byte(op))
	for _, r := range req {
		h.Write([]byte{0})
		switch v := r.(type) {
		case jsonvalue.Value:
			// The value's canonical form; "null" when it is not JSON (as
			// Decode's nil encodes): stored hashes stay comparable.
			e, err := jsonvalue.Canonical(v)
			if err != nil {
				e = []byte("null")
			}
			h.Write(e)
		default:
			fmt.Fprint(h, v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

const eventColumns = `id, position, type, data, commit_time, record_namespace, record_key, record_version`

func scanEvent(row pgx.Row) (Event, error) {
	var e Event
	var ns, key *string
	var ver *int64
	if err := row.Scan(&e.ID, &e.Position, &e.Type, &e.Data, &e.CommitTime, &ns, &key, &ver); err != nil {
		return Event{}, err
	}
	e.CommitTime = e.CommitTime.UTC()
	if ns != nil {
		e.Record = &RecordRef{Namespace: *ns, Key: *key, Version: *ver}
	}
	return e, nil
}

// eachEvent scans every row of rows (eventColumns) and hands each event
// to f, in row order. Errors: the first scan error, wrapped, or rows.Err.
func eachEvent(rows pgx.Rows, f func(Event)) error {
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return fmt.Errorf("ledger: scan event: %w", err)
		}
		f(e)
	}
	return rows.Err()
}

// ReadAfter returns up to limit events with position > after, in position
// order, optionally only of type typ. Because positions follow commit order
// (package doc), a reader that pages with the last position it saw never
// misses an event.
func ReadAfter(ctx context.Context, q Querier, after int64, limit int, typ string) ([]Event, error) {
	var rows pgx.Rows
	var err error
	if typ == "" {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE position > $1 ORDER BY position LIMIT $2`, after, limit)
	} else {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE type = $3 AND position > $1 ORDER BY position LIMIT $2`, after, limit, typ)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read events: %w", err)
	}
	defer rows.Close()
	var out []Event
	err = eachEvent(rows, func(e Event) { out = append(out, e) })
	return out, err
}

// QueueReadAfter queues in b the read of ReadAfter (every type), appending
// the events to out, with the position to read after given by after, an
// SQL expression (bigint) evaluated in the batch's transaction: a reader
// whose cursor is a row can read the events after it in the round trip
// that locks it.
func QueueReadAfter(b *pgx.Batch, after string, limit int, out *[]Event) {
	b.Queue(`SELECT `+eventColumns+` FROM events WHERE position > `+after+` ORDER BY position LIMIT $1`, limit).
		Query(func(rows pgx.Rows) error {
			return eachEvent(rows, func(e Event) { *out = append(*out, e) })
		})
}

// Head returns the newest position in the ledger (0 when it is empty).
func (s *Store) Head(ctx context.Context) (int64, error) {
	return Head(ctx, s.pool)
}

// Recent returns up to last events (capped at MaxPage) with positions
// below before (every position when before <= 0), newest first,
// optionally of one type (issue 13: the console shows the newest events).
func (s *Store) Recent(ctx context.Context, before int64, last int, typ string) ([]Event, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	var rows pgx.Rows
	var err error
	if typ == "" {
		rows, err = s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE position < $1 ORDER BY position DESC LIMIT $2`, before, clampPage(last))
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE type = $3 AND position < $1 ORDER BY position DESC LIMIT $2`, before, clampPage(last), typ)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read recent events: %w", err)
	}
	defer rows.Close()
	var out []Event
	err = eachEvent(rows, func(e Event) { out = append(out, e) })
	return out, err
}

// Events pages events by position (L4). first is capped at MaxPage; typ,
// when not empty, keeps the events of that type. Errors: fault.BadInput
// when typ is not shaped as a type (ValidateTypeShape).
func (s *Store) Events(ctx context.Context, after int64, first int, typ string) ([]Event, error) {
	if typ != "" {
		if err := ValidateTypeShape(typ, "type"); err != nil {
			return nil, err
		}
	}
	return ReadAfter(ctx, s.pool, after, clampPage(first), typ)
}

// EventsByID returns the events with the given ids, keyed by id; missing ids are absent.
func (s *Store) EventsByID(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Event, error) {
	return EventsByID(ctx, s.pool, ids)
}

// EventsByID reads the events with the given ids through q, keyed by id.
func EventsByID(ctx context.Context, q Querier, ids []uuid.UUID) (map[uuid.UUID]Event, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("ledger: read events: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]Event, len(ids))
	err = eachEvent(rows, func(e Event) { out[e.ID] = e })
	return out, err
}

// Event returns one event. Errors: fault.NotFound.
func (s *Store) Event(ctx context.Context, id uuid.UUID) (Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, fault.New(fault.NotFound, "id", "no event with this id")
	}
	return e, err
}

// kvColumns reads a record; its updated time is its event's commit time.
const kvColumns = `k.namespace, k.key, k.value, k.version, k.event_id, k.created_at, e.commit_time`

// Value returns the current record under namespace and key, or nil when
// there is none. Errors: fault.BadInput when ns or key is not shaped as
// one (ValidateNamespaceShape, ValidateKey).
func (s *Store) Value(ctx context.Context, ns, key string) (*KVValue, error) {
	if err := ValidateNamespaceShape(ns, "namespace"); err != nil {
		return nil, err
	}
	if err := ValidateKey(key, "key"); err != nil {
		return nil, err
	}
	var kv KVValue
	err := s.pool.QueryRow(ctx, `SELECT `+kvColumns+` FROM kv_values k JOIN events e ON e.id = k.event_id
		WHERE k.namespace = $1 AND k.key = $2`, ns, key).Scan(
		&kv.Namespace, &kv.Key, &kv.Value, &kv.Version, &kv.EventID, &kv.CreatedAt, &kv.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read record: %w", err)
	}
	kv.CreatedAt, kv.UpdatedAt = kv.CreatedAt.UTC(), kv.UpdatedAt.UTC()
	return &kv, nil
}

// Values pages a namespace's current records in key order, after the given
// key (empty for the start). first is capped at MaxPage. Errors:
// fault.BadInput when ns is not shaped as a namespace.
func (s *Store) Values(ctx context.Context, ns, afterKey string, first int) ([]KVValue, error) {
	if err := ValidateNamespaceShape(ns, "namespace"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+kvColumns+` FROM kv_values k JOIN events e ON e.id = k.event_id
		WHERE k.namespace = $1 AND k.key > $2 ORDER BY k.key LIMIT $3`, ns, afterKey, clampPage(first))
	if err != nil {
		return nil, fmt.Errorf("ledger: read records: %w", err)
	}
	defer rows.Close()
	var out []KVValue
	for rows.Next() {
		var kv KVValue
		if err := rows.Scan(&kv.Namespace, &kv.Key, &kv.Value, &kv.Version, &kv.EventID, &kv.CreatedAt, &kv.UpdatedAt); err != nil {
			return nil, err
		}
		kv.CreatedAt, kv.UpdatedAt = kv.CreatedAt.UTC(), kv.UpdatedAt.UTC()
		out = append(out, kv)
	}
	return out, rows.Err()
}

// Head returns the newest committed position (0 for an empty ledger).
func Head(ctx context.Context, q Querier) (int64, error) {
	var p int64
	err := q.QueryRow(ctx, `SELECT position FROM ledger_head`).Scan(&p)
	return p, err
}

func clampPage(first int) int {
	if first <= 0 || first > MaxPage {
		return MaxPage
	}
	return first
}

// Record is any ledger record an event can refer to (L2). KVValue is the one kind so far.
type Record interface{ IsRecord() }

// IsRecord marks KVValue as a Record.
func (KVValue) IsRecord() {}

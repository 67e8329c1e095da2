package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// Operation names stored with an idempotency key. A single write and an
// item of a bulk write of the same kind share one, so a key first used in
// either is honoured by the other (L3).
const (
	opAppend = "appendEvent"
	opPut    = "putValue"
)

// write is one API write (appendEvent, putValue, or an item of a bulk
// write), validated, with its event id chosen in advance: the id is what
// its idempotency key stores, so a replay reads the first call's result
// back from the ledger.
type write struct {
	op   string
	id   uuid.UUID
	typ  string // appendEvent
	ns   string // putValue
	key  string // putValue
	data jsonvalue.Value
	idem string // idempotency key; empty: none
	hash string // request hash, with idem
}

// outcome is what one write came to: its event (a putValue's with its
// Record) and, for a putValue, when its record was created; or err.
type outcome struct {
	ev      Event
	created time.Time
	err     error
}

// kv returns a putValue's outcome as the record it wrote.
func (o outcome) kv() KVValue {
	kv := *o.ev.RecordAt()
	kv.CreatedAt = o.created
	if kv.Version == 1 || kv.CreatedAt.IsZero() {
		kv.CreatedAt = o.ev.CommitTime
	}
	return kv
}

// The statements of a group of writes, sent together in one pipeline
// (pgx.Batch) and run in one transaction:
//
//  1. recordsSQL inserts the idempotency keys (each storing its write's
//     event id) and upserts the records of the putValues whose key was not
//     there before, locking keys and records in sorted order;
//  2. keysSQL reads back every idempotency key of the group: one that holds
//     another event id is a replay (its event joined) or a conflict;
//  3. appendSQL takes the ledger head for the writes that are to happen (a
//     write whose key now stores its own event id, or with no key) and
//     inserts their events, positions in group order.
//
// The head is taken by the last statement, so it is held only from then to
// the COMMIT that follows it in the same pipeline (package doc). A key
// written twice in one group gets consecutive versions: its record is
// upserted once with the count of its writes, and each event takes its
// version from the record's new version counting back.
const recordsSQL = `
WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
	       WITH ORDINALITY AS i (id, ns, key, value, idem, op, hash, ord)),
k AS (
	INSERT INTO idempotency_keys (key, operation, request_hash, response, created_at)
	SELECT idem, op, hash, jsonb_build_object('event', id), $8 FROM i WHERE idem IS NOT NULL ORDER BY idem
	ON CONFLICT (key) DO NOTHING
	RETURNING key),
todo AS (
	SELECT i.* FROM i WHERE i.ns IS NOT NULL AND (i.idem IS NULL OR i.idem IN (SELECT key FROM k))),
last AS (
	SELECT DISTINCT ON (ns, key) ns, key, value, id, count(*) OVER (PARTITION BY ns, key) AS n
	  FROM todo ORDER BY ns, key, ord DESC)
INSERT INTO kv_values AS v (namespace, key, value, version, event_id, created_at, updated_at)
SELECT ns, key, value::jsonb, n, id, $8, $8 FROM last ORDER BY ns, key
ON CONFLICT (namespace, key) DO UPDATE
   SET value = EXCLUDED.value, version = v.version + EXCLUDED.version, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at
RETURNING v.namespace, v.key, v.created_at`

const keysSQL = `
SELECT k.key, k.operation, k.request_hash, k.response, k.response->>'event',
       e.id, e.position, e.type, e.data, e.commit_time, e.record_namespace, e.record_key, e.record_version, v.created_at
  FROM idempotency_keys k
  LEFT JOIN events e ON e.id = (k.response->>'event')::uuid
  LEFT JOIN kv_values v ON v.namespace = e.record_namespace AND v.key = e.record_key
 WHERE k.key = ANY($1)`

const appendSQL = `
WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
	       WITH ORDINALITY AS i (id, type, data, ns, key, idem, ord)),
todo AS (
	SELECT i.*, row_number() OVER (ORDER BY ord) AS rn,
	       row_number() OVER (PARTITION BY ns, key ORDER BY ord DESC) AS later
	  FROM i
	 WHERE i.idem IS NULL
	    OR EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.key = i.idem AND k.response->>'event' = i.id::text)),
n AS (SELECT count(*) AS n FROM todo),
head AS (
	UPDATE ledger_head
	   SET position = position + n.n,
	       commit_time = greatest(commit_time + interval '1 microsecond', $7::timestamptz)
	  FROM n WHERE n.n > 0
	RETURNING ledger_head.position - n.n AS base, ledger_head.commit_time, pg_notify($8, ledger_head.position::text) AS notified),
ins AS (
	INSERT INTO events (id, position, type, data, commit_time, record_namespace, record_key, record_version)
	SELECT t.id, (SELECT base FROM head) + t.rn,
	       coalesce(t.type, t.ns || CASE WHEN v.version - t.later + 1 = 1 THEN '.inserted' ELSE '.updated' END),
	       t.data::jsonb, (SELECT commit_time FROM head), t.ns, t.key, v.version - t.later + 1
	  FROM todo t
	  LEFT JOIN kv_values v ON v.namespace = t.ns AND v.key = t.key
	RETURNING id, position, type, record_version, commit_time)
SELECT id, position, type, record_version, commit_time FROM ins`

// The head is read through scalar subqueries rather than joined: the
// planner has no statistics on the one-row ledger_head of a new database
// and, joined, estimated its statements so costly that PostgreSQL compiled
// them with JIT, which took seconds each.

// pipeline queues a group's statements on b: recordsSQL when the group
// has putValues or idempotency keys, keysSQL when it has keys, appendSQL
// always. read takes their results in the same order.
type pipeline struct {
	ws      []write
	records bool
	keys    []string
	created map[recordKey]time.Time // filled by readFirst
}

func newPipeline(ws []write) *pipeline {
	p := &pipeline{ws: ws}
	for _, w := range ws {
		if w.idem != "" {
			p.keys = append(p.keys, w.idem)
		}
		if w.op == opPut {
			p.records = true
		}
	}
	p.records = p.records || len(p.keys) > 0
	return p
}

// queueFirst queues the statements before the head is taken.
func (p *pipeline) queueFirst(b *pgx.Batch, now time.Time) {
	n := len(p.ws)
	if p.records {
		ids := make([]uuid.UUID, n)
		nss, keys, vals, idems, ops, hashes := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]string, n), make([]string, n)
		for i := range p.ws {
			w := &p.ws[i]
			ids[i], ops[i], hashes[i] = w.id, w.op, w.hash
			if w.op == opPut {
				v := string(w.data)
				nss[i], keys[i], vals[i] = &w.ns, &w.key, &v
			}
			if w.idem != "" {
				idems[i] = &w.idem
			}
		}
		b.Queue(recordsSQL, ids, nss, keys, vals, idems, ops, hashes, now)
	}
	if len(p.keys) > 0 {
		b.Queue(keysSQL, p.keys)
	}
}

// queueAppend queues the statement that takes the head.
func (p *pipeline) queueAppend(b *pgx.Batch, now time.Time) {
	n := len(p.ws)
	ids := make([]uuid.UUID, n)
	types, nss, keys, idems := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	datas := make([]string, n)
	for i := range p.ws {
		w := &p.ws[i]
		ids[i], datas[i] = w.id, string(w.data)
		if w.op == opPut {
			nss[i], keys[i] = &w.ns, &w.key
		} else {
			types[i] = &w.typ
		}
		if w.idem != "" {
			idems[i] = &w.idem
		}
	}
	b.Queue(appendSQL, ids, types, datas, nss, keys, idems, now, NotifyChannel)
}

// stored is what keysSQL read for one idempotency key.
type stored struct {
	op, hash string
	response []byte
	eventID  *string // the event id the key stores (nil: an older format)
	ev       *Event  // that event, when it exists
	created  *time.Time
}

// recordKey identifies a record in maps.
type recordKey struct{ ns, key string }

// readFirst reads the results of queueFirst's statements: when each
// record written was created, and what each idempotency key holds.
func (p *pipeline) readFirst(br pgx.BatchResults) (map[string]stored, error) {
	if p.records {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("ledger: write records: %w", err)
		}
		for rows.Next() {
			var k recordKey
			var created time.Time
			if err := rows.Scan(&k.ns, &k.key, &created); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: write records: %w", err)
			}
			if p.created == nil {
				p.created = map[recordKey]time.Time{}
			}
			p.created[k] = created.UTC()
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("ledger: write records: %w", err)
		}
	}
	if len(p.keys) == 0 {
		return nil, nil
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("ledger: read idempotency keys: %w", err)
	}
	defer rows.Close()
	out := make(map[string]stored, len(p.keys))
	for rows.Next() {
		var key string
		var s stored
		var id *uuid.UUID
		var pos, ver *int64
		var typ, ns, rkey *string
		var data []byte
		var ct *time.Time
		if err := rows.Scan(&key, &s.op, &s.hash, &s.response, &s.eventID, &id, &pos, &typ, &data, &ct, &ns, &rkey, &ver, &s.created); err != nil {
			return nil, fmt.Errorf("ledger: read idempotency keys: %w", err)
		}
		if id != nil {
			ev := Event{ID: *id, Position: *pos, Type: *typ, Data: data, CommitTime: ct.UTC()}
			if ns != nil {
				ev.Record = &RecordRef{Namespace: *ns, Key: *rkey, Version: *ver}
			}
			s.ev = &ev
		}
		out[key] = s
	}
	return out, rows.Err()
}

// appended is one row of appendSQL's result.
type appended struct {
	position int64
	typ      string
	version  *int64
	ct       time.Time
}

// readAppend reads appendSQL's result, by event id.
func (p *pipeline) readAppend(br pgx.BatchResults) (map[uuid.UUID]appended, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("ledger: append: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]appended, len(p.ws))
	for rows.Next() {
		var id uuid.UUID
		var a appended
		if err := rows.Scan(&id, &a.position, &a.typ, &a.version, &a.ct); err != nil {
			return nil, fmt.Errorf("ledger: append: %w", err)
		}
		a.ct = a.ct.UTC()
		out[id] = a
	}
	return out, rows.Err()
}

// outcomes gives each write its outcome: its own event when appendSQL
// inserted it, else the replay or conflict its idempotency key found.
func (p *pipeline) outcomes(keys map[string]stored, evs map[uuid.UUID]appended) []outcome {
	out := make([]outcome, len(p.ws))
	for i, w := range p.ws {
		if a, ok := evs[w.id]; ok {
			ev := Event{ID: w.id, Position: a.position, Type: a.typ, Data: w.data, CommitTime: a.ct}
			if w.op == opPut {
				ev.Record = &RecordRef{Namespace: w.ns, Key: w.key, Version: *a.version}
				out[i].created = p.created[recordKey{w.ns, w.key}]
			}
			out[i].ev = ev
			continue
		}
		s, ok := keys[w.idem]
		if w.idem == "" || !ok {
			// Not written and no key to explain why: the statements disagree.
			out[i].err = fmt.Errorf("ledger: write %s was not appended", w.id)
			continue
		}
		out[i] = s.replay(w)
	}
	return out
}

// conflict reports whether the key stores another request than w's.
func (s stored) conflict(w write) bool { return s.op != w.op || s.hash != w.hash }

// replay returns the first result stored under w's key, or the conflict.
func (s stored) replay(w write) outcome {
	if s.conflict(w) {
		return outcome{err: fault.New(fault.IdempotencyConflict, "idempotencyKey", "this idempotency key was used for a different request")}
	}
	if s.eventID != nil {
		if s.ev == nil {
			return outcome{err: fmt.Errorf("ledger: idempotency key %q stores event %s, which is missing", w.idem, *s.eventID)}
		}
		o := outcome{ev: *s.ev}
		if s.created != nil {
			o.created = s.created.UTC()
		}
		return o
	}
	// A response stored whole by an earlier release: the result itself.
	if w.op == opPut {
		var kv KVValue
		if err := json.Unmarshal(s.response, &kv); err != nil {
			return outcome{err: fmt.Errorf("ledger: idempotency key %q: %w", w.idem, err)}
		}
		return outcome{ev: Event{ID: kv.EventID, Data: kv.Value, CommitTime: kv.UpdatedAt,
			Record: &RecordRef{Namespace: kv.Namespace, Key: kv.Key, Version: kv.Version}}, created: kv.CreatedAt}
	}
	var ev Event
	if err := json.Unmarshal(s.response, &ev); err != nil {
		return outcome{err: fmt.Errorf("ledger: idempotency key %q: %w", w.idem, err)}
	}
	return outcome{ev: ev}
}

// runImplicit sends the whole group in one pipeline with no BEGIN: the
// statements before the Sync run in one implicit transaction, which
// PostgreSQL commits at the Sync, right after the head is taken. The
// outcomes are returned only once the commit is acknowledged (the batch
// closed without error), so every acknowledged write is durable.
func runImplicit(ctx context.Context, conn *pgx.Conn, ws []write, now time.Time) ([]outcome, error) {
	p := newPipeline(ws)
	b := &pgx.Batch{}
	p.queueFirst(b, now)
	p.queueAppend(b, now)
	br := conn.SendBatch(ctx, b)
	keys, err := p.readFirst(br)
	var evs map[uuid.UUID]appended
	if err == nil {
		evs, err = p.readAppend(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("ledger: commit: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return p.outcomes(keys, evs), nil
}

// runAtomic writes the group all or nothing: when a write's idempotency
// key holds a different request, nothing is written and check's error is
// returned. Without keys there is nothing to check before the head is
// taken and it runs as runImplicit. With keys it is two round trips in an
// explicit transaction: BEGIN and the first statements; then, if check
// passes, the append and COMMIT together.
func runAtomic(ctx context.Context, conn *pgx.Conn, ws []write, now time.Time, check func([]write, map[string]stored) error) (out []outcome, err error) {
	p := newPipeline(ws)
	if len(p.keys) == 0 {
		return runImplicit(ctx, conn, ws, now)
	}
	defer func() {
		if err != nil && conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
			// The transaction is open or failed: end it, so the connection
			// goes back to the pool clean (a failed ROLLBACK closes it).
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
				_ = conn.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	p.queueFirst(b, now)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var keys map[string]stored
	if err == nil {
		keys, err = p.readFirst(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := check(ws, keys); err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	p.queueAppend(b, now)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	evs, err := p.readAppend(br)
	if err == nil {
		_, err = br.Exec()
		if err != nil {
			err = fmt.Errorf("ledger: commit: %w", err)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("ledger: commit: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return p.outcomes(keys, evs), nil
}

// statementFailed reports whether err is PostgreSQL refusing a statement
// (so its transaction surely rolled back), as opposed to a failure whose
// outcome is unknown (a connection lost around the COMMIT).
func statementFailed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

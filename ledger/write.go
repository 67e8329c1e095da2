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
	ev := o.ev
	kv.Written = &ev
	kv.CreatedAt = o.created
	if kv.Version == 1 || kv.CreatedAt.IsZero() {
		kv.CreatedAt = o.ev.CommitTime
	}
	return kv
}

// writeSQL writes a group of writes in one statement, in this order:
//
//  1. k inserts the idempotency keys, each storing its write's event id;
//     a key already there is left alone (its write is a replay or a
//     conflict and writes nothing);
//  2. rec upserts the records of the putValues to be written, once per
//     key with the count of its writes in the group;
//  3. only then head takes the ledger head (its count waits for rec), so
//     the head is held from here to the COMMIT that follows once the
//     outcomes are read (and the callers' contexts checked), never while
//     record rows are waited for;
//  4. ins inserts the events at consecutive positions in group order; a
//     key written several times gets consecutive versions, counting back
//     from the record's new version;
//  5. old reads what a key that was already there holds, with its event.
//
// It returns one row per write, in group order. Keys and records are
// locked in sorted order, so two groups cannot deadlock on them.
//
// The head is read through scalar subqueries rather than joined: the
// planner has no statistics on the one-row ledger_head of a new database
// and, joined, estimated the statement so costly that PostgreSQL compiled
// it with JIT, which took seconds. Lookups in the big tables are LATERAL
// ... LIMIT 1, so they stay index lookups per row whatever the statistics
// say (joined, an unanalysed table was scanned whole, or hashed).
const writeSQL = `
WITH i AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
	       WITH ORDINALITY AS i (id, type, data, ns, key, idem, op, hash, ord)),
k AS (
	INSERT INTO idempotency_keys (key, operation, request_hash, response, created_at)
	SELECT idem, op, hash, jsonb_build_object('event', id), $9 FROM i WHERE idem IS NOT NULL ORDER BY idem
	ON CONFLICT (key) DO NOTHING
	RETURNING key),
todo AS (
	SELECT i.*, row_number() OVER (ORDER BY ord) AS rn,
	       row_number() OVER (PARTITION BY ns, key ORDER BY ord DESC) AS later,
	       count(*) OVER (PARTITION BY ns, key) AS writes
	  FROM i WHERE i.idem IS NULL OR i.idem IN (SELECT key FROM k)),
rec AS (
	INSERT INTO kv_values AS v (namespace, key, value, version, event_id, created_at, updated_at)
	SELECT ns, key, data::jsonb, writes, id, $9, $9 FROM todo WHERE ns IS NOT NULL AND later = 1 ORDER BY ns, key
	ON CONFLICT (namespace, key) DO UPDATE
	   SET value = EXCLUDED.value, version = v.version + EXCLUDED.version, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at
	RETURNING v.namespace, v.key, v.version, v.created_at),
n AS (SELECT count(*) AS n FROM todo WHERE (SELECT count(*) FROM rec) >= 0),
head AS (
	UPDATE ledger_head
	   SET position = position + n.n,
	       commit_time = greatest(commit_time + interval '1 microsecond', $9::timestamptz)
	  FROM n WHERE n.n > 0
	RETURNING ledger_head.position - n.n AS base, ledger_head.commit_time),
ins AS (
	INSERT INTO events (id, position, type, data, commit_time, record_namespace, record_key, record_version)
	SELECT t.id, (SELECT base FROM head) + t.rn,
	       coalesce(t.type, t.ns || CASE WHEN r.version - t.later + 1 = 1 THEN '.inserted' ELSE '.updated' END),
	       t.data::jsonb, (SELECT commit_time FROM head), t.ns, t.key, r.version - t.later + 1
	  FROM todo t LEFT JOIN rec r ON r.namespace = t.ns AND r.key = t.key
	RETURNING id, position, type, record_version, commit_time),
old AS (
	SELECT i.idem, x.operation, x.request_hash, x.response, x.response->>'event' AS event,
	       e.id AS eid, e.position, e.type, e.data, e.commit_time, e.record_namespace, e.record_key, e.record_version, v.created_at
	  FROM i
	  JOIN LATERAL (SELECT * FROM idempotency_keys x WHERE x.key = i.idem LIMIT 1) x ON true
	  LEFT JOIN LATERAL (SELECT * FROM events e WHERE e.id = (x.response->>'event')::uuid LIMIT 1) e ON true
	  LEFT JOIN LATERAL (SELECT v.created_at FROM kv_values v WHERE v.namespace = e.record_namespace AND v.key = e.record_key LIMIT 1) v ON true
	 WHERE i.idem IS NOT NULL AND i.idem NOT IN (SELECT key FROM k))
SELECT ins.position, ins.type, ins.record_version, ins.commit_time, r.created_at,
       o.operation, o.request_hash, o.response, o.event,
       o.eid, o.position, o.type, o.data, o.commit_time, o.record_namespace, o.record_key, o.record_version, o.created_at
  FROM i
  LEFT JOIN ins ON ins.id = i.id
  LEFT JOIN rec r ON r.namespace = i.ns AND r.key = i.key
  LEFT JOIN old o ON o.idem = i.idem
 ORDER BY i.ord`

// keysSQL reads what idempotency keys hold, with their events: for a key
// another transaction committed while writeSQL ran (its snapshot did not
// show it), read after.
const keysSQL = `
SELECT k.key, k.operation, k.request_hash, k.response, k.response->>'event',
       e.id, e.position, e.type, e.data, e.commit_time, e.record_namespace, e.record_key, e.record_version, v.created_at
  FROM unnest($1::text[]) AS want (key)
  JOIN LATERAL (SELECT * FROM idempotency_keys k WHERE k.key = want.key LIMIT 1) k ON true
  LEFT JOIN LATERAL (SELECT * FROM events e WHERE e.id = (k.response->>'event')::uuid LIMIT 1) e ON true
  LEFT JOIN LATERAL (SELECT v.created_at FROM kv_values v WHERE v.namespace = e.record_namespace AND v.key = e.record_key LIMIT 1) v ON true`

// queueWrite queues writeSQL for ws.
func queueWrite(b *pgx.Batch, ws []write, now time.Time) {
	n := len(ws)
	ids := make([]uuid.UUID, n)
	types, nss, keys, idems := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	datas, ops, hashes := make([]string, n), make([]string, n), make([]string, n)
	for i := range ws {
		w := &ws[i]
		ids[i], datas[i], ops[i], hashes[i] = w.id, string(w.data), w.op, w.hash
		if w.op == opPut {
			nss[i], keys[i] = &w.ns, &w.key
		} else {
			types[i] = &w.typ
		}
		if w.idem != "" {
			idems[i] = &w.idem
		}
	}
	b.Queue(writeSQL, ids, types, datas, nss, keys, idems, ops, hashes, now)
}

// stored is what an idempotency key held by an earlier write holds.
type stored struct {
	op, hash string
	response []byte
	eventID  *string // the event id the key stores (nil: an older format)
	ev       *Event  // that event, when it exists
	created  *time.Time
}

// storedCols are the scan targets of a stored key and its event.
type storedCols struct {
	op, hash, eventID, typ, ns, rkey *string
	response, data                   []byte
	id                               *uuid.UUID
	pos, ver                         *int64
	ct, created                      *time.Time
}

func (c *storedCols) targets() []any {
	return []any{&c.op, &c.hash, &c.response, &c.eventID, &c.id, &c.pos, &c.typ, &c.data, &c.ct, &c.ns, &c.rkey, &c.ver, &c.created}
}

// stored returns what the key holds, or nil when the row had no key.
func (c *storedCols) stored() *stored {
	if c.op == nil {
		return nil
	}
	s := &stored{op: *c.op, hash: *c.hash, response: c.response, eventID: c.eventID, created: c.created}
	if c.id != nil {
		ev := Event{ID: *c.id, Position: *c.pos, Type: *c.typ, Data: c.data, CommitTime: c.ct.UTC()}
		if c.ns != nil {
			ev.Record = &RecordRef{Namespace: *c.ns, Key: *c.rkey, Version: *c.ver}
		}
		s.ev = &ev
	}
	return s
}

// readWrite reads writeSQL's rows into one outcome per write. The keys of
// writes that were not written and whose key's holder the statement could
// not see are returned as missing, for readKeys.
func readWrite(br pgx.BatchResults, ws []write) (out []outcome, missing []string, err error) {
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: write: %w", err)
	}
	defer rows.Close()
	out = make([]outcome, 0, len(ws))
	for rows.Next() {
		var pos, ver *int64
		var typ *string
		var ct, created *time.Time
		var c storedCols
		if err := rows.Scan(append([]any{&pos, &typ, &ver, &ct, &created}, c.targets()...)...); err != nil {
			return nil, nil, fmt.Errorf("ledger: write: %w", err)
		}
		if len(out) == len(ws) {
			return nil, nil, errors.New("ledger: write: more rows than writes")
		}
		w := ws[len(out)]
		var o outcome
		switch st := c.stored(); {
		case pos != nil:
			o.ev = Event{ID: w.id, Position: *pos, Type: *typ, Data: w.data, CommitTime: ct.UTC()}
			if w.op == opPut {
				o.ev.Record = &RecordRef{Namespace: w.ns, Key: w.key, Version: *ver}
				if created != nil {
					o.created = created.UTC()
				}
			}
		case st != nil:
			o = st.replay(w)
		case w.idem != "":
			missing = append(missing, w.idem)
		default:
			o.err = fmt.Errorf("ledger: write %s was not appended", w.id)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("ledger: write: %w", err)
	}
	if len(out) != len(ws) {
		return nil, nil, fmt.Errorf("ledger: write: %d rows for %d writes", len(out), len(ws))
	}
	return out, missing, nil
}

// readKeys fills in the outcomes of the writes whose keys readWrite could
// not see, reading them through q after the statement, when what committed
// meanwhile is visible.
func readKeys(ctx context.Context, q Querier, ws []write, out []outcome, missing []string) error {
	if len(missing) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, keysSQL, missing)
	if err != nil {
		return fmt.Errorf("ledger: read idempotency keys: %w", err)
	}
	defer rows.Close()
	found := map[string]*stored{}
	for rows.Next() {
		var key string
		var c storedCols
		if err := rows.Scan(append([]any{&key}, c.targets()...)...); err != nil {
			return fmt.Errorf("ledger: read idempotency keys: %w", err)
		}
		found[key] = c.stored()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: read idempotency keys: %w", err)
	}
	want := map[string]bool{}
	for _, k := range missing {
		want[k] = true
	}
	for i, w := range ws {
		if w.idem == "" || !want[w.idem] {
			continue
		}
		if st := found[w.idem]; st != nil {
			out[i] = st.replay(w)
		} else {
			out[i] = outcome{err: fmt.Errorf("ledger: idempotency key %q of write %s is neither written nor held", w.idem, w.id)}
		}
	}
	return nil
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

// runAtomic writes ws all or nothing in an explicit transaction: BEGIN and
// the write together, then COMMIT once check accepts the outcomes, and
// hands the new head to notifier. When
// check refuses them (a write whose idempotency key holds another request),
// nothing is written and check's error is returned. COMMIT is sent with
// ctx, so a ctx that ended before it commits nothing (issue 10 item 1: an
// implicit transaction committed at the pipeline's Sync would commit even
// after its caller gave up).
func runAtomic(ctx context.Context, conn *pgx.Conn, notifier *Notifier, ws []write, now time.Time, check func([]write, []outcome) error) (out []outcome, err error) {
	defer func() {
		if err != nil {
			endTx(ctx, conn)
		}
	}()
	out, err = writeInTx(ctx, conn, ws, now, txEnd{})
	if err == nil {
		err = check(ws, out)
	}
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return nil, fmt.Errorf("ledger: commit: %w", err)
	}
	notifier.Head(newest(out))
	return out, nil
}

// newest returns the newest position the outcomes appended (0: none).
func newest(out []outcome) int64 {
	var pos int64
	for _, o := range out {
		if o.err == nil {
			pos = max(pos, o.ev.Position)
		}
	}
	return pos
}

// statementFailed reports whether err is PostgreSQL refusing a statement
// (so its transaction surely rolled back), as opposed to a failure whose
// outcome is unknown (a connection lost around the COMMIT).
func statementFailed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

package chaos

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/migrations"
)

// Invariants the chaos run checks (issue 10; SPEC L1-L3, S2, S6, T1, T6 and
// HARD-PARTS 2 and 3). Check tests the database-side ones; Run adds the
// last three. docs/chaos.md explains each.
const (
	// InvariantWritePresent: every acknowledged write is in the ledger once,
	// as the event of its record version, with the value written and the
	// record event type; its idempotency key is stored (L2, L3).
	InvariantWritePresent = "write-present"
	// InvariantWriteOnce: every record event of the load's namespaces is a
	// write the load made (acknowledged at that version, or not
	// acknowledged), no write's value is in two events, and every record
	// holds the version and value of its latest event, its versions 1..n.
	InvariantWriteOnce = "write-once"
	// InvariantDelivered: every entry.inserted event is an input of exactly
	// one session of each monitor action, the session of its account_id;
	// no other event (account.inserted, entry.updated) is an input; no
	// event became an intake record (S6, HARD-PARTS 2).
	InvariantDelivered = "delivered-once"
	// InvariantOrigin: every account.inserted event is the origin of
	// exactly one session of each monitor action, the one named by its
	// account_id, and every session has such an origin (S2).
	InvariantOrigin = "session-origin"
	// InvariantTakenOnce: no input is listed by two turns (T1, HARD-PARTS 3).
	InvariantTakenOnce = "input-taken-once"
	// InvariantConsumed: every input is CONSUMED by the completed turn that
	// lists it (T1, T6).
	InvariantConsumed = "input-consumed"
	// InvariantGapless: each session's turns are numbered 1..turn_count (T1).
	InvariantGapless = "turns-gapless"
	// InvariantState: each session's echo state counts its consumed inputs
	// and names its last turn: state committed with consumption (T6).
	InvariantState = "state-committed"
	// InvariantSettled: no turn left RUNNING or failed, every execution
	// SUCCEEDED, every session OPEN.
	InvariantSettled = "settled"
	// InvariantReferences: no row refers to a missing parent
	// (migrations.ReferencesSQL: the references kept without foreign keys,
	// issue 14).
	InvariantReferences = "references"

	// InvariantAcked (run): every write the load attempted was
	// acknowledged within its retry budget, none refused for good.
	InvariantAcked = "writes-acknowledged"
	// InvariantConverged (run): after the load, every event dispatched and
	// every input taken within Config.Converge.
	InvariantConverged = "converged"
	// InvariantSurvived (run): no process exited on its own once it was
	// up (a kill -9 is ours; PostgreSQL restarting is no reason to exit).
	InvariantSurvived = "processes-survive"
)

// Violation is one invariant broken: how many rows (or writes, or exits)
// break it, and up to five of them described.
type Violation struct {
	Invariant string
	Count     int
	Examples  []string
}

// String is the violation on one line, then its examples indented.
func (v Violation) String() string {
	s := fmt.Sprintf("%s: %d", v.Invariant, v.Count)
	for _, e := range v.Examples {
		s += "\n    " + e
	}
	return s
}

// Expect is what the load knows, against which Check reads the database:
// the monitor actions and every write attempted (Version 0 when not
// acknowledged).
type Expect struct {
	Actions []uuid.UUID
	Writes  []*Write
}

// Querier is what Check needs of a connection (*pgx.Conn, *pgxpool.Pool).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// maxExamples is how many rows a violation describes.
const maxExamples = 5

// Check runs each database-side invariant over a settled database (nothing
// may write to it meanwhile) and returns the broken ones, in the order of
// the Invariant* constants; an error only when a query fails.
func Check(ctx context.Context, db Querier, exp Expect) ([]Violation, error) {
	args := expectArgs(exp)
	var out []Violation
	for _, c := range checks {
		rows, err := db.Query(ctx, checkPrefix+`SELECT count(*) OVER (), detail FROM (`+c.sql+`) v(detail) ORDER BY detail LIMIT `+fmt.Sprint(maxExamples), args...)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", c.invariant, err)
		}
		v := Violation{Invariant: c.invariant}
		for rows.Next() {
			var detail string
			if err := rows.Scan(&v.Count, &detail); err != nil {
				rows.Close()
				return nil, fmt.Errorf("check %s: %w", c.invariant, err)
			}
			v.Examples = append(v.Examples, detail)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("check %s: %w", c.invariant, err)
		}
		if v.Count > 0 {
			out = append(out, v)
		}
	}
	return out, nil
}

// expectArgs are the parameters of checkPrefix: the actions, then the
// writes column by column.
func expectArgs(exp Expect) []any {
	n := len(exp.Writes)
	ns, keys, idem, vals := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions := make([]int64, n)
	for i, w := range exp.Writes {
		ns[i], keys[i], versions[i], idem[i], vals[i] = w.Namespace, w.Key, w.Version, w.IdemKey, string(w.Value)
	}
	actions := exp.Actions
	if actions == nil {
		actions = []uuid.UUID{}
	}
	return []any{actions, ns, keys, versions, idem, vals}
}

// checkPrefix binds the expectation: actions(id) are the monitor actions,
// writes(namespace, key, version, idem_key, value) every write attempted
// (version 0: not acknowledged), load_ns the namespaces the load writes.
const checkPrefix = `WITH actions AS (SELECT unnest($1::uuid[]) AS id),
writes AS (SELECT w.namespace, w.key, w.version, w.idem_key, w.value::jsonb AS value
	FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[]) AS w(namespace, key, version, idem_key, value)),
load_ns AS (SELECT unnest(ARRAY['` + AccountNS + `', '` + EntryNS + `']) AS ns)
`

// checks are the database-side invariants, each a query of one text column
// with a row per breach.
var checks = []struct{ invariant, sql string }{
	{InvariantWritePresent, `
SELECT format('%s/%s version %s (key %s): %s events with its value; idempotency key %s',
		w.namespace, w.key, w.version, w.idem_key, count(e.id), CASE WHEN k.key IS NULL THEN 'missing' ELSE 'stored' END)
FROM writes w
LEFT JOIN events e ON e.record_namespace = w.namespace AND e.record_key = w.key AND e.record_version = w.version
	AND e.data = w.value AND e.type = w.namespace || CASE WHEN w.version = 1 THEN '.inserted' ELSE '.updated' END
LEFT JOIN idempotency_keys k ON k.key = w.idem_key
WHERE w.version > 0
GROUP BY w.namespace, w.key, w.version, w.idem_key, k.key
HAVING count(e.id) <> 1 OR k.key IS NULL`},

	{InvariantWriteOnce, `
SELECT format('event at position %s (%s %s/%s version %s) is no write of the load', e.position, e.type, e.record_namespace, e.record_key, e.record_version)
FROM events e
WHERE e.record_namespace IN (SELECT ns FROM load_ns) AND NOT EXISTS (
	SELECT 1 FROM writes w WHERE w.namespace = e.record_namespace AND w.key = e.record_key AND w.value = e.data
		AND (w.version = e.record_version OR w.version = 0))
UNION ALL
SELECT format('%s/%s: one written value is in %s events (versions %s)', e.record_namespace, e.record_key, count(*), string_agg(e.record_version::text, ', ' ORDER BY e.record_version))
FROM events e
WHERE e.record_namespace IN (SELECT ns FROM load_ns)
GROUP BY e.record_namespace, e.record_key, e.data HAVING count(*) > 1
UNION ALL
SELECT format('record %s/%s: version %s, but %s events with versions up to %s; its event %s', x.ns, x.key,
		coalesce(v.version::text, 'missing'), x.n, x.top, CASE WHEN le.id IS NULL THEN 'missing' WHEN le.data <> v.value THEN 'holds another value' ELSE 'ok' END)
FROM (SELECT record_namespace AS ns, record_key AS key, count(*) AS n, max(record_version) AS top
	FROM events WHERE record_namespace IN (SELECT ns FROM load_ns) GROUP BY 1, 2) x
LEFT JOIN kv_values v ON v.namespace = x.ns AND v.key = x.key
LEFT JOIN events le ON le.id = v.event_id AND le.record_namespace = v.namespace AND le.record_key = v.key AND le.record_version = v.version
WHERE v.key IS NULL OR le.id IS NULL OR v.version <> x.n OR v.version <> x.top OR le.data <> v.value`},

	{InvariantDelivered, `
SELECT format('action %s: entry event at position %s (account %s) is an input %s times, %s of them in its account''s session',
		a.id, e.position, e.data->>'account_id', coalesce(d.n, 0), coalesce(d.own, 0))
FROM actions a CROSS JOIN events e
LEFT JOIN (SELECT s.action_id, i.event_id, count(*) AS n, count(*) FILTER (WHERE s.id = ev.data->>'account_id') AS own
	FROM session_inputs i JOIN sessions s ON s.sid = i.sid JOIN events ev ON ev.id = i.event_id
	WHERE s.action_id IN (SELECT id FROM actions) GROUP BY 1, 2) d ON d.action_id = a.id AND d.event_id = e.id
WHERE e.type = '` + EntryNS + `.inserted' AND (coalesce(d.n, 0) <> 1 OR coalesce(d.own, 0) <> 1)
UNION ALL
SELECT format('action %s: session %s has input %s (%s), not an entry event', s.action_id, s.id, i.seq, coalesce(e.type, i.kind))
FROM session_inputs i JOIN sessions s ON s.sid = i.sid LEFT JOIN events e ON e.id = i.event_id
WHERE s.action_id IN (SELECT id FROM actions) AND e.type IS DISTINCT FROM '` + EntryNS + `.inserted'
UNION ALL
SELECT format('action %s: intake record %s for the event %s: %s %s', r.action_id, r.id, r.event_id, r.reason, r.message)
FROM intake_records r WHERE r.action_id IN (SELECT id FROM actions)`},

	{InvariantOrigin, `
SELECT format('action %s: account event at position %s (account %s) is the origin of %s sessions, %s of them its account''s',
		a.id, e.position, e.data->>'account_id', o.n, o.own)
FROM actions a CROSS JOIN events e
CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE s.id = e.data->>'account_id') AS own
	FROM sessions s WHERE s.action_id = a.id AND s.origin_event_id = e.id) o
WHERE e.type = '` + AccountNS + `.inserted' AND (o.n <> 1 OR o.own <> 1)
UNION ALL
SELECT format('action %s: session %s (sid %s) has origin %s, not the account event naming it', s.action_id, s.id, s.sid, coalesce(e.type, 'none'))
FROM sessions s LEFT JOIN events e ON e.id = s.origin_event_id
WHERE s.action_id IN (SELECT id FROM actions)
	AND (e.type IS DISTINCT FROM '` + AccountNS + `.inserted' OR e.data->>'account_id' IS DISTINCT FROM s.id)`},

	{InvariantTakenOnce, `
SELECT format('session %s (sid %s): input %s is listed by turns %s', s.id, t.sid, t.seq, string_agg(t.turn::text, ', ' ORDER BY t.turn))
FROM turn_inputs t JOIN sessions s ON s.sid = t.sid
WHERE s.action_id IN (SELECT id FROM actions)
GROUP BY s.id, t.sid, t.seq HAVING count(*) > 1`},

	{InvariantConsumed, `
SELECT format('session %s (sid %s): input %s is %s (turn %s), not consumed by a completed turn listing it', s.id, i.sid, i.seq, i.status, coalesce(i.turn::text, 'none'))
FROM session_inputs i JOIN sessions s ON s.sid = i.sid
WHERE s.action_id IN (SELECT id FROM actions) AND (i.status <> 'CONSUMED' OR i.turn IS NULL OR NOT EXISTS (
	SELECT 1 FROM turn_inputs ti JOIN session_turns t ON t.sid = ti.sid AND t.number = ti.turn
	WHERE ti.sid = i.sid AND ti.seq = i.seq AND ti.turn = i.turn AND t.status = 'COMPLETED'))`},

	{InvariantGapless, `
SELECT format('session %s (sid %s): turn_count %s, but %s turns numbered %s to %s', s.id, s.sid, s.turn_count, coalesce(t.n, 0), t.lo, t.hi)
FROM sessions s
LEFT JOIN (SELECT sid, count(*) AS n, min(number) AS lo, max(number) AS hi FROM session_turns GROUP BY sid) t ON t.sid = s.sid
WHERE s.action_id IN (SELECT id FROM actions)
	AND (coalesce(t.n, 0) <> s.turn_count OR coalesce(t.hi, 0) <> s.turn_count OR coalesce(t.lo, 1) <> 1)`},

	{InvariantState, `
SELECT format('session %s (sid %s): state %s, but %s consumed inputs and turn_count %s', s.id, s.sid, coalesce(s.state::text, 'null'), c.n, s.turn_count)
FROM sessions s
CROSS JOIN LATERAL (SELECT count(*) AS n FROM session_inputs i WHERE i.sid = s.sid AND i.status = 'CONSUMED') c
WHERE s.action_id IN (SELECT id FROM actions)
	AND (coalesce((s.state->>'count')::bigint, 0) <> c.n OR coalesce((s.state->>'last_turn')::int, 0) <> s.turn_count)`},

	{InvariantSettled, `
SELECT format('session %s (sid %s) is %s: %s', s.id, s.sid, s.status, coalesce(s.reason, ''))
FROM sessions s WHERE s.action_id IN (SELECT id FROM actions) AND s.status <> 'OPEN'
UNION ALL
SELECT format('session %s (sid %s): turn %s is %s', s.id, s.sid, t.number, t.status)
FROM session_turns t JOIN sessions s ON s.sid = t.sid
WHERE s.action_id IN (SELECT id FROM actions) AND t.status <> 'COMPLETED'
UNION ALL
SELECT format('execution %s (sid %s, turn %s) is %s after %s attempts: %s', x.id, x.sid, x.turn, x.status, x.attempts, coalesce(x.error, ''))
FROM executions x WHERE x.action_id IN (SELECT id FROM actions) AND x.status <> 'SUCCEEDED'`},
	{InvariantReferences, `SELECT format('%s: %s', r.ref, r.row) FROM (` + migrations.ReferencesSQL + `) r(ref, row)`},
}

// DBFigures are counts read from the database after a run.
type DBFigures struct {
	Events   int64 // every event in the ledger
	Sessions int64 // sessions of the monitor actions
	Turns    int64 // their turns
	Inputs   int64 // their inputs
	Replayed int64 // executions that ran more than once (a turn cut off and run again)
}

// Figures reads DBFigures for the given monitor actions.
func Figures(ctx context.Context, db Querier, actions []uuid.UUID) (DBFigures, error) {
	var f DBFigures
	err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM events),
		(SELECT count(*) FROM sessions WHERE action_id = ANY($1)),
		(SELECT count(*) FROM session_turns t JOIN sessions s ON s.sid = t.sid WHERE s.action_id = ANY($1)),
		(SELECT count(*) FROM session_inputs i JOIN sessions s ON s.sid = i.sid WHERE s.action_id = ANY($1)),
		(SELECT count(*) FROM executions WHERE action_id = ANY($1) AND attempts > 1)`, actions).
		Scan(&f.Events, &f.Sessions, &f.Turns, &f.Inputs, &f.Replayed)
	if err != nil {
		return f, fmt.Errorf("figures: %w", err)
	}
	return f, nil
}

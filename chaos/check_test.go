package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/chaos"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// The checker proves what it claims (issue 10, `make chaos`): a small
// settled database as a chaos run leaves it (one monitor action, one
// account session, three entries in two turns, one entry update) passes,
// and each deliberately broken copy of it is reported under exactly the
// invariants it breaks.
func TestCheckReportsEachBrokenFixture(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, tc := range []struct {
		name     string
		breakSQL string // SQL statements run on the fixture; {sid}, {sid2} are the sessions' sids
		extra    *chaos.Write
		want     []string
	}{
		{name: "clean fixture", want: nil},
		{name: "an input taken by two turns", want: []string{chaos.InvariantTakenOnce},
			breakSQL: `INSERT INTO turn_inputs (sid, turn, seq) VALUES ({sid}, 2, 1)`},
		{name: "a gap in the turn numbers", want: []string{chaos.InvariantGapless},
			// turn 2 becomes turn 3: turns 1 and 3, turn_count 3
			breakSQL: `WITH x AS (INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at)
					SELECT gen_random_uuid(), action_id, 1, sid, 3, 'SUCCEEDED', 1, now() FROM sessions WHERE sid = {sid} RETURNING id)
				INSERT INTO session_turns (sid, number, status, execution_id, started_at, finished_at)
					SELECT {sid}, 3, 'COMPLETED', id, now(), now() FROM x;
				DELETE FROM turn_inputs WHERE sid = {sid} AND turn = 2;
				INSERT INTO turn_inputs (sid, turn, seq) VALUES ({sid}, 3, 3);
				UPDATE session_inputs SET turn = 3 WHERE sid = {sid} AND seq = 3;
				DELETE FROM session_turns WHERE sid = {sid} AND number = 2;
				UPDATE sessions SET turn_count = 3, state = '{"count": 3, "last_turn": 3}' WHERE sid = {sid}`},
		{name: "an acknowledged write missing", want: []string{chaos.InvariantWritePresent},
			extra: &chaos.Write{Namespace: chaos.EntryNS, Key: "e9", Value: json.RawMessage(`{"account_id": "x", "w": "w9"}`), IdemKey: "k9", Version: 1}},
		{name: "a write applied twice", want: []string{chaos.InvariantWriteOnce},
			breakSQL: `INSERT INTO events (id, position, type, data, commit_time, record_namespace, record_key, record_version)
					SELECT gen_random_uuid(), 7, 'entry.updated', data, now(), 'entry', 'e2', 2 FROM events WHERE position = 3;
				UPDATE kv_values SET version = 2, event_id = (SELECT id FROM events WHERE position = 7) WHERE namespace = 'entry' AND key = 'e2'`},
		{name: "an entry delivered twice", want: []string{chaos.InvariantDelivered},
			breakSQL: `INSERT INTO session_inputs (sid, seq, identity, kind, event_id, starts_turn, status, turn, byte_size, delivered_at, order_key)
					SELECT {sid}, 4, 'again', 'EVENT', id, true, 'CONSUMED', 2, 10, now(), lpad('4', 20, '0') FROM events WHERE position = 2;
				INSERT INTO turn_inputs (sid, turn, seq) VALUES ({sid}, 2, 4);
				UPDATE sessions SET state = '{"count": 4, "last_turn": 2}' WHERE sid = {sid}`},
		{name: "an entry never delivered", want: []string{chaos.InvariantDelivered},
			breakSQL: `DELETE FROM turn_inputs WHERE sid = {sid} AND seq = 3;
				DELETE FROM session_inputs WHERE sid = {sid} AND seq = 3;
				UPDATE sessions SET state = '{"count": 2, "last_turn": 2}' WHERE sid = {sid}`},
		{name: "an entry delivered to another account's session", want: []string{chaos.InvariantDelivered},
			// e3 (account 1) is taken by turn 1 of account 2's session instead
			breakSQL: `DELETE FROM turn_inputs WHERE sid = {sid} AND seq = 3;
				DELETE FROM session_inputs WHERE sid = {sid} AND seq = 3;
				UPDATE sessions SET state = '{"count": 2, "last_turn": 2}' WHERE sid = {sid};
				WITH x AS (INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at)
					SELECT gen_random_uuid(), action_id, 1, sid, 1, 'SUCCEEDED', 1, now() FROM sessions WHERE sid = {sid2} RETURNING id)
				INSERT INTO session_turns (sid, number, status, execution_id, started_at, finished_at)
					SELECT {sid2}, 1, 'COMPLETED', id, now(), now() FROM x;
				INSERT INTO session_inputs (sid, seq, identity, kind, event_id, starts_turn, status, turn, byte_size, delivered_at, order_key)
					SELECT {sid2}, 1, 'event:' || id, 'EVENT', id, true, 'CONSUMED', 1, 10, now(), lpad('1', 20, '0') FROM events WHERE position = 5;
				INSERT INTO turn_inputs (sid, turn, seq) SELECT {sid2}, 1, 1;
				UPDATE sessions SET turn_count = 1, state = '{"count": 1, "last_turn": 1}' WHERE sid = {sid2}`},
		{name: "a session without its account event as origin", want: []string{chaos.InvariantOrigin},
			breakSQL: `UPDATE sessions SET origin_event_id = (SELECT id FROM events WHERE position = 2) WHERE sid = {sid}`},
		{name: "state not committed with the consumption", want: []string{chaos.InvariantState},
			breakSQL: `UPDATE sessions SET state = '{"count": 2, "last_turn": 2}' WHERE sid = {sid}`},
		{name: "a transcript entry of a missing execution", want: []string{chaos.InvariantReferences},
			breakSQL: `INSERT INTO transcript_entries (execution_id, seq, kind, data, at) VALUES (gen_random_uuid(), 1, 'note', '{}', now())`},
		{name: "a turn input of a missing turn", want: []string{chaos.InvariantTakenOnce, chaos.InvariantReferences},
			breakSQL: `INSERT INTO turn_inputs (sid, turn, seq) VALUES ({sid}, 9, 1)`},
		{name: "a turn left running", want: []string{chaos.InvariantConsumed, chaos.InvariantSettled},
			breakSQL: `UPDATE session_turns SET status = 'RUNNING' WHERE sid = {sid} AND number = 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }() // each case starts from the same fixture
			exp, sid, sid2 := fixture(t, tx)
			for _, stmt := range strings.Split(tc.breakSQL, ";") {
				if strings.TrimSpace(stmt) == "" {
					continue
				}
				stmt = strings.NewReplacer("{sid}", fmt.Sprint(sid), "{sid2}", fmt.Sprint(sid2)).Replace(stmt)
				_, err := tx.Exec(ctx, stmt)
				require.NoError(t, err, stmt)
			}
			if tc.extra != nil {
				exp.Writes = append(exp.Writes, tc.extra)
			}
			vs, err := chaos.Check(ctx, tx, exp)
			require.NoError(t, err)
			var got []string
			for _, v := range vs {
				got = append(got, v.Invariant)
				require.NotEmpty(t, v.Examples, "a violation describes its rows")
				t.Logf("%s", v)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// fixture fills tx with what a settled chaos run leaves for two accounts:
// the account events (each the origin of its account's session), entries
// e1, e2, e3 of account 1 (e1 updated once), turn 1 taking e1 and e2, turn 2
// taking e3; account 2 has no entry, so its session has no turn. It returns
// the load's expectation and the two sessions' sids.
func fixture(t *testing.T, tx pgx.Tx) (chaos.Expect, int64, int64) {
	t.Helper()
	ctx := t.Context()
	action, acct, acct2 := uuid.New(), uuid.NewString(), uuid.NewString()
	writes := []*chaos.Write{
		{Namespace: chaos.AccountNS, Key: acct, Value: json.RawMessage(`{"account_id": "` + acct + `"}`), Version: 1},
		{Namespace: chaos.EntryNS, Key: "e1", Value: json.RawMessage(`{"account_id": "` + acct + `", "w": "w2"}`), Version: 1},
		{Namespace: chaos.EntryNS, Key: "e2", Value: json.RawMessage(`{"account_id": "` + acct + `", "w": "w3"}`), Version: 1},
		{Namespace: chaos.EntryNS, Key: "e1", Value: json.RawMessage(`{"account_id": "` + acct + `", "w": "w4", "rev": 1}`), Version: 2},
		{Namespace: chaos.EntryNS, Key: "e3", Value: json.RawMessage(`{"account_id": "` + acct + `", "w": "w5"}`), Version: 1},
		{Namespace: chaos.AccountNS, Key: acct2, Value: json.RawMessage(`{"account_id": "` + acct2 + `"}`), Version: 1},
	}
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO actions (id, current_version, created_at, updated_at) VALUES ($1, 1, now(), now())`, action)
	for i, w := range writes {
		w.IdemKey = fmt.Sprintf("k%d", i+1)
		typ := w.Namespace + ".inserted"
		if w.Version > 1 {
			typ = w.Namespace + ".updated"
		}
		batch.Queue(`INSERT INTO events (id, position, type, data, commit_time, record_namespace, record_key, record_version)
			VALUES (gen_random_uuid(), $1, $2, $3, now(), $4, $5, $6)`, i+1, typ, string(w.Value), w.Namespace, w.Key, w.Version)
		batch.Queue(`INSERT INTO kv_values (namespace, key, value, version, event_id, created_at, updated_at)
			SELECT $1, $2, data, $3, id, now(), now() FROM events WHERE position = $4
			ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version, event_id = EXCLUDED.event_id`,
			w.Namespace, w.Key, w.Version, i+1)
		batch.Queue(`INSERT INTO idempotency_keys (key, operation, request_hash, response, created_at) VALUES ($1, 'putValue', 'h', '{}', now())`, w.IdemKey)
	}
	batch.Queue(`UPDATE ledger_head SET position = $1`, len(writes))
	batch.Queue(`UPDATE dispatch_state SET position = $1`, len(writes))
	require.NoError(t, tx.SendBatch(ctx, batch).Close())

	sids := make([]int64, 2)
	for i, s := range []struct {
		acct, state   string
		origin, turns int
	}{{acct, `{"count": 3, "last_turn": 2}`, 1, 2}, {acct2, "", 6, 0}} {
		require.NoError(t, tx.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, state, status, origin_event_id,
				started_at, created_at, updated_at, turn_count, input_count)
			SELECT $1, $2, 1, jsonb_build_object('account_id', $2::text), NULLIF($3, '')::jsonb, 'OPEN', id, now(), now(), now(), $5::int, $5::int
			FROM events WHERE position = $4 RETURNING sid`, action, s.acct, s.state, s.origin, s.turns).Scan(&sids[i]))
	}
	sid := sids[0]
	batch = &pgx.Batch{}
	for turn := 1; turn <= 2; turn++ {
		batch.Queue(`WITH x AS (INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at)
				VALUES (gen_random_uuid(), $1, 1, $2, $3, 'SUCCEEDED', 1, now()) RETURNING id)
			INSERT INTO session_turns (sid, number, status, execution_id, started_at, finished_at) SELECT $2, $3, 'COMPLETED', id, now(), now() FROM x`,
			action, sid, turn)
	}
	// inputs 1-3: entries e1, e2 (turn 1) and e3 (turn 2); the update is no input
	for seq, in := range []struct{ position, turn int }{{2, 1}, {3, 1}, {5, 2}} {
		batch.Queue(`INSERT INTO session_inputs (sid, seq, identity, kind, event_id, starts_turn, status, turn, byte_size, delivered_at, order_key)
			SELECT $1, $2, 'event:' || id, 'EVENT', id, true, 'CONSUMED', $3, 10, now(), lpad($5, 20, '0') FROM events WHERE position = $4`,
			sid, seq+1, in.turn, in.position, fmt.Sprint(seq+1))
		batch.Queue(`INSERT INTO turn_inputs (sid, turn, seq) VALUES ($1, $2, $3)`, sid, in.turn, seq+1)
	}
	require.NoError(t, tx.SendBatch(ctx, batch).Close())
	return chaos.Expect{Actions: []uuid.UUID{action}, Writes: writes}, sids[0], sids[1]
}

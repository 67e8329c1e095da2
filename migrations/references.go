package migrations

// ReferencesSQL lists the rows whose parent is missing, for the references
// that migration 00024 keeps without foreign keys (issue 14): one row per
// orphan, (reference text, row text), at most 20 per reference. A
// database the service wrote holds none; every test database is checked
// with it when its test ends (pgtest), and every chaos run
// (chaos.InvariantReferences). Tables are named as the search path finds
// them, but for public.actions, which chaos's checks shadow with a CTE.
const ReferencesSQL = `
(SELECT 'kv_values.event_id', format('%s/%s -> event %s', v.namespace, v.key, v.event_id)
   FROM kv_values v WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = v.event_id) LIMIT 20)
UNION ALL
(SELECT 'session_inputs.sid', format('input %s/%s', i.sid, i.seq)
   FROM session_inputs i WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.sid = i.sid) LIMIT 20)
UNION ALL
(SELECT 'session_inputs.event_id', format('input %s/%s -> event %s', i.sid, i.seq, i.event_id)
   FROM session_inputs i WHERE i.event_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = i.event_id) LIMIT 20)
UNION ALL
(SELECT 'executions.action_id', format('execution %s -> action %s', x.id, x.action_id)
   FROM executions x WHERE NOT EXISTS (SELECT 1 FROM public.actions a WHERE a.id = x.action_id) LIMIT 20)
UNION ALL
(SELECT 'executions.sid', format('execution %s -> session %s', x.id, x.sid)
   FROM executions x WHERE x.sid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.sid = x.sid) LIMIT 20)
UNION ALL
(SELECT 'executions.event_id', format('execution %s -> event %s', x.id, x.event_id)
   FROM executions x WHERE x.event_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = x.event_id) LIMIT 20)
UNION ALL
(SELECT 'session_turns.sid', format('turn %s/%s', t.sid, t.number)
   FROM session_turns t WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.sid = t.sid) LIMIT 20)
UNION ALL
(SELECT 'session_turns.execution_id', format('turn %s/%s -> execution %s', t.sid, t.number, t.execution_id)
   FROM session_turns t WHERE NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = t.execution_id) LIMIT 20)
UNION ALL
(SELECT 'turn_inputs.turn', format('turn %s/%s, input %s', ti.sid, ti.turn, ti.seq)
   FROM turn_inputs ti WHERE NOT EXISTS (SELECT 1 FROM session_turns t WHERE t.sid = ti.sid AND t.number = ti.turn) LIMIT 20)
UNION ALL
(SELECT 'turn_inputs.seq', format('turn %s/%s, input %s', ti.sid, ti.turn, ti.seq)
   FROM turn_inputs ti WHERE NOT EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = ti.sid AND i.seq = ti.seq) LIMIT 20)
UNION ALL
(SELECT 'transcript_entries.execution_id', format('entry %s of execution %s', e.seq, e.execution_id)
   FROM transcript_entries e WHERE NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = e.execution_id) LIMIT 20)`

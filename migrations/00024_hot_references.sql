-- +goose Up

-- Issue 14: the rows every write, delivery and turn adds refer to their
-- parents without foreign keys. Each key cost a lookup of the parent row
-- (with a share lock on it) per inserted row: about ten per entry under
-- single writes, which with the rest of the trigger machinery took about
-- a sixth of PostgreSQL's CPU (A/B with the keys on and off: bulk writes
-- 1.13/0.88 -> 1.47/1.26 of the insert ceiling, inputs consumed end to end
-- 0.37/0.31 -> 0.45/0.38). The parents (events, actions, sessions,
-- executions, session_turns, session_inputs) are never deleted, and only
-- the service writes these tables, in the transaction that writes or reads
-- the parent; migrations.ReferencesSQL lists any row whose parent is
-- missing, and every test database and chaos run is checked with it.
ALTER TABLE kv_values          DROP CONSTRAINT kv_values_event_id_fkey;
ALTER TABLE session_inputs     DROP CONSTRAINT session_inputs_sid_fkey,
                               DROP CONSTRAINT session_inputs_event_id_fkey;
ALTER TABLE executions         DROP CONSTRAINT executions_sid_fkey,
                               DROP CONSTRAINT executions_action_id_fkey,
                               DROP CONSTRAINT executions_event_id_fkey;
ALTER TABLE session_turns      DROP CONSTRAINT session_turns_sid_fkey,
                               DROP CONSTRAINT session_turns_execution_id_fkey;
ALTER TABLE turn_inputs        DROP CONSTRAINT turn_inputs_sid_seq_fkey,
                               DROP CONSTRAINT turn_inputs_sid_turn_fkey;
ALTER TABLE transcript_entries DROP CONSTRAINT transcript_entries_execution_id_fkey;

-- +goose Down
ALTER TABLE kv_values          ADD CONSTRAINT kv_values_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE session_inputs     ADD CONSTRAINT session_inputs_sid_fkey FOREIGN KEY (sid) REFERENCES sessions (sid),
                               ADD CONSTRAINT session_inputs_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE executions         ADD CONSTRAINT executions_sid_fkey FOREIGN KEY (sid) REFERENCES sessions (sid),
                               ADD CONSTRAINT executions_action_id_fkey FOREIGN KEY (action_id) REFERENCES actions (id),
                               ADD CONSTRAINT executions_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id);
ALTER TABLE session_turns      ADD CONSTRAINT session_turns_sid_fkey FOREIGN KEY (sid) REFERENCES sessions (sid),
                               ADD CONSTRAINT session_turns_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES executions (id);
ALTER TABLE turn_inputs        ADD CONSTRAINT turn_inputs_sid_seq_fkey FOREIGN KEY (sid, seq) REFERENCES session_inputs (sid, seq),
                               ADD CONSTRAINT turn_inputs_sid_turn_fkey FOREIGN KEY (sid, turn) REFERENCES session_turns (sid, number);
ALTER TABLE transcript_entries ADD CONSTRAINT transcript_entries_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES executions (id);

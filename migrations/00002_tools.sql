-- +goose Up

-- Tool sessions (SPEC X1-X6) keep call history only: no state, no turns.
ALTER TABLE sessions ADD COLUMN kind text NOT NULL DEFAULT 'TURNS';

-- What a call was given, for CALL inputs and tool executions.
ALTER TABLE executions ADD COLUMN input jsonb;

-- CALL inputs are listed in the order their transactions began, calls of one
-- transaction in the order made (X5). order_key encodes that order as
-- sortable text; for other inputs it is the delivery sequence.
ALTER TABLE session_inputs
    ADD COLUMN execution_id uuid REFERENCES executions (id),
    ADD COLUMN caller_execution_id uuid REFERENCES executions (id),
    ADD COLUMN order_key text;
UPDATE session_inputs SET order_key = lpad(seq::text, 20, '0');
ALTER TABLE session_inputs ALTER COLUMN order_key SET NOT NULL;
CREATE INDEX session_inputs_order ON session_inputs (sid, order_key);

-- CALL inputs take their sequence from here, not from the session row, so
-- concurrent calls never wait on one another (X2).
CREATE SEQUENCE session_call_seq;

-- +goose Down
DROP SEQUENCE session_call_seq;
DROP INDEX session_inputs_order;
ALTER TABLE session_inputs DROP COLUMN order_key, DROP COLUMN caller_execution_id, DROP COLUMN execution_id;
ALTER TABLE executions DROP COLUMN input;
ALTER TABLE sessions DROP COLUMN kind;

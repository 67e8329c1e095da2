-- +goose Up

-- Issue 13 (the console's ledger screen): which sessions an event reached,
-- as an input or as their origin, looked up by event for a page of events.
CREATE INDEX session_inputs_event ON session_inputs (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX sessions_origin_event ON sessions (origin_event_id) WHERE origin_event_id IS NOT NULL;

-- +goose Down
DROP INDEX sessions_origin_event;
DROP INDEX session_inputs_event;

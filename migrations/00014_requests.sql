-- +goose Up

-- Issue 17 (I4): a REQUEST input (an MCP client's request to an action
-- served over MCP) is answered once: by the execution of the turn that
-- finished its work (execution_id, at answered_at), or without one when
-- the held turn that took it was skipped. The executor answers the
-- unanswered requests of a session as its turns commit; the partial index
-- keeps that look-up to the requests still waiting.
ALTER TABLE session_inputs ADD COLUMN answered_at timestamptz;
CREATE INDEX session_inputs_unanswered ON session_inputs (sid) WHERE kind = 'REQUEST' AND answered_at IS NULL;

-- +goose Down
DROP INDEX session_inputs_unanswered;
ALTER TABLE session_inputs DROP COLUMN answered_at;

-- +goose Up

-- Issue 15, T9: replays. replayExecution runs an execution's handler again
-- on what it received, in a transaction that is rolled back, and keeps the
-- run as an execution of its own: replay_of names the original (sid and
-- turn are the original's, so the replay reads the original turn; an
-- execution of an action without a session block keeps its event through
-- the original), replay holds {outcome, original, diff, by, provider}.
ALTER TABLE executions
    ADD COLUMN replay_of uuid REFERENCES executions (id),
    ADD COLUMN replay jsonb;

CREATE INDEX executions_replay_of ON executions (replay_of) WHERE replay_of IS NOT NULL;

-- +goose Down
DROP INDEX executions_replay_of;
ALTER TABLE executions DROP COLUMN replay, DROP COLUMN replay_of;

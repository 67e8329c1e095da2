-- +goose Up

-- Issue 15: backfills. createAction and updateAction with `from` make the
-- new version's triggers judge the events from that position on, in order,
-- with a cursor of their own, until it reaches the dispatch cursor; then
-- the version joins live dispatch (joined_position), which leaves it out
-- until then. Package action creates and cancels a backfill; the
-- dispatcher moves its cursor in the same transaction as the sessions,
-- inputs, intake records and executions its events produce, holding the
-- dispatch cursor row, so live dispatch and a backfill never run at once
-- and every event is judged once by the version, in commit order.
CREATE TABLE action_backfills (
    action_id uuid NOT NULL,
    version int NOT NULL,
    -- events after from_position; to_position is the ledger head when the
    -- version was made (a cancelled backfill skips to it)
    from_position bigint NOT NULL,
    to_position bigint NOT NULL,
    -- the last position judged
    cursor bigint NOT NULL,
    -- the dispatch cursor when the version joined live dispatch; NULL
    -- while the backfill judges its events
    joined_position bigint,
    -- events read so far
    events bigint NOT NULL DEFAULT 0,
    status text NOT NULL CHECK (status IN ('RUNNING', 'DONE', 'CANCELLED')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz,
    cancelled_by text,
    PRIMARY KEY (action_id, version),
    FOREIGN KEY (action_id, version) REFERENCES action_versions (action_id, version),
    CHECK (from_position < to_position AND cursor >= from_position)
);

CREATE INDEX action_backfills_judging ON action_backfills (created_at) WHERE joined_position IS NULL;

-- +goose Down
DROP TABLE action_backfills;

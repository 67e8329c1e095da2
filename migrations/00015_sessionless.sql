-- +goose Up

-- Issue 15: executions of actions without a session block, one per event
-- that matches one or more of the action's triggers. The dispatcher queues
-- them (QUEUED) in the transaction that moves its cursor; the executor
-- leases them like sessions (lease_owner, lease_expires_at, lease_token as
-- a fencing token) and commits each outcome once.
ALTER TABLE executions
    ADD COLUMN event_id uuid REFERENCES events (id),
    -- the event's position, copied so claims order by it without a join
    ADD COLUMN event_position bigint,
    -- the names of the triggers that matched, in definition order
    ADD COLUMN triggers text[],
    -- the concurrency group ('' without a key expression; NULL when the
    -- key failed to evaluate or there is no limit) and the limit per group
    -- (NULL: no limit)
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit int,
    ADD COLUMN queued_at timestamptz,
    -- claimable from then on: when queued, the lease's expiry while RUNNING
    ADD COLUMN available_at timestamptz,
    ADD COLUMN lease_owner text,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN lease_token bigint NOT NULL DEFAULT 0,
    -- attempts made before the latest operator retry: each retry gets the
    -- executor's full number of attempts again
    ADD COLUMN attempts_base int NOT NULL DEFAULT 0,
    ADD COLUMN retries int NOT NULL DEFAULT 0,
    ADD COLUMN retried_by text,
    ADD COLUMN retried_at timestamptz;

-- One execution per action and event, whatever the number of triggers that
-- matched or of dispatchers that saw the event.
CREATE UNIQUE INDEX executions_event ON executions (action_id, event_id) WHERE event_id IS NOT NULL;

-- What a claim reads: unfinished executions in commit order of their events.
CREATE INDEX executions_claimable ON executions (event_position)
    WHERE event_id IS NOT NULL AND status IN ('QUEUED', 'RUNNING');
-- The unfinished executions of one concurrency group, in commit order.
CREATE INDEX executions_group ON executions (action_id, concurrency_key, event_position)
    WHERE event_id IS NOT NULL AND status IN ('QUEUED', 'RUNNING');
-- An action's executions, newest event first, with or without a status.
CREATE INDEX executions_action_event ON executions (action_id, event_position) WHERE event_id IS NOT NULL;
CREATE INDEX executions_action_status ON executions (action_id, status, event_position) WHERE event_id IS NOT NULL;

-- +goose Down
DROP INDEX executions_action_status;
DROP INDEX executions_action_event;
DROP INDEX executions_group;
DROP INDEX executions_claimable;
DROP INDEX executions_event;
ALTER TABLE executions
    DROP COLUMN retried_at, DROP COLUMN retried_by, DROP COLUMN retries, DROP COLUMN attempts_base,
    DROP COLUMN lease_token, DROP COLUMN lease_expires_at, DROP COLUMN lease_owner, DROP COLUMN available_at,
    DROP COLUMN queued_at, DROP COLUMN concurrency_limit, DROP COLUMN concurrency_key, DROP COLUMN triggers,
    DROP COLUMN event_position, DROP COLUMN event_id;

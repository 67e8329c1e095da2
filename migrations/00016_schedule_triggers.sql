-- +goose Up

-- Issue 15, A4: the clocks of schedule triggers. One row per schedule
-- trigger of an action's current version, written by package action alone:
-- created with the version that brings the trigger, re-anchored when an
-- update changes its schedule, paused (due_at NULL) while the action is not
-- ACTIVE and deleted with the trigger. The firing loop locks due rows FOR
-- UPDATE SKIP LOCKED and, in the same transaction, appends each firing's
-- schedule.fired event and moves last_at and due_at on: a firing is in the
-- ledger once, or not yet.
CREATE TABLE trigger_schedules (
    action_id uuid NOT NULL REFERENCES actions (id),
    trigger text NOT NULL,
    -- the trigger's schedule as defined: {cron, timezone} or {every}
    spec jsonb NOT NULL,
    -- an every schedule fires at anchor + k * every; a cron one strictly
    -- after anchor. When the trigger got this schedule.
    anchor timestamptz NOT NULL,
    -- the scheduled time of the last firing, or when the clock (re)started
    -- (created, changed or the action re-enabled): firings after it are due
    last_at timestamptz NOT NULL,
    -- the next firing; NULL while the action is not ACTIVE or when the
    -- schedule never fires again
    due_at timestamptz,
    -- firings appended, and the firings they passed over (missed)
    fired bigint NOT NULL DEFAULT 0,
    missed bigint NOT NULL DEFAULT 0,
    -- the scheduled time and event of the last firing; NULL before the first
    last_fired_at timestamptz,
    last_event_id uuid,
    PRIMARY KEY (action_id, trigger)
);

CREATE INDEX trigger_schedules_due ON trigger_schedules (due_at) WHERE due_at IS NOT NULL;

-- +goose Down
DROP TABLE trigger_schedules;

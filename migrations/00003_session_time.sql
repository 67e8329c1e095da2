-- +goose Up

-- Session ends and clocks (SPEC E1-E7, C1-C6) and turn windows (T4).
--
-- A session whose action version has an end, an entry of its clock that
-- starts turns, or a turn window has at most one durable timer: due_at is
-- the next instant the session must be looked at (its next such firing, its
-- end, or the end of a window). The timer loop claims due rows with
-- FOR UPDATE SKIP LOCKED through the index, so the work per tick is
-- proportional to what is due, not to the number of sessions.
CREATE TABLE session_timers (
    sid    bigint PRIMARY KEY REFERENCES sessions (sid),
    due_at timestamptz NOT NULL
);
CREATE INDEX session_timers_due ON session_timers (due_at);

-- A firing becomes a SCHEDULE input only when a turn takes it (C6); the
-- input names its entry and scheduled time. The latest one per entry is
-- where the next turn's count of missed firings starts (C5).
ALTER TABLE session_inputs
    ADD COLUMN schedule text,
    ADD COLUMN scheduled_at timestamptz;
CREATE INDEX session_inputs_schedule ON session_inputs (sid, schedule, scheduled_at) WHERE schedule IS NOT NULL;

-- The claim that records a firing appends its schedule.fired event as its
-- last write (the ledger head is held until commit), after the input row
-- that refers to it: the reference is checked at commit.
ALTER TABLE session_inputs ALTER CONSTRAINT session_inputs_event_id_fkey DEFERRABLE INITIALLY DEFERRED;

-- +goose Down
ALTER TABLE session_inputs ALTER CONSTRAINT session_inputs_event_id_fkey NOT DEFERRABLE;
DROP INDEX session_inputs_schedule;
ALTER TABLE session_inputs DROP COLUMN scheduled_at, DROP COLUMN schedule;
DROP TABLE session_timers;

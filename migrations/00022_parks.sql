-- +goose Up

-- Issue 16, G4, G10: failure scope and park. A turn that fails with scope
-- TURN leaves its session WAITING with its inputs pending; sessions.wait
-- says what wakes it: INPUT (any new input), PARK (the park's resume
-- condition only: an operator's resume, its resume time, or a delivery by
-- one of the triggers in wake_on). NULL: the session waits on interrupts,
-- or does not wait at all.
-- G9: interrupt_turn is the running turn an interrupt asked to end, and
-- interrupted_by who asked; the turn's settlement reads and clears them.
ALTER TABLE sessions
    ADD COLUMN wait text CHECK (wait IN ('INPUT', 'PARK')),
    ADD COLUMN wake_on text[],
    ADD COLUMN interrupt_turn int,
    ADD COLUMN interrupted_by text;

-- A park: a turn whose retries ran out on a transient cause paused its
-- session instead of failing it. It ends RESUMED (resolution operator,
-- time or event), EXPIRED (the session failed at expires_at) or CANCELLED
-- (the session was closed or finished otherwise).
CREATE TABLE session_parks (
    id           uuid PRIMARY KEY,
    sid          bigint NOT NULL REFERENCES sessions (sid),
    turn         int NOT NULL,
    execution_id uuid NOT NULL REFERENCES executions (id),
    cause        text NOT NULL,
    reason       text NOT NULL,
    parked_at    timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    resume_at    timestamptz,
    resume_on    text[] NOT NULL DEFAULT '{}',
    status       text NOT NULL CHECK (status IN ('PARKED', 'RESUMED', 'EXPIRED', 'CANCELLED')),
    resolution   text,
    resolved_by  text,
    resolved_at  timestamptz
);
CREATE INDEX session_parks_sid ON session_parks (sid, parked_at);
-- The park loop's queue: the earliest of resume_at and expires_at.
CREATE INDEX session_parks_due ON session_parks (least(coalesce(resume_at, expires_at), expires_at)) WHERE status = 'PARKED';

-- +goose Down
DROP TABLE session_parks;
ALTER TABLE sessions DROP COLUMN interrupted_by, DROP COLUMN interrupt_turn, DROP COLUMN wake_on, DROP COLUMN wait;

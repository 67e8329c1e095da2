-- +goose Up

-- Issue 16, G6: archive is visibility only: archived_at hides a session
-- from lists by default, whatever its status; a new input clears it.
-- G7: slot is the singleton slot a session holds (session.concurrency 1):
-- at most one session that is not final holds a slot of an action, which
-- a final status releases by itself. G8: display_title is rendered from
-- session.displayTitle at creation; ambient_status is the one-line status
-- its turns report.
ALTER TABLE sessions
    ADD COLUMN archived_at timestamptz,
    ADD COLUMN slot text,
    ADD COLUMN display_title text,
    ADD COLUMN ambient_status text;
CREATE UNIQUE INDEX sessions_slot ON sessions (action_id, slot) WHERE slot IS NOT NULL AND status IN ('OPEN', 'WAITING');

-- +goose Down
DROP INDEX sessions_slot;
ALTER TABLE sessions DROP COLUMN ambient_status, DROP COLUMN display_title, DROP COLUMN slot, DROP COLUMN archived_at;

-- +goose Up

-- Issue 11: an action version runs with the authority of the principal who
-- stored it, intersected with what its definition declares. The author is
-- kept with the version; NULL for versions stored before authors were
-- recorded, which run as the dev principal did (see docs/security.md).
ALTER TABLE action_versions ADD COLUMN author text;

-- CALL: calling a tool action (callTool, call_tool, agent tool references).
ALTER TABLE auth_policies DROP CONSTRAINT auth_policies_action_check;
ALTER TABLE auth_policies ADD CONSTRAINT auth_policies_action_check
    CHECK (action IN ('READ', 'WRITE', 'RESPOND', 'CLOSE', 'CALL', 'ADMIN'));

-- Bumped whenever a principal's policies change, so that every process
-- re-reads the authority its running action versions hold.
CREATE TABLE auth_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch     bigint NOT NULL DEFAULT 0
);
INSERT INTO auth_state DEFAULT VALUES;

-- +goose Down
DROP TABLE auth_state;
DELETE FROM auth_policies WHERE action = 'CALL';
ALTER TABLE auth_policies DROP CONSTRAINT auth_policies_action_check;
ALTER TABLE auth_policies ADD CONSTRAINT auth_policies_action_check
    CHECK (action IN ('READ', 'WRITE', 'RESPOND', 'CLOSE', 'ADMIN'));
ALTER TABLE action_versions DROP COLUMN author;

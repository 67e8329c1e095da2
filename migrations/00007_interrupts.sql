-- +goose Up

-- Interrupts (P1-P5, H1-H5): what a WAITING session waits on. An APPROVAL
-- is a gated tool call a turn paused before; a HOLD is a turn held after a
-- refusal or an unfinished run. Each is answered once through
-- respondToSession (status PENDING -> ANSWERED), or ends with the session
-- (CLOSED).
CREATE TABLE session_interrupts (
    id             uuid PRIMARY KEY,
    sid            bigint NOT NULL REFERENCES sessions (sid),
    kind           text NOT NULL CHECK (kind IN ('APPROVAL', 'HOLD')),
    -- APPROVAL: the turn that first paused before the call; HOLD: the held turn
    turn           int NOT NULL,
    -- APPROVAL: the execution that first paused before the call; HOLD: the held execution
    execution_id   uuid NOT NULL REFERENCES executions (id),
    tool_action_id uuid,
    tool_version   int,
    tool_name      text,
    call_id        text,
    input          jsonb,
    cause          text,
    category       text,
    explanation    text,
    status         text NOT NULL CHECK (status IN ('PENDING', 'ANSWERED', 'CLOSED')),
    decision       text,
    response       jsonb,
    responder      text,
    answered_at    timestamptz,
    -- the COMMAND input the answer created
    command_seq    bigint,
    created_at     timestamptz NOT NULL
);
CREATE INDEX session_interrupts_pending ON session_interrupts (sid) WHERE status = 'PENDING';

-- The continuation a turn that ended WAITING left for the turn taking the
-- responses (opaque to the executor).
ALTER TABLE sessions ADD COLUMN resume jsonb;

-- resume: the continuation the turn started from (so a retry of it starts
-- there again, H3); retry_of: the held turn this turn retries.
ALTER TABLE session_turns ADD COLUMN resume jsonb, ADD COLUMN retry_of int;

-- The interrupts an execution left the session waiting on (P1, P2), in
-- order, and the hold of a held execution (H2).
ALTER TABLE executions ADD COLUMN approvals uuid[], ADD COLUMN hold_id uuid;

-- The dispatcher keeps an older action version's triggers while it has
-- open sessions (A2); this finds them.
CREATE INDEX sessions_open_version ON sessions (action_id, version) WHERE status IN ('OPEN', 'WAITING');

-- +goose Down
DROP INDEX sessions_open_version;
ALTER TABLE executions DROP COLUMN hold_id, DROP COLUMN approvals;
ALTER TABLE session_turns DROP COLUMN retry_of, DROP COLUMN resume;
ALTER TABLE sessions DROP COLUMN resume;
DROP TABLE session_interrupts;

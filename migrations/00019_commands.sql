-- +goose Up

-- Issue 16, G1, G2, G5: commands. Every control or message a client sends
-- to a session is a COMMAND input; command names which (ANSWER: an answer
-- to an interrupt; MESSAGE: a message; HANDOFF: a predecessor's note
-- delivered to its successor; INTERRUPT, RESUME: controls, applied at
-- once and delivered consumed). sender_kind (OPERATOR, AGENT, SYSTEM) and
-- sender_id are stamped by the server; idempotency_key is the client's
-- (unique per session through identity); promoted_at puts a pending
-- message before the others ("run this next"). A deleted message is
-- CANCELLED and no turn takes it.
ALTER TABLE session_inputs
    ADD COLUMN command text,
    ADD COLUMN message text,
    ADD COLUMN sender_kind text,
    ADD COLUMN sender_id text,
    ADD COLUMN idempotency_key text,
    ADD COLUMN promoted_at timestamptz;
UPDATE session_inputs SET command = 'ANSWER' WHERE kind = 'COMMAND';

-- G2: each change of a pending message, as made.
CREATE TABLE session_input_changes (
    sid     bigint NOT NULL,
    seq     bigint NOT NULL,
    n       int NOT NULL,
    change  text NOT NULL CHECK (change IN ('EDIT', 'DELETE', 'PROMOTE')),
    before  text,
    after   text,
    by_kind text NOT NULL,
    by_id   text NOT NULL,
    at      timestamptz NOT NULL,
    PRIMARY KEY (sid, seq, n),
    FOREIGN KEY (sid, seq) REFERENCES session_inputs (sid, seq)
);

-- G5: a handoff note kept on a closed session, and the chain of sessions a
-- key routes to: a successor (id <root>~<n>) continues a session closed
-- with successor: true, or retries a FAILED one.
-- route_sid, on the first session of a chain, is its newest: deliveries
-- and starts addressed to the first id go there.
ALTER TABLE sessions
    ADD COLUMN handoff text,
    ADD COLUMN predecessor_sid bigint REFERENCES sessions (sid),
    ADD COLUMN successor_sid bigint REFERENCES sessions (sid),
    ADD COLUMN route_sid bigint REFERENCES sessions (sid);

-- +goose Down
ALTER TABLE sessions DROP COLUMN route_sid, DROP COLUMN successor_sid, DROP COLUMN predecessor_sid, DROP COLUMN handoff;
DROP TABLE session_input_changes;
ALTER TABLE session_inputs DROP COLUMN promoted_at, DROP COLUMN idempotency_key, DROP COLUMN sender_id,
    DROP COLUMN sender_kind, DROP COLUMN message, DROP COLUMN command;

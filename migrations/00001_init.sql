-- +goose Up

-- The ledger head serialises appends: an appending transaction updates this
-- one row, so it holds the row lock until it commits. Positions and commit
-- times are therefore assigned in commit order and without gaps (L1).
CREATE TABLE ledger_head (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position    bigint NOT NULL DEFAULT 0,
    commit_time timestamptz NOT NULL DEFAULT 'epoch'
);
INSERT INTO ledger_head DEFAULT VALUES;

CREATE TABLE events (
    id             uuid PRIMARY KEY,
    position       bigint NOT NULL UNIQUE,
    type           text NOT NULL,
    data           jsonb NOT NULL,
    commit_time    timestamptz NOT NULL,
    -- set when the event records a write of a key-value record (L2)
    record_namespace text,
    record_key       text,
    record_version   bigint
);
CREATE INDEX events_type_position ON events (type, position);

CREATE TABLE kv_values (
    namespace  text NOT NULL,
    key        text NOT NULL,
    value      jsonb NOT NULL,
    version    bigint NOT NULL,
    -- the record is written before its event (the event takes the ledger
    -- head last), so the reference is checked at commit
    event_id   uuid NOT NULL REFERENCES events (id) DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, key)
);

-- A retried write with the same key returns the first response (L3).
CREATE TABLE idempotency_keys (
    key          text PRIMARY KEY,
    operation    text NOT NULL,
    request_hash text NOT NULL,
    response     jsonb NOT NULL,
    created_at   timestamptz NOT NULL
);

CREATE TABLE actions (
    id              uuid PRIMARY KEY,
    current_version int NOT NULL,
    status          text NOT NULL DEFAULT 'ACTIVE',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE TABLE action_versions (
    action_id     uuid NOT NULL REFERENCES actions (id),
    version       int NOT NULL,
    definition    jsonb NOT NULL,
    -- triggers of this version match events after this ledger position
    from_position bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (action_id, version)
);

-- The dispatcher's cursor. Locking this row serialises dispatch batches with
-- action changes, so a new action version sees every event after from_position.
CREATE TABLE dispatch_state (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position      bigint NOT NULL DEFAULT 0,
    actions_epoch bigint NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO dispatch_state DEFAULT VALUES;

CREATE TABLE sessions (
    sid              bigserial PRIMARY KEY,
    action_id        uuid NOT NULL REFERENCES actions (id),
    id               text NOT NULL,
    version          int NOT NULL,
    input            jsonb NOT NULL,
    state            jsonb,
    status           text NOT NULL,
    reason           text,
    origin_event_id  uuid REFERENCES events (id),
    started_at       timestamptz NOT NULL,
    ends_at          timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    closed_at        timestamptz,
    turn_count       int NOT NULL DEFAULT 0,
    input_count      bigint NOT NULL DEFAULT 0,
    -- when set, the session has an input that starts a turn since this time
    next_turn_at     timestamptz,
    lease_owner      text,
    lease_expires_at timestamptz,
    lease_token      bigint NOT NULL DEFAULT 0,
    UNIQUE (action_id, id)
);
CREATE INDEX sessions_runnable ON sessions (next_turn_at) WHERE next_turn_at IS NOT NULL;
CREATE INDEX sessions_action_created ON sessions (action_id, sid);

CREATE TABLE session_inputs (
    sid          bigint NOT NULL REFERENCES sessions (sid),
    seq          bigint NOT NULL,
    identity     text NOT NULL,
    kind         text NOT NULL,
    event_id     uuid REFERENCES events (id),
    triggers     text[] NOT NULL DEFAULT '{}',
    starts_turn  boolean NOT NULL,
    status       text NOT NULL,
    turn         int,
    byte_size    int NOT NULL,
    delivered_at timestamptz NOT NULL,
    PRIMARY KEY (sid, seq),
    UNIQUE (sid, identity)
);
CREATE INDEX session_inputs_pending ON session_inputs (sid, seq) WHERE status = 'PENDING';

CREATE TABLE executions (
    id          uuid PRIMARY KEY,
    action_id   uuid NOT NULL REFERENCES actions (id),
    version     int NOT NULL,
    sid         bigint REFERENCES sessions (sid),
    turn        int,
    parent_id   uuid REFERENCES executions (id),
    status      text NOT NULL,
    attempts    int NOT NULL DEFAULT 0,
    output      jsonb,
    error       text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX executions_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE session_turns (
    sid               bigint NOT NULL REFERENCES sessions (sid),
    number            int NOT NULL,
    status            text NOT NULL,
    execution_id      uuid NOT NULL REFERENCES executions (id),
    final             boolean NOT NULL DEFAULT false,
    ends_at           timestamptz,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    checkpoint_state  jsonb,
    checkpoint_status text,
    checkpoint_reason text,
    PRIMARY KEY (sid, number)
);

CREATE INDEX session_turns_running ON session_turns (sid) WHERE status = 'RUNNING';

CREATE TABLE turn_inputs (
    sid  bigint NOT NULL,
    turn int NOT NULL,
    seq  bigint NOT NULL,
    PRIMARY KEY (sid, turn, seq),
    FOREIGN KEY (sid, turn) REFERENCES session_turns (sid, number),
    FOREIGN KEY (sid, seq) REFERENCES session_inputs (sid, seq)
);

CREATE TABLE transcript_entries (
    execution_id uuid NOT NULL REFERENCES executions (id),
    seq          int NOT NULL,
    kind         text NOT NULL,
    data         jsonb NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (execution_id, seq)
);

-- Events that matched a trigger but could not start or resume a session (S5).
CREATE TABLE intake_records (
    id         bigserial PRIMARY KEY,
    action_id  uuid NOT NULL REFERENCES actions (id),
    version    int NOT NULL,
    event_id   uuid NOT NULL REFERENCES events (id),
    trigger    text NOT NULL,
    session_id text,
    reason     text NOT NULL,
    message    text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX intake_records_action ON intake_records (action_id, id);

-- Predicates that failed to evaluate, counted per trigger (a non-match).
CREATE TABLE trigger_diagnostics (
    action_id     uuid NOT NULL REFERENCES actions (id),
    version       int NOT NULL,
    trigger       text NOT NULL,
    count         bigint NOT NULL,
    last_event_id uuid NOT NULL,
    last_message  text NOT NULL,
    last_at       timestamptz NOT NULL,
    PRIMARY KEY (action_id, version, trigger)
);

-- +goose Down
DROP TABLE trigger_diagnostics, intake_records, transcript_entries, turn_inputs,
    session_turns, executions, session_inputs, sessions, dispatch_state,
    action_versions, actions, idempotency_keys, kv_values, events, ledger_head;

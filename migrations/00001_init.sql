-- +goose Up
CREATE TABLE ledger_head (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position    bigint NOT NULL DEFAULT 0,
    commit_time timestamptz NOT NULL DEFAULT 'epoch'
);
INSERT INTO ledger_head DEFAULT VALUES;

-- +goose Down
DROP TABLE ledger_head;

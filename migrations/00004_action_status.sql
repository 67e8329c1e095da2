-- +goose Up

-- Disabling, archiving and enabling an action (SPEC A2) take effect at a
-- ledger position, as a new version does: status_position is the ledger head
-- when the status last changed. A disabled or archived action's triggers
-- still match events up to that position (the dispatcher may not have reached
-- them yet); a re-enabled action's triggers match events after it.
ALTER TABLE actions ADD COLUMN status_position bigint NOT NULL DEFAULT 0;
ALTER TABLE actions ADD CONSTRAINT actions_status_check CHECK (status IN ('ACTIVE', 'DISABLED', 'ARCHIVED'));

-- +goose Down
ALTER TABLE actions DROP CONSTRAINT actions_status_check;
ALTER TABLE actions DROP COLUMN status_position;

-- +goose Up

-- A session's interrupts of every status, in the order raised (listings,
-- the retry lookup when a turn starts).
CREATE INDEX session_interrupts_sid ON session_interrupts (sid, ord);

-- +goose Down
DROP INDEX session_interrupts_sid;

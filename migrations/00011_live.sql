-- +goose Up

-- Issue 12, live updates and the inbox.
--
-- raised_xid is the transaction that raised the interrupt. Notifications
-- on actionsledger_inbox carry the id of the committing transaction, so an
-- inboxUpdates subscriber finds what a transaction raised by this column,
-- even when a later transaction answered it before the subscriber looked.
-- Rows from before this migration get the migration's transaction, which is
-- older than any subscription.
ALTER TABLE session_interrupts ADD COLUMN raised_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX session_interrupts_raised ON session_interrupts (raised_xid);

-- The inbox lists every pending interrupt oldest first (in raised order).
CREATE INDEX session_interrupts_inbox ON session_interrupts (ord) WHERE status = 'PENDING';

-- +goose Down
DROP INDEX session_interrupts_inbox;
DROP INDEX session_interrupts_raised;
ALTER TABLE session_interrupts DROP COLUMN raised_xid;

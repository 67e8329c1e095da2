-- +goose Up

-- Issue 14: a batch of finished turns may settle in one round trip,
-- decided from their sessions as their claims read them. The statement
-- that locks the sessions counts those that changed since (lease, status,
-- start, end, interrupt) and calls this function with the count: any
-- change fails the transaction with SQLSTATE AL001, before a write, and
-- the executor settles the batch again the usual way (fence, then writes).
-- +goose StatementBegin
CREATE FUNCTION settle_check(changed bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	IF changed > 0 THEN
		RAISE EXCEPTION '% session(s) changed since their turns were claimed', changed USING ERRCODE = 'AL001';
	END IF;
	RETURN changed;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION settle_check(bigint);

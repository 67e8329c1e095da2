-- +goose Up

-- Issue 14: a session's runnable time (sessions.next_turn_at) is found by
-- claims through a narrow table of its own, kept by triggers in the same
-- transaction as every write of the column, instead of an index on
-- sessions. With no index naming next_turn_at, the updates of a session
-- row that make it runnable or not (a delivery, a settle) can be HOT:
-- they no longer add an entry to each of the row's eight indexes, only
-- to this table's two. sessions.next_turn_at stays the session's runnable
-- time: a claim re-checks it on the row it locks, so a stale
-- session_runnable row can only delay a claim, never make a wrong one.
CREATE TABLE session_runnable (
    sid bigint PRIMARY KEY REFERENCES sessions (sid) ON DELETE CASCADE,
    at  timestamptz
);
INSERT INTO session_runnable (sid, at) SELECT sid, next_turn_at FROM sessions;
CREATE INDEX session_runnable_at ON session_runnable (at) WHERE at IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION session_runnable_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO session_runnable (sid, at) VALUES (NEW.sid, NEW.next_turn_at);
	RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION session_runnable_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE session_runnable SET at = NEW.next_turn_at WHERE sid = NEW.sid;
	RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER sessions_runnable_insert AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION session_runnable_insert();
-- BEFORE: no after-trigger queue; PostgreSQL fires it on the row version
-- the update writes (after re-checking a row another transaction changed).
CREATE TRIGGER sessions_runnable_update BEFORE UPDATE OF next_turn_at ON sessions
    FOR EACH ROW WHEN (OLD.next_turn_at IS DISTINCT FROM NEW.next_turn_at)
    EXECUTE FUNCTION session_runnable_update();
DROP INDEX sessions_runnable;

-- +goose Down
CREATE INDEX sessions_runnable ON sessions (next_turn_at) WHERE next_turn_at IS NOT NULL;
DROP TRIGGER sessions_runnable_update ON sessions;
DROP TRIGGER sessions_runnable_insert ON sessions;
DROP FUNCTION session_runnable_update();
DROP FUNCTION session_runnable_insert();
DROP TABLE session_runnable;

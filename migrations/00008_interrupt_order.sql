-- +goose Up

-- Continuations are kept byte for byte (json, not jsonb), so a model that
-- resumes after an approval sees its own words exactly as it wrote them
-- (and providers' prompt caches still match).
ALTER TABLE sessions ALTER COLUMN resume TYPE json USING resume::json;
ALTER TABLE session_turns ALTER COLUMN resume TYPE json USING resume::json;

-- Interrupts are listed in the order they were raised: a turn's parallel
-- gated calls in call order.
ALTER TABLE session_interrupts ADD COLUMN ord bigserial;

-- +goose Down
ALTER TABLE session_interrupts DROP COLUMN ord;
ALTER TABLE session_turns ALTER COLUMN resume TYPE jsonb USING resume::jsonb;
ALTER TABLE sessions ALTER COLUMN resume TYPE jsonb USING resume::jsonb;

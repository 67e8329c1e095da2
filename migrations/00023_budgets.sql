-- +goose Up

-- Issue 16, G8: spend caps and model usage. max_usd is the session's cap
-- in US dollars, copied from session.maxPerSessionUsd when the session is
-- created (NULL: no cap) and changed only by setSessionBudget; spent_usd
-- and the counters add up what its turns' model calls used, attempts that
-- did not commit included. executions keep the same per execution.
ALTER TABLE sessions
    ADD COLUMN max_usd       numeric CHECK (max_usd > 0),
    ADD COLUMN spent_usd     numeric NOT NULL DEFAULT 0,
    ADD COLUMN model_calls   bigint NOT NULL DEFAULT 0,
    ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0;

ALTER TABLE executions
    ADD COLUMN model_calls   bigint NOT NULL DEFAULT 0,
    ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_usd      numeric NOT NULL DEFAULT 0,
    ADD COLUMN unpriced_calls bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE executions DROP COLUMN model_calls, DROP COLUMN input_tokens, DROP COLUMN output_tokens,
    DROP COLUMN cost_usd, DROP COLUMN unpriced_calls;
ALTER TABLE sessions DROP COLUMN max_usd, DROP COLUMN spent_usd, DROP COLUMN model_calls,
    DROP COLUMN input_tokens, DROP COLUMN output_tokens;

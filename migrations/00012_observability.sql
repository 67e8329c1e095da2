-- +goose Up

-- Issue 12 (observability).

-- The OpenTelemetry trace id (32 hex digits) of the run that wrote the
-- execution: a turn's own trace, or the trace of the request or turn that
-- made a tool call. NULL when tracing was off or the trace not sampled.
ALTER TABLE executions ADD COLUMN trace_id text;

-- Sessions by status for /metrics: counting from this index reads no table
-- rows (an index-only scan), and the live statuses (OPEN, WAITING) only
-- their own entries.
CREATE INDEX sessions_status ON sessions (status);

-- +goose Down
DROP INDEX sessions_status;
ALTER TABLE executions DROP COLUMN trace_id;

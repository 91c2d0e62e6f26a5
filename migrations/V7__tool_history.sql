-- The per-tool execution history covers every path (docs/architecture.md, "Observability"): an
-- operation a cancel stopped before it ran is recorded as 'cancelled', and each row carries the
-- trace it ran in.
ALTER TABLE tool_executions
    DROP CONSTRAINT tool_executions_outcome_known,
    ADD CONSTRAINT tool_executions_outcome_known
        CHECK (outcome IN ('ok', 'rejected', 'failed', 'crashed', 'cancelled')),
    ADD COLUMN trace_id text;

-- "The last error" of a tool, found without walking past all of its successes.
CREATE INDEX tool_executions_errors_idx ON tool_executions (tool, started_at DESC, execution_id DESC)
    WHERE outcome IN ('failed', 'crashed');

-- One page of a tool's executions, newest first, by keyset: $1 tool, $2 outcome or NULL,
-- $3 RFC 3339 lower bound on started_at or NULL, $4/$5 the cursor (started_at in microseconds
-- since the epoch, execution id) of the last row already seen or NULL, $6 the page size, $7 the
-- tenant whose executions they are.
-- One row more than a page is read, to know whether another page follows. The answer names
-- the tool, as the route's answer does.
WITH page AS (
    SELECT * FROM tool_executions e
     WHERE e.tenant_id = $7 AND e.tool = $1
       AND ($2::text IS NULL OR e.outcome = $2::text)
       AND ($3::text IS NULL OR e.started_at >= $3::text::timestamptz)
       AND ($4::int8 IS NULL
            OR (e.started_at, e.execution_id) < (to_timestamp(0) + $4::int8 * interval '1 microsecond', $5::int8))
     ORDER BY e.started_at DESC, e.execution_id DESC
     LIMIT $6::int8 + 1
), shown AS (
    SELECT * FROM page ORDER BY started_at DESC, execution_id DESC LIMIT $6::int8
)
SELECT jsonb_build_object(
    'tool', $1::text,
    'executions', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'execution_id',      s.execution_id,
                   'tool',              s.tool,
                   'component',         s.component,
                   'component_version', s.component_version,
                   'operation',         s.operation,
                   'tool_call_id',      s.tool_call_id,
                   'started_at',        rfc3339_utc(s.started_at),
                   'duration_ms',       round(s.duration_ms::numeric, 3),
                   'outcome',           s.outcome,
                   'error',             s.error,
                   'trace_id',          s.trace_id)
               ORDER BY s.started_at DESC, s.execution_id DESC)
          FROM shown s), '[]'::jsonb),
    'next_cursor', CASE WHEN (SELECT count(*) FROM page) > $6::int8 THEN (
        SELECT (extract(epoch FROM s.started_at) * 1000000)::int8 || '_' || s.execution_id
          FROM shown s ORDER BY s.started_at, s.execution_id LIMIT 1) END)

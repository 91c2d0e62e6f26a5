-- A tool's executions over the last $2 seconds: how many, how they ended, how long they took
-- (overall and per operation), when they ran (the window cut into 24 equal buckets, oldest
-- first, for a chart), and its last error, all of the tenant $4's executions. $1 tool, $3 the window as the client wrote it
-- (the answer names both, as the route's answer does).
-- The success rate counts the executions that ran to an outcome of their own: a rejected
-- input or a cancel says nothing about whether the tool works.
WITH w AS (
    SELECT * FROM tool_executions
     WHERE tenant_id = $4 AND tool = $1 AND started_at >= now() - make_interval(secs => $2::float8)
)
SELECT jsonb_build_object(
    'tool', $1::text,
    'window', $3::text,
    'executions', count(*),
    'outcomes', jsonb_build_object(
        'ok',        count(*) FILTER (WHERE outcome = 'ok'),
        'rejected',  count(*) FILTER (WHERE outcome = 'rejected'),
        'failed',    count(*) FILTER (WHERE outcome = 'failed'),
        'crashed',   count(*) FILTER (WHERE outcome = 'crashed'),
        'cancelled', count(*) FILTER (WHERE outcome = 'cancelled')),
    'success_rate', round(count(*) FILTER (WHERE outcome = 'ok')::numeric
                          / NULLIF(count(*) FILTER (WHERE outcome IN ('ok', 'failed', 'crashed')), 0), 4),
    'p50_ms', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3),
    'p95_ms', round(percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3),
    'by_operation', COALESCE((
        SELECT jsonb_object_agg(operation, stats) FROM (
            SELECT operation, jsonb_build_object(
                       'executions', count(*),
                       'ok', count(*) FILTER (WHERE outcome = 'ok'),
                       'p50_ms', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3),
                       'p95_ms', round(percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3)) AS stats
              FROM w GROUP BY operation) per_operation), '{}'::jsonb),
    'timeline', (
        SELECT jsonb_agg(jsonb_build_object(
                   'start',      rfc3339_utc(now() - make_interval(secs => $2::float8)
                                             + i * make_interval(secs => $2::float8 / 24)),
                   'executions', COALESCE(b.executions, 0),
                   'ok',         COALESCE(b.ok, 0),
                   'errors',     COALESCE(b.errors, 0))
               ORDER BY i)
          FROM generate_series(0, 23) i
          LEFT JOIN (
              SELECT LEAST(floor(extract(epoch FROM started_at - (now() - make_interval(secs => $2::float8)))
                                 / ($2::float8 / 24))::int, 23) AS bucket,
                     count(*) AS executions,
                     count(*) FILTER (WHERE outcome = 'ok') AS ok,
                     count(*) FILTER (WHERE outcome IN ('failed', 'crashed')) AS errors
                FROM w GROUP BY 1) b ON b.bucket = i),
    'last_error', (
        SELECT jsonb_build_object('error', e.error, 'at', rfc3339_utc(e.started_at), 'operation', e.operation,
                                  'outcome', e.outcome, 'tool_call_id', e.tool_call_id)
          FROM tool_executions e
         WHERE e.tenant_id = $4 AND e.tool = $1 AND e.outcome IN ('failed', 'crashed')
         ORDER BY e.started_at DESC, e.execution_id DESC LIMIT 1))
  FROM w

-- A tool's executions over the last $2 seconds: how many, how they ended, how long they took
-- (overall and per operation), when they ran (the window cut into 24 equal buckets, oldest
-- first, for a chart), and its last error, all of the tenant $4's executions. $1 tool, $3 the
-- window as the client wrote it (the answer names both, as the route's answer does). $5 and
-- $6, in seconds since the epoch, are an hour before the window's start and two hours before
-- its end, by the caller's clock: compared with the partition columns as constants, they let
-- the planner leave out the history's older partitions before planning them, and see that the
-- window's edges are a few rows of a partition, read through its index (docs/architecture.md,
-- "Retention").
-- The success rate counts the executions that ran to an outcome of their own: a rejected
-- input or a cancel says nothing about whether the tool works.
--
-- Where the figures come from (docs/architecture.md, "Tool stats at scale"): the rollups
-- (migration V20) count the window's executions first, from its whole hours, the minutes around
-- them, the executions the sweeper has not added to them yet and the executions of the
-- window's first, partial minute. Up to 10,000, every figure is then
-- computed from the executions themselves, exactly. Beyond, from the rollups: the counts stay
-- exact, a percentile is read from the duration bins (within 4%), and the timeline places a
-- rollup by the start of its minute or hour. The request then reads a few hundred rows however
-- many executions the window holds.
WITH edges AS (
    SELECT since, first_minute, first_hour, last_hour, first_hour < last_hour AS has_hours
      FROM (SELECT now() - make_interval(secs => $2::float8) AS since,
                   date_trunc('hour', now(), 'UTC') AS last_hour) AS b
     CROSS JOIN LATERAL (SELECT date_trunc('minute', b.since, 'UTC')
                                + CASE WHEN date_trunc('minute', b.since, 'UTC') < b.since
                                       THEN interval '1 minute' ELSE interval '0' END AS first_minute) AS m
     CROSS JOIN LATERAL (SELECT date_trunc('hour', m.first_minute, 'UTC')
                                + CASE WHEN date_trunc('hour', m.first_minute, 'UTC') < m.first_minute
                                       THEN interval '1 hour' ELSE interval '0' END AS first_hour) AS h
), rolled AS (
    -- The window's whole hours, the minutes before and after them, and its first partial
    -- minute's executions themselves. The edges are scalar subqueries so that each range is
    -- an index range.
    SELECT r.operation, r.bucket AS at, r.executions, r.ok, r.rejected, r.failed, r.crashed, r.cancelled,
           NULL::float8 AS duration_ms, r.durations
      FROM tool_execution_rollups r
     WHERE r.tenant_id = $4 AND r.tool = $1 AND r.period = 'hour' AND (SELECT has_hours FROM edges)
       AND r.bucket >= to_timestamp($5::float8)
       AND r.bucket >= (SELECT first_hour FROM edges) AND r.bucket < (SELECT last_hour FROM edges)
    UNION ALL
    SELECT r.operation, r.bucket, r.executions, r.ok, r.rejected, r.failed, r.crashed, r.cancelled, NULL, r.durations
      FROM tool_execution_rollups r
     WHERE r.tenant_id = $4 AND r.tool = $1 AND r.period = 'minute'
       AND r.bucket >= to_timestamp($5::float8) AND r.bucket < to_timestamp($5::float8) + interval '4 hours'
       AND r.bucket >= (SELECT first_minute FROM edges)
       AND r.bucket < (SELECT CASE WHEN has_hours THEN first_hour ELSE 'infinity'::timestamptz END FROM edges)
    UNION ALL
    SELECT r.operation, r.bucket, r.executions, r.ok, r.rejected, r.failed, r.crashed, r.cancelled, NULL, r.durations
      FROM tool_execution_rollups r
     WHERE r.tenant_id = $4 AND r.tool = $1 AND r.period = 'minute' AND (SELECT has_hours FROM edges)
       AND r.bucket >= to_timestamp($6::float8) AND r.bucket >= (SELECT last_hour FROM edges)
    UNION ALL
    -- The executions the sweeper has not added to the rollups yet, and those of the window's
    -- first, partial minute, summed up by minute as the rollups are.
    SELECT x.operation, x.bucket, x.executions, x.ok, x.rejected, x.failed, x.crashed, x.cancelled, NULL,
           x.durations
      FROM execution_rollup_rows(ARRAY(
               SELECT ROW(i.tenant_id, i.tool, i.operation, i.started_at, i.duration_ms, i.outcome)::tool_execution_inbox
                 FROM tool_execution_inbox i
                WHERE i.tenant_id = $4 AND i.tool = $1 AND i.started_at >= (SELECT first_minute FROM edges)
               UNION ALL
               SELECT ROW(e.tenant_id, e.tool, e.operation, e.started_at, e.duration_ms, e.outcome)::tool_execution_inbox
                 FROM tool_executions e
                WHERE e.tenant_id = $4 AND e.tool = $1
                  AND e.started_at >= to_timestamp($5::float8)
                  AND e.started_at < to_timestamp($5::float8) + interval '4 hours'
                  AND e.started_at >= (SELECT since FROM edges)
                  AND e.started_at < (SELECT first_minute FROM edges)), 'minute') AS x
), exact AS (
    SELECT COALESCE(sum(executions), 0) <= 10000 AS exact FROM rolled
), w AS (
    -- One row per execution when the answer is exact, else the rollups; the same columns.
    SELECT x.operation, x.started_at AS at, 1 AS executions, (x.outcome = 'ok')::int AS ok,
           (x.outcome = 'rejected')::int AS rejected, (x.outcome = 'failed')::int AS failed,
           (x.outcome = 'crashed')::int AS crashed, (x.outcome = 'cancelled')::int AS cancelled,
           x.duration_ms, NULL::int8[] AS durations
      FROM tool_executions x
     WHERE (SELECT exact FROM exact) AND x.tenant_id = $4 AND x.tool = $1 AND x.started_at >= to_timestamp($5::float8)
       AND x.started_at >= (SELECT since FROM edges)
    UNION ALL
    SELECT r.* FROM rolled r WHERE NOT (SELECT exact FROM exact)
), binned AS (
    -- From the rollups: how many executions of each operation fell in each duration bin.
    SELECT w.operation, u.bin::int AS bin, sum(u.n) AS n
      FROM w, unnest(w.durations) WITH ORDINALITY AS u(n, bin)
     WHERE u.n > 0
     GROUP BY w.operation, u.bin
), percentiles AS (
    -- Each operation's p50 and p95 from its bins, and all operations' (operation NULL): the
    -- middle of the bin where the running count reaches the share.
    SELECT operation,
           round(duration_bin_ms(min(bin) FILTER (WHERE running >= 0.5 * total))::numeric, 3) AS p50,
           round(duration_bin_ms(min(bin) FILTER (WHERE running >= 0.95 * total))::numeric, 3) AS p95
      FROM (SELECT operation, bin, sum(n) OVER (PARTITION BY operation ORDER BY bin) AS running,
                   sum(n) OVER (PARTITION BY operation) AS total
              FROM (SELECT operation, bin, n FROM binned
                    UNION ALL
                    SELECT NULL, bin, sum(n) FROM binned GROUP BY bin) AS all_bins) AS c
     GROUP BY operation
)
SELECT jsonb_build_object(
    'tool', $1::text,
    'window', $3::text,
    'executions', COALESCE(sum(executions), 0),
    'outcomes', jsonb_build_object(
        'ok',        COALESCE(sum(ok), 0),
        'rejected',  COALESCE(sum(rejected), 0),
        'failed',    COALESCE(sum(failed), 0),
        'crashed',   COALESCE(sum(crashed), 0),
        'cancelled', COALESCE(sum(cancelled), 0)),
    'success_rate', round(sum(ok)::numeric / NULLIF(sum(ok) + sum(failed) + sum(crashed), 0), 4),
    'p50_ms', CASE WHEN (SELECT exact FROM exact)
                   THEN round(percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3)
                   ELSE (SELECT p.p50 FROM percentiles p WHERE p.operation IS NULL) END,
    'p95_ms', CASE WHEN (SELECT exact FROM exact)
                   THEN round(percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3)
                   ELSE (SELECT p.p95 FROM percentiles p WHERE p.operation IS NULL) END,
    'by_operation', COALESCE((
        SELECT jsonb_object_agg(operation, stats) FROM (
            SELECT o.operation, jsonb_build_object(
                       'executions', sum(o.executions),
                       'ok', sum(o.ok),
                       'p50_ms', CASE WHEN (SELECT exact FROM exact)
                                      THEN round(percentile_cont(0.5) WITHIN GROUP (ORDER BY o.duration_ms)::numeric, 3)
                                      ELSE (SELECT p.p50 FROM percentiles p WHERE p.operation = o.operation) END,
                       'p95_ms', CASE WHEN (SELECT exact FROM exact)
                                      THEN round(percentile_cont(0.95) WITHIN GROUP (ORDER BY o.duration_ms)::numeric, 3)
                                      ELSE (SELECT p.p95 FROM percentiles p WHERE p.operation = o.operation) END
                   ) AS stats
              FROM w AS o GROUP BY o.operation) per_operation), '{}'::jsonb),
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
              SELECT greatest(0, least(floor(extract(epoch FROM at - (now() - make_interval(secs => $2::float8)))
                                             / ($2::float8 / 24))::int, 23)) AS bucket,
                     sum(executions) AS executions,
                     sum(ok) AS ok,
                     sum(failed) + sum(crashed) AS errors
                FROM w GROUP BY 1) b ON b.bucket = i),
    'last_error', (
        SELECT jsonb_build_object('error', e.error, 'at', rfc3339_utc(e.started_at), 'operation', e.operation,
                                  'outcome', e.outcome, 'tool_call_id', e.tool_call_id)
          FROM tool_executions e
         WHERE e.tenant_id = $4 AND e.tool = $1 AND e.outcome IN ('failed', 'crashed')
         ORDER BY e.started_at DESC, e.execution_id DESC LIMIT 1))
  FROM w

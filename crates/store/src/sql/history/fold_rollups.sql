-- Folds at most $1 rollup rows of past buckets (a minute over two minutes ago, an hour over two
-- hours ago) that single backends wrote into the bucket's one row, shard 0 (migration V20), and
-- answers how many it folded. An execution recorded late for a folded bucket makes a backend's
-- row again, which a later pass folds; the counts are exact throughout.
WITH taken AS (
    DELETE FROM tool_execution_rollups r
     WHERE (r.tenant_id, r.tool, r.period, r.bucket, r.operation, r.shard) IN (
               SELECT u.tenant_id, u.tool, u.period, u.bucket, u.operation, u.shard
                 FROM tool_execution_rollups u
                WHERE u.shard <> 0
                  AND u.bucket < now() - CASE u.period WHEN 'minute' THEN interval '2 minutes'
                                                       ELSE interval '2 hours' END
                ORDER BY u.bucket
                LIMIT $1::int8
                  FOR UPDATE SKIP LOCKED)
    RETURNING r.*
), folded AS (
    INSERT INTO tool_execution_rollups AS r (tenant_id, tool, period, bucket, operation, shard, executions, ok,
                                             rejected, failed, crashed, cancelled, durations)
    SELECT t.tenant_id, t.tool, t.period, t.bucket, t.operation, 0, sum(t.executions), sum(t.ok), sum(t.rejected),
           sum(t.failed), sum(t.crashed), sum(t.cancelled), histogram_sum(t.durations)
      FROM taken t
     GROUP BY t.tenant_id, t.tool, t.period, t.bucket, t.operation
    ON CONFLICT (tenant_id, tool, period, bucket, operation, shard) DO UPDATE
       SET executions = r.executions + excluded.executions,
           ok = r.ok + excluded.ok,
           rejected = r.rejected + excluded.rejected,
           failed = r.failed + excluded.failed,
           crashed = r.crashed + excluded.crashed,
           cancelled = r.cancelled + excluded.cancelled,
           durations = histogram_add(r.durations, excluded.durations)
)
SELECT count(*) AS folded FROM taken

-- A tool's stats from rollups kept as its executions are written, instead of a sort of every
-- execution in the window on each request (docs/architecture.md, "Tool stats at scale").
--
-- Each statement that inserts executions adds them, in the same transaction, to one row per
-- (tenant, tool, operation, minute) and one per hour: how many, by outcome, and how many in
-- each duration bin. The bins grow by 8% each from 0.01 ms (`duration_bin`), so a percentile
-- read from them is within 4% of the exact one. A row is written by one database backend only
-- (`shard` is its process id), so concurrent creates never wait on each other's rollup row; the
-- sweeper folds the shards of a past minute or hour into one row (shard 0,
-- `fold_execution_rollups`). The counts are exact at every moment; the stats route reads them
-- for a window with more executions than it sorts itself (crates/store/src/sql/history/stats.sql).

CREATE TABLE tool_execution_rollups (
    tenant_id  text        NOT NULL,
    tool       text        NOT NULL,
    period     text        NOT NULL CONSTRAINT tool_execution_rollups_period_known CHECK (period IN ('minute', 'hour')),
    bucket     timestamptz NOT NULL,
    operation  text        NOT NULL,
    shard      integer     NOT NULL,
    executions int8        NOT NULL,
    ok         int8        NOT NULL,
    rejected   int8        NOT NULL,
    failed     int8        NOT NULL,
    crashed    int8        NOT NULL,
    cancelled  int8        NOT NULL,
    -- durations[i]: the executions whose duration fell in bin i, up to the highest bin used.
    durations  int8[]      NOT NULL,
    PRIMARY KEY (tenant_id, tool, period, bucket, operation, shard)
);

-- The rows the sweeper still has to fold.
CREATE INDEX tool_execution_rollups_unfolded_idx ON tool_execution_rollups (bucket) WHERE shard <> 0;

-- The duration bin of `ms`: bin 1 below 0.0108 ms, each next bin 8% wider, the last (300)
-- from about 28 hours.
CREATE FUNCTION duration_bin(ms double precision)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT least(300, greatest(1, 1 + floor(ln(greatest(ms, 0.01) / 0.01) / ln(1.08))::integer))
$$;

-- The duration a bin stands for: the geometric middle of its bounds.
CREATE FUNCTION duration_bin_ms(bin integer)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 0.01 * power(1.08, bin - 0.5)
$$;

-- Two histograms added bin by bin (either may be shorter).
CREATE FUNCTION histogram_add(a int8[], b int8[])
RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    longer int8[] := CASE WHEN cardinality(a) >= cardinality(b) THEN a ELSE b END;
    shorter int8[] := CASE WHEN cardinality(a) >= cardinality(b) THEN b ELSE a END;
BEGIN
    IF a IS NULL OR b IS NULL THEN
        RETURN COALESCE(a, b, '{}');
    END IF;
    FOR i IN 1 .. cardinality(shorter) LOOP
        longer[i] := longer[i] + shorter[i];
    END LOOP;
    RETURN longer;
END
$$;

CREATE AGGREGATE histogram_sum(int8[]) (SFUNC = histogram_add, STYPE = int8[], INITCOND = '{}');

-- The histogram of executions counted by bin: counts[k] executions in bins[k].
CREATE FUNCTION histogram_of(bins integer[], counts int8[])
RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    histogram int8[] := array_fill(0::int8, ARRAY[(SELECT max(b) FROM unnest(bins) AS b)]);
BEGIN
    FOR k IN 1 .. cardinality(bins) LOOP
        histogram[bins[k]] := histogram[bins[k]] + counts[k];
    END LOOP;
    RETURN histogram;
END
$$;

-- Adds `executions` to the rollups as `shard`'s rows: the trigger's, a backend's own (its
-- process id); the backfill's (V21), 0.
CREATE FUNCTION roll_up_executions(executions tool_executions[], shard integer)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO tool_execution_rollups AS r (tenant_id, tool, period, bucket, operation, shard, executions, ok,
                                             rejected, failed, crashed, cancelled, durations)
    SELECT g.tenant_id, g.tool, g.period, g.bucket, g.operation, shard, sum(g.n), sum(g.ok), sum(g.rejected),
           sum(g.failed), sum(g.crashed), sum(g.cancelled), histogram_of(array_agg(g.bin), array_agg(g.n))
      FROM (SELECT a.tenant_id, a.tool, p.period, date_trunc(p.period, a.started_at, 'UTC') AS bucket, a.operation,
                   duration_bin(a.duration_ms) AS bin, count(*) AS n,
                   count(*) FILTER (WHERE a.outcome = 'ok') AS ok,
                   count(*) FILTER (WHERE a.outcome = 'rejected') AS rejected,
                   count(*) FILTER (WHERE a.outcome = 'failed') AS failed,
                   count(*) FILTER (WHERE a.outcome = 'crashed') AS crashed,
                   count(*) FILTER (WHERE a.outcome = 'cancelled') AS cancelled
              FROM unnest(executions) AS a CROSS JOIN (VALUES ('minute'), ('hour')) AS p(period)
             GROUP BY 1, 2, 3, 4, 5, 6) AS g
     GROUP BY g.tenant_id, g.tool, g.period, g.bucket, g.operation
    ON CONFLICT (tenant_id, tool, period, bucket, operation, shard) DO UPDATE
       SET executions = r.executions + excluded.executions,
           ok = r.ok + excluded.ok,
           rejected = r.rejected + excluded.rejected,
           failed = r.failed + excluded.failed,
           crashed = r.crashed + excluded.crashed,
           cancelled = r.cancelled + excluded.cancelled,
           durations = histogram_add(r.durations, excluded.durations)
$$;

CREATE FUNCTION roll_up_tool_executions()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM roll_up_executions((SELECT array_agg(ROW(a.*)::tool_executions) FROM added AS a), pg_backend_pid());
    RETURN NULL;
END
$$;

-- Creating the trigger waits for the statements inserting executions to end, and every later
-- one fires it: the executions up to the highest id now are the ones the backfill (V21) adds,
-- after this migration's commit, without holding up the API's inserts meanwhile.
CREATE TRIGGER tool_executions_roll_up
    AFTER INSERT ON tool_executions
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION roll_up_tool_executions();

CREATE TABLE tool_execution_rollups_backfill AS
SELECT COALESCE(max(execution_id), 0) AS up_to_execution_id FROM tool_executions;

-- A tool's stats from rollups instead of a sort of every execution in the window on each
-- request (docs/architecture.md, "Tool stats at scale").
--
-- Each statement that inserts executions copies what the stats need of them into an inbox
-- (`tool_execution_inbox`, a plain insert in the same transaction: no row that others write,
-- so no create waits on another). The sweeper takes the inbox a batch at a time and adds it to
-- one row per (tenant, tool, operation, minute) and one per hour (`tool_execution_rollups`):
-- how many, by outcome, and how many in each duration bin. The bins grow by 8% each from
-- 0.01 ms (`duration_bin`), so a percentile read from them is within 4% of the exact one.
-- Taking from the inbox and adding to the rollups is one statement, so a reader sees every
-- execution once, in one or the other: the counts are exact at every moment.

CREATE TABLE tool_execution_rollups (
    tenant_id  text        NOT NULL,
    tool       text        NOT NULL,
    period     text        NOT NULL CONSTRAINT tool_execution_rollups_period_known CHECK (period IN ('minute', 'hour')),
    bucket     timestamptz NOT NULL,
    operation  text        NOT NULL,
    executions int8        NOT NULL,
    ok         int8        NOT NULL,
    rejected   int8        NOT NULL,
    failed     int8        NOT NULL,
    crashed    int8        NOT NULL,
    cancelled  int8        NOT NULL,
    -- durations[i]: the executions whose duration fell in bin i, up to the highest bin used.
    durations  int8[]      NOT NULL,
    PRIMARY KEY (tenant_id, tool, period, bucket, operation)
);

-- Executions not yet added to the rollups: a few seconds' worth while the sweeper runs.
CREATE TABLE tool_execution_inbox (
    tenant_id   text             NOT NULL,
    tool        text             NOT NULL,
    operation   text             NOT NULL,
    started_at  timestamptz      NOT NULL,
    duration_ms double precision NOT NULL,
    outcome     text             NOT NULL
);

-- The stats route reads a tenant's tool's part of it (when the sweeper is behind or off, the
-- inbox is as long as it is behind).
CREATE INDEX tool_execution_inbox_tool_idx ON tool_execution_inbox (tenant_id, tool, started_at);

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
BEGIN
    RETURN (SELECT COALESCE(array_agg(COALESCE(x, 0) + COALESCE(y, 0) ORDER BY k), '{}')
              FROM unnest(a, b) WITH ORDINALITY AS u(x, y, k));
END
$$;

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

-- `added` summed up per (tenant, tool, operation) and `period` ('minute' or 'hour'): what a
-- rollup row holds. The sweeper's fold adds these to the rollups (`roll_up_executions`), and the
-- stats route sums the executions not yet folded the same way (crates/store/src/sql/history/stats.sql).
CREATE FUNCTION execution_rollup_rows(added tool_execution_inbox[], period text)
RETURNS TABLE (tenant_id text, tool text, bucket timestamptz, operation text, executions int8, ok int8,
               rejected int8, failed int8, crashed int8, cancelled int8, durations int8[])
LANGUAGE sql STABLE
AS $$
    SELECT g.tenant_id, g.tool, g.bucket, g.operation, sum(g.n)::int8, sum(g.ok)::int8, sum(g.rejected)::int8,
           sum(g.failed)::int8, sum(g.crashed)::int8, sum(g.cancelled)::int8,
           histogram_of(array_agg(g.bin), array_agg(g.n))
      FROM (SELECT a.tenant_id, a.tool, date_trunc(period, a.started_at, 'UTC') AS bucket, a.operation,
                   duration_bin(a.duration_ms) AS bin, count(*) AS n,
                   count(*) FILTER (WHERE a.outcome = 'ok') AS ok,
                   count(*) FILTER (WHERE a.outcome = 'rejected') AS rejected,
                   count(*) FILTER (WHERE a.outcome = 'failed') AS failed,
                   count(*) FILTER (WHERE a.outcome = 'crashed') AS crashed,
                   count(*) FILTER (WHERE a.outcome = 'cancelled') AS cancelled
              FROM unnest(added) AS a
             GROUP BY 1, 2, 3, 4, 5) AS g
     GROUP BY g.tenant_id, g.tool, g.bucket, g.operation
$$;

-- Adds `added` to the rollups: the sweeper's fold (crates/store/src/sql/history/fold_rollups.sql)
-- and the backfill (V21).
CREATE FUNCTION roll_up_executions(added tool_execution_inbox[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO tool_execution_rollups AS r (tenant_id, tool, period, bucket, operation, executions, ok, rejected,
                                             failed, crashed, cancelled, durations)
    SELECT g.tenant_id, g.tool, p.period, g.bucket, g.operation, g.executions, g.ok, g.rejected, g.failed,
           g.crashed, g.cancelled, g.durations
      FROM (VALUES ('minute'), ('hour')) AS p(period)
     CROSS JOIN LATERAL execution_rollup_rows(added, p.period) AS g
     -- Concurrent folds lock the rows they add to in the same order, so neither waits on the
     -- other in a circle.
     ORDER BY g.tenant_id, g.tool, p.period, g.bucket, g.operation
    ON CONFLICT (tenant_id, tool, period, bucket, operation) DO UPDATE
       SET executions = r.executions + excluded.executions,
           ok = r.ok + excluded.ok,
           rejected = r.rejected + excluded.rejected,
           failed = r.failed + excluded.failed,
           crashed = r.crashed + excluded.crashed,
           cancelled = r.cancelled + excluded.cancelled,
           durations = histogram_add(r.durations, excluded.durations);
END
$$;

CREATE FUNCTION copy_tool_executions_to_inbox()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO tool_execution_inbox (tenant_id, tool, operation, started_at, duration_ms, outcome)
    SELECT a.tenant_id, a.tool, a.operation, a.started_at, a.duration_ms, a.outcome FROM added AS a;
    RETURN NULL;
END
$$;

-- Creating the trigger waits for the statements inserting executions to end, and every later
-- one fires it: the executions up to the highest id now are the ones the backfill (V21) adds,
-- after this migration's commit, without holding up the API's inserts meanwhile.
CREATE TRIGGER tool_executions_to_inbox
    AFTER INSERT ON tool_executions
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION copy_tool_executions_to_inbox();

CREATE TABLE tool_execution_rollups_backfill AS
SELECT COALESCE(max(execution_id), 0) AS up_to_execution_id FROM tool_executions;

-- Partitioning the history by week, first step (docs/architecture.md, "Retention"; the steps
-- are three migrations so that no long scan runs under a lock the API's writes wait on).
--
-- Each history table's rows so far become its first partition, the one holding everything
-- before the Monday (UTC) after the week of the day after tomorrow, or of its latest row if that
-- is later (an empty table has no such partition: V24 drops it). Attaching a table as a partition scans it unless
-- a valid CHECK constraint already proves its rows are in range: this migration adds that
-- constraint without checking the rows (a moment's lock), V23 checks them while inserts go on,
-- and V24 attaches without a scan.

-- The tables partitioned by week, and the column that places a row.
CREATE TABLE history_tables (
    parent      text    PRIMARY KEY,
    time_column text    NOT NULL,
    -- Rollup rows are updated in place as executions are added to them; room left in each
    -- page lets those updates stay in the page (HOT) instead of leaving a dead row elsewhere.
    fillfactor  integer NOT NULL
);
INSERT INTO history_tables VALUES
    ('tool_executions', 'started_at', 100),
    ('callback_attempts', 'created_at', 100),
    ('tool_execution_rollups', 'bucket', 70);

-- Where each table's first partition ends; V24 reads it, then drops it.
CREATE TABLE history_partitioning_cutoffs (
    parent text        PRIMARY KEY,
    cutoff timestamptz NOT NULL
);

-- The latest row is read before any lock beyond a reader's is taken.
INSERT INTO history_partitioning_cutoffs (parent, cutoff)
SELECT t.parent,
       date_trunc('week', greatest(now() + interval '2 days', t.latest), 'UTC') + interval '1 week'
  FROM (VALUES ('tool_executions', (SELECT max(started_at) FROM tool_executions)),
               ('callback_attempts', (SELECT max(created_at) FROM callback_attempts)),
               ('tool_execution_rollups', (SELECT max(bucket) FROM tool_execution_rollups))) AS t(parent, latest)
 WHERE t.latest IS NOT NULL;

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT c.parent, c.cutoff, h.time_column
               FROM history_partitioning_cutoffs c JOIN history_tables h USING (parent) LOOP
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I < %L) NOT VALID',
                       t.parent, t.parent || '_before_partitions', t.time_column, t.cutoff);
    END LOOP;
END
$$;

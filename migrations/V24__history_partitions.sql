-- Partitioning the history by week, last step (see V22; docs/architecture.md, "Retention").
--
-- The executions, the callback attempts and the stats' rollups are kept in one partition per
-- week (from Monday, UTC), so that history past its retention goes by dropping whole
-- partitions: no DELETE, no bloat, no vacuum behind it. A week, not a day: every statement that
-- reads a partitioned table without a constant bound on its time plans each partition, and
-- thirty daily ones made the stats statement's planning alone take longer than its answer had. Each table's rows so far become its `_earlier` partition:
-- V23 proved them in range, so attaching them scans nothing, and their indexes become the
-- partitioned indexes' first parts without being built again. What this migration locks, it
-- holds for the time the catalog changes take, whatever the tables hold.

-- Each history table renamed `<table>_earlier`, its indexes likewise, and a partitioned table
-- of the same columns, defaults and checks made in its place. A partition may not have an
-- identity of its own: the new table's continues the numbering.
DO $$
DECLARE
    t record;
    earlier text;
    index_name text;
    identity_column text;
    sequence_name text;
BEGIN
    FOR t IN SELECT * FROM history_tables LOOP
        earlier := t.parent || '_earlier';
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.parent, earlier);
        FOR index_name IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                           WHERE i.indrelid = earlier::regclass LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', index_name,
                           earlier || substr(index_name, length(t.parent) + 1));
        END LOOP;
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%I)',
                       t.parent, earlier, t.time_column);
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT IF EXISTS %I', t.parent, t.parent || '_before_partitions');
        SELECT a.attname INTO identity_column FROM pg_attribute a
         WHERE a.attrelid = earlier::regclass AND a.attidentity <> '';
        IF identity_column IS NOT NULL THEN
            sequence_name := pg_get_serial_sequence(earlier, identity_column);
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I ADD GENERATED ALWAYS AS IDENTITY', t.parent, identity_column);
            EXECUTE format('SELECT setval(%L, last_value, is_called) FROM %s',
                           pg_get_serial_sequence(t.parent, identity_column), sequence_name);
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I DROP IDENTITY', earlier, identity_column);
            EXECUTE format('ALTER SEQUENCE %s RENAME TO %I', pg_get_serial_sequence(t.parent, identity_column),
                           (parse_ident(sequence_name))[2]);
        END IF;
    END LOOP;
END
$$;

-- The same indexes on the partitioned tables. Attaching the `_earlier` tables (below) makes
-- their indexes these indexes' first parts, without building them again. Execution and attempt
-- ids stay unique by their sequences: a unique index would have to include the day.
CREATE INDEX tool_executions_call_idx ON tool_executions (tool_call_id) WHERE tool_call_id IS NOT NULL;
CREATE INDEX tool_executions_tenant_errors_idx ON tool_executions (tenant_id, tool, started_at DESC, execution_id DESC)
    WHERE outcome = ANY (ARRAY['failed', 'crashed']);
CREATE INDEX tool_executions_tenant_tool_started_idx
    ON tool_executions (tenant_id, tool, started_at DESC, execution_id DESC);
CREATE INDEX callback_attempts_call_idx ON callback_attempts (tool_call_id, created_at);
-- The bucket is in the key, so the key (which the rollups' upsert relies on) stays unique.
ALTER TABLE tool_execution_rollups ADD PRIMARY KEY (tenant_id, tool, period, bucket, operation);

-- The trigger that feeds the stats' rollups (V20) moves to the partitioned table.
DROP TRIGGER tool_executions_to_inbox ON tool_executions_earlier;
CREATE TRIGGER tool_executions_to_inbox
    AFTER INSERT ON tool_executions
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION copy_tool_executions_to_inbox();

-- The rows so far, attached as they are, and a default partition for rows of a week that has
-- no partition yet (only if the sweeper has not run for longer than it creates ahead). A table
-- that was empty at V22 is dropped instead, unless rows came meanwhile: then, being a few, they
-- are attached with a scan.
DO $$
DECLARE
    t record;
    has_rows boolean;
BEGIN
    FOR t IN SELECT h.parent, c.cutoff FROM history_tables h LEFT JOIN history_partitioning_cutoffs c USING (parent) LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', t.parent || '_earlier') INTO has_rows;
        IF t.cutoff IS NULL AND NOT has_rows THEN
            EXECUTE format('DROP TABLE %I', t.parent || '_earlier');
        ELSE
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                           t.parent, t.parent || '_earlier',
                           COALESCE(t.cutoff, date_trunc('week', now() + interval '2 days', 'UTC') + interval '1 week'));
        END IF;
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.parent || '_default', t.parent);
    END LOOP;
END
$$;
DROP TABLE history_partitioning_cutoffs;

-- Every partition of the history tables, with the range of times it holds: `lower` is NULL
-- for the `_earlier` partition (no lower bound), both are NULL for the default partition.
CREATE FUNCTION history_partitions()
RETURNS TABLE (parent text, partition text, lower timestamptz, upper timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT h.parent, c.relname::text,
           substring(b.bound FROM 'FROM \(''([^'']*)''\)')::timestamptz,
           substring(b.bound FROM 'TO \(''([^'']*)''\)')::timestamptz
      FROM history_tables h
      JOIN pg_inherits i ON i.inhparent = h.parent::regclass
      JOIN pg_class c ON c.oid = i.inhrelid
     CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b
$$;

-- Creates the missing week partitions (from Monday, UTC) holding the days `first_day` to
-- `last_day` of every history table; answers how many it created. A week's rows that went to
-- the default partition meanwhile move into the new partition. The partition is built apart,
-- with a CHECK constraint proving its range, then attached: attaching locks the parent only
-- against other DDL, not against the API's inserts and reads.
CREATE FUNCTION create_history_partitions(first_day date, last_day date)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    t record;
    week date;
    week_start timestamptz;
    week_end timestamptz;
    name text;
    created integer := 0;
BEGIN
    FOR t IN SELECT * FROM history_tables ORDER BY parent LOOP
        FOR week IN SELECT w::date FROM generate_series(date_trunc('week', first_day::timestamp), last_day::timestamp, interval '1 week') AS w LOOP
            week_start := week::timestamp AT TIME ZONE 'UTC';
            week_end := week_start + interval '1 week';
            CONTINUE WHEN EXISTS (SELECT 1 FROM history_partitions() p
                                   WHERE p.parent = t.parent AND p.upper > week_start
                                     AND (p.lower IS NULL OR p.lower < week_end));
            name := t.parent || '_' || to_char(week, 'YYYYMMDD');
            EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (fillfactor = %s)',
                           name, t.parent, t.fillfactor);
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I >= %L AND %I < %L)',
                           name, name || '_in_range', t.time_column, week_start, t.time_column, week_end);
            EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *)
                            INSERT INTO %I SELECT * FROM moved',
                           t.parent || '_default', t.time_column, week_start, t.time_column, week_end, name);
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                           t.parent, name, week_start, week_end);
            created := created + 1;
        END LOOP;
    END LOOP;
    RETURN created;
END
$$;

-- The sweeper's upkeep of the history (crates/store/src/sql/retention/keep_partitions.sql):
-- creates the partitions holding today and the `days_ahead` days after it, and any recent day
-- whose rows went to the default partition; drops every partition whose days all lie more than
-- `retention_days` before today (0 keeps everything), so history is kept for its retention and
-- at most a week more; answers one row, what it created and
-- dropped. One sweeper does it at a time; the others skip it. Waiting for a lock at most 100 ms
-- keeps a drop from queueing the API's statements behind a long reader: it is tried again on
-- the next pass.
CREATE FUNCTION keep_history_partitions(days_ahead integer, retention_days integer)
RETURNS TABLE (created integer, dropped integer)
LANGUAGE plpgsql
SET lock_timeout = '100ms'
AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    horizon timestamptz := NULL;
    first_day date := today;
    t record;
    p record;
    oldest timestamptz;
BEGIN
    created := 0;
    dropped := 0;
    IF NOT pg_try_advisory_xact_lock(hashtext('gatehouse history partitions')) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF retention_days > 0 THEN
        horizon := today::timestamp AT TIME ZONE 'UTC' - retention_days * interval '1 day';
    END IF;
    FOR t IN SELECT * FROM history_tables LOOP
        EXECUTE format('SELECT min(%I) FROM %I', t.time_column, t.parent || '_default') INTO oldest;
        IF oldest IS NOT NULL THEN
            first_day := least(first_day, (greatest(oldest, COALESCE(horizon, oldest)) AT TIME ZONE 'UTC')::date);
        END IF;
    END LOOP;
    created := create_history_partitions(first_day, today + days_ahead);
    IF horizon IS NOT NULL THEN
        FOR p IN SELECT * FROM history_partitions() AS h WHERE h.upper <= horizon ORDER BY h.upper LOOP
            EXECUTE format('DROP TABLE %I', p.partition);
            dropped := dropped + 1;
        END LOOP;
        FOR t IN SELECT * FROM history_tables LOOP
            EXECUTE format('DELETE FROM %I WHERE %I < %L', t.parent || '_default', t.time_column, horizon);
        END LOOP;
    END IF;
    RETURN NEXT;
END
$$;

-- This week's partitions and the next week's, so that a database the sweeper has not yet
-- visited writes to week partitions from the start.
SELECT create_history_partitions((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7);

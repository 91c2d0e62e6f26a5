-- The executions recorded before the rollups existed (V20), added to them in batches of
-- 100,000 by id. This transaction reads `tool_executions` without blocking its inserts, and
-- writes only the rollups' shard-0 rows, which only the sweeper's fold writes too; both add to
-- a row, so either may come first (docs/deploying.md, "Upgrading").
DO $$
DECLARE
    up_to int8 := (SELECT up_to_execution_id FROM tool_execution_rollups_backfill);
    done int8 := 0;
BEGIN
    WHILE done < up_to LOOP
        PERFORM roll_up_executions(
            (SELECT array_agg(e) FROM tool_executions e
              WHERE e.execution_id > done AND e.execution_id <= least(done + 100000, up_to)),
            0);
        done := done + 100000;
    END LOOP;
END
$$;

DROP TABLE tool_execution_rollups_backfill;

-- The executions recorded before the rollups existed (V20), added to them in batches of
-- 100,000 by id. This transaction reads `tool_executions` without blocking its inserts; it
-- adds to the rollups as the sweeper's fold does, so either may come first (docs/deploying.md,
-- "Upgrading").
DO $$
DECLARE
    up_to int8 := (SELECT up_to_execution_id FROM tool_execution_rollups_backfill);
    done int8 := 0;
BEGIN
    WHILE done < up_to LOOP
        PERFORM roll_up_executions(
            (SELECT array_agg(ROW(e.tenant_id, e.tool, e.operation, e.started_at, e.duration_ms,
                                  e.outcome)::tool_execution_inbox)
               FROM tool_executions e
              WHERE e.execution_id > done AND e.execution_id <= least(done + 100000, up_to)));
        done := done + 100000;
    END LOOP;
END
$$;

DROP TABLE tool_execution_rollups_backfill;
-- So that the stats route's first plans know the rollups' size.
ANALYZE tool_execution_rollups;

-- Takes at most $1 executions from the inbox and adds them to the rollups (migration V20), in
-- one statement, so a reader counts each execution once, in one or the other; answers how
-- many it took. Several sweepers take different rows (SKIP LOCKED).
WITH taken AS (
    DELETE FROM tool_execution_inbox i
     WHERE i.ctid IN (SELECT ctid FROM tool_execution_inbox LIMIT $1::int8 FOR UPDATE SKIP LOCKED)
    RETURNING i.*
)
SELECT count(*) AS folded, roll_up_executions(array_agg(ROW(t.*)::tool_execution_inbox)) IS NULL AS added
  FROM taken t

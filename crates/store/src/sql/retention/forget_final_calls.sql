-- Forgets at most $2 final calls created more than $1 days ago, oldest first, with their
-- status and parameter histories (columns of the call); answers how many. A call that is not
-- final, or that the sweeper still owes a report or a discard, stays whatever its age. Several
-- sweepers take different calls (SKIP LOCKED).
WITH gone AS (
    DELETE FROM tool_calls c
     WHERE c.tool_call_id IN (
               SELECT o.tool_call_id FROM tool_calls o
                WHERE o.created_at < now() - $1::int4 * interval '1 day'
                  AND o.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
                  AND o.report_owed_since IS NULL AND o.discard_owed_since IS NULL
                ORDER BY o.created_at
                LIMIT $2::int8
                  FOR UPDATE SKIP LOCKED)
    RETURNING 1
)
SELECT count(*) AS forgotten FROM gone

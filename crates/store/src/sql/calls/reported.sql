-- The report each call's status owed has been tried (delivered, or given up after its attempts),
-- or there was nowhere to send it: the sweeper no longer needs to send it. Only the report of
-- the call's current status is cleared, so a late checkpoint delivery never clears the
-- completion owed since.
-- $1 the ids, a JSON array of strings (one for a delivery; a sweep's batch of calls with no
-- relay to tell, in one statement rather than one each: docs/architecture.md, "The sweeper");
-- $2 the report's kind ('checkpoint' or 'completion'). If this write is lost, the sweeper
-- sends the reports once more, so it commits without waiting for the disk (migration V12).
WITH cleared AS (
    UPDATE tool_calls
       SET report_owed_since = NULL
     WHERE tool_call_id IN (SELECT jsonb_array_elements_text($1::jsonb))
       AND report_owed_since IS NOT NULL
       AND CASE $2::text WHEN 'checkpoint' THEN status = 'PREPARED'
                         ELSE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') END
       AND asynchronous_commit()
    RETURNING 1
)
SELECT count(*) AS cleared FROM cleared

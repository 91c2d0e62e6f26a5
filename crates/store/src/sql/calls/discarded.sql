-- The tool answered the call's `discard` (done, or a definitive no): nothing is owed any more.
-- $1 id.
WITH cleared AS (
    UPDATE tool_calls SET discard_owed_since = NULL
     WHERE tool_call_id = $1 AND discard_owed_since IS NOT NULL
    RETURNING 1
)
SELECT count(*) AS cleared FROM cleared

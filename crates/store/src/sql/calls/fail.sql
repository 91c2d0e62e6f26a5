-- EXECUTING -> FAILED. $1 id, $2 lease owner, $3 reason, $4 voice_response, $5 whether what
-- `prepare` left is owed a discard (a definite failure releases the hold).
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET status = 'FAILED',
           status_history = c.status_history || jsonb_build_array(status_entry('FAILED', $3, 'executor')),
           error_message = $3, voice_response = $4, completed_at = now(),
           lease_owner = NULL, lease_until = NULL,
           discard_owed_since = CASE WHEN $5::bool AND c.checkpoint IS NOT NULL
                                     THEN now() ELSE c.discard_owed_since END
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

-- EXECUTING -> COMPLETED. $1 id, $2 lease owner, $3 result, $4 voice_response.
-- execution_time_ms counts time spent working, not the caller's wait at the checkpoint.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET status = 'COMPLETED',
           status_history = c.status_history || jsonb_build_array(status_entry('COMPLETED', NULL, 'executor')),
           result = $3::jsonb, voice_response = $4, completed_at = now(), error_message = NULL,
           lease_owner = NULL, lease_until = NULL,
           execution_time_ms = (EXTRACT(EPOCH FROM (
               COALESCE(c.prepared_at, now()) - c.confirmed_at
               + CASE WHEN c.prepared_at IS NULL THEN interval '0' ELSE now() - COALESCE(c.executed_at, now()) END
           )) * 1000)::bigint
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

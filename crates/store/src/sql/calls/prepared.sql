-- EXECUTING -> PREPARED at the checkpoint. $1 id, $2 lease owner, $3 checkpoint, $4 checkpoint ttl s.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET status = 'PREPARED',
           status_history = c.status_history || jsonb_build_array(status_entry('PREPARED', NULL, 'executor')),
           checkpoint = $3::jsonb, prepared_at = now(),
           expires_at = now() + make_interval(secs => $4::float8),
           lease_owner = NULL, lease_until = NULL, error_message = NULL
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2 AND c.prepared_at IS NULL
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

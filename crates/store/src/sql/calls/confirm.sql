-- PENDING -> EXECUTING. $1 id, $2 lease owner, $3 lease seconds, $4 callback_url or NULL.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET status = 'EXECUTING',
           status_history = c.status_history || jsonb_build_array(status_entry('EXECUTING', NULL, 'confirm')),
           confirmed_at = now(), expires_at = NULL, attempts = 1,
           lease_owner = $2, lease_until = now() + make_interval(secs => $3::float8),
           callback_url = COALESCE($4, c.callback_url), error_message = NULL
     WHERE c.tool_call_id = $1
       AND c.status = 'PENDING' AND c.expires_at > now()
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

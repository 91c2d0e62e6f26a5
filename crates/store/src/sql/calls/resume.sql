-- PREPARED -> EXECUTING on "proceed". $1 id, $2 lease owner, $3 lease seconds, $4 the tenant
-- whose call it must be (NULL: any), $5 the key making the change.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1 AND ($4::text IS NULL OR c.tenant_id = $4::text)),
changed AS (
    UPDATE tool_calls c
       SET status = 'EXECUTING',
           status_history = c.status_history || jsonb_build_array(status_entry('EXECUTING', 'proceed', 'resume', $5)),
           expires_at = NULL, attempts = 1, error_message = NULL,
           lease_owner = $2, lease_until = now() + make_interval(secs => $3::float8)
     WHERE c.tool_call_id = $1 AND ($4::text IS NULL OR c.tenant_id = $4::text)
       AND c.status = 'PREPARED' AND c.expires_at > now()
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

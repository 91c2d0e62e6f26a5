-- PENDING -> EXECUTING. $1 id, $2 lease owner, $3 lease seconds, $4 callback_url or NULL,
-- $5 the tenant whose call it must be (NULL: any), $6 the key making the change.
-- A call's reports go where its creator said: a confirm may name the callback URL the call
-- already has, or give one to a call created without one (recorded in the status history),
-- never replace it.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1 AND ($5::text IS NULL OR c.tenant_id = $5::text)),
changed AS (
    UPDATE tool_calls c
       SET status = 'EXECUTING',
           status_history = c.status_history || jsonb_build_array(status_entry('EXECUTING',
               CASE WHEN $4::text IS NOT NULL AND c.callback_url IS NULL THEN 'callback_url given at confirm' END,
               'confirm', $6)),
           confirmed_at = now(), expires_at = NULL, attempts = 1,
           lease_owner = $2, lease_until = now() + make_interval(secs => $3::float8),
           callback_url = COALESCE(c.callback_url, $4), error_message = NULL
     WHERE c.tool_call_id = $1 AND ($5::text IS NULL OR c.tenant_id = $5::text)
       AND c.status = 'PENDING' AND c.expires_at > now()
       AND ($4::text IS NULL OR c.callback_url IS NULL OR c.callback_url = $4::text)
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

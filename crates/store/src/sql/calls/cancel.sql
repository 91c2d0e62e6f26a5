-- Any open state -> CANCELLED, unless the side effect has started or the call expired.
-- $1 id, $2 reason, $3 actor, $4 the sentence for the relay, $5 the tenant whose call it must be
-- (NULL: any), $6 the key making the change.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1 AND ($5::text IS NULL OR c.tenant_id = $5::text)),
changed AS (
    UPDATE tool_calls c
       SET status = 'CANCELLED',
           status_history = c.status_history || jsonb_build_array(status_entry('CANCELLED', $2, $3, $6)),
           voice_response = $4, completed_at = now(), expires_at = NULL, lease_owner = NULL, lease_until = NULL
     WHERE c.tool_call_id = $1 AND ($5::text IS NULL OR c.tenant_id = $5::text)
       AND ((c.status IN ('PENDING', 'PREPARED') AND c.expires_at > now())
            OR (c.status = 'EXECUTING' AND c.side_effect_started_at IS NULL))
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

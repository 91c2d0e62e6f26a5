-- PENDING stays PENDING with new parameters. $1 id, $2 the parameters the patch was applied to
-- (so a concurrent modify is not silently overwritten), $3 new parameters, $4 summary,
-- $5 reason, $6 [{field, old_value, new_value}], $7 the tenant whose call it must be (NULL: any),
-- $8 the key making the change.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1 AND ($7::text IS NULL OR c.tenant_id = $7::text)),
changed AS (
    UPDATE tool_calls c
       SET parameters = $3::jsonb,
           summary = $4,
           parameters_history = c.parameters_history || (
               SELECT COALESCE(jsonb_agg(jsonb_strip_nulls(change || jsonb_build_object(
                          'timestamp', rfc3339_utc(now()), 'reason', $5::text))), '[]'::jsonb)
                 FROM jsonb_array_elements($6::jsonb) AS change),
           status_history = c.status_history || jsonb_build_array(status_entry('MODIFIED', $5, 'relay', $8))
     WHERE c.tool_call_id = $1 AND ($7::text IS NULL OR c.tenant_id = $7::text)
       AND c.status = 'PENDING' AND c.expires_at > now() AND c.parameters = $2::jsonb
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

-- Every attempt to deliver a callback of one call, oldest first, or NULL when the tenant $3 has
-- no call with this id. $1 id, $2 the most attempts to answer (a call makes a handful: progress, checkpoint,
-- completion, and their retries). The outer SELECT reads from nothing, so it is one row
-- whatever matches (see rows.rs). No attempt precedes its call, so the call's creation time
-- leaves out every week partition before it (migration V24) instead of probing each.
WITH called AS (
    SELECT c.created_at FROM tool_calls c WHERE c.tool_call_id = $1::text AND c.tenant_id = $3::text
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM called) THEN jsonb_build_object(
    'tool_call_id', $1::text,
    'callbacks', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'attempt_id',  a.attempt_id,
                   'kind',        a.kind,
                   'url',         a.url,
                   'attempt',     a.attempt,
                   'status_code', a.status_code,
                   'error',       a.error,
                   'duration_ms', round(a.duration_ms::numeric, 3),
                   'at',          rfc3339_utc(a.created_at))
               ORDER BY a.created_at, a.attempt_id)
          FROM (SELECT * FROM callback_attempts
                 WHERE tool_call_id = $1::text
                   AND created_at >= (SELECT created_at FROM called)
                 ORDER BY created_at, attempt_id
                 LIMIT $2::int8) a), '[]'::jsonb)) END AS callbacks

-- The sweeper makes expiry permanent: waiting calls past their deadline become EXPIRED.
-- $1 batch size; $2 the deployment's default callback URL, or NULL: it is the first tenant's
-- alone (`Config::callback_default_url`), so another tenant's call without a URL has nobody to tell. SKIP LOCKED lets several
-- sweepers share the work without waiting.
-- Answers the calls someone must hear about in full (a relay to tell, or prepared work to
-- discard), and only the ids of the rest: after an outage most of a backlog has nobody to
-- tell, and building every call's JSON was half of this statement's time
-- (docs/architecture.md, "The sweeper").
WITH stale AS (
    SELECT tool_call_id FROM tool_calls
     WHERE status IN ('PENDING', 'PREPARED') AND expires_at <= now()
     ORDER BY expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
),
changed AS (
    UPDATE tool_calls c
       SET status = 'EXPIRED',
           status_history = c.status_history || jsonb_build_array(status_entry(
               'EXPIRED', CASE c.status WHEN 'PENDING' THEN 'not confirmed in time'
                                        ELSE 'no decision at the checkpoint in time' END, 'sweeper')),
           voice_response = CASE c.status
               WHEN 'PENDING' THEN 'That request timed out before it was confirmed, so nothing was done.'
               ELSE 'That request timed out at the final check, so nothing was done.' END,
           completed_at = now()
      FROM stale
     WHERE c.tool_call_id = stale.tool_call_id
       AND c.status IN ('PENDING', 'PREPARED') AND c.expires_at <= now()
    RETURNING c, c.prepared_at IS NOT NULL AS was_prepared,
              c.callback_url IS NULL AND ($2::text IS NULL OR c.tenant_id <> 'default')
                  AND (c.prepared_at IS NULL OR c.checkpoint IS NULL) AS untold
)
SELECT jsonb_build_object(
           'to_follow_up', COALESCE(jsonb_agg(tool_call_json(changed.c) || jsonb_build_object('was_prepared', was_prepared))
                                    FILTER (WHERE NOT untold), '[]'::jsonb),
           'untold', COALESCE(jsonb_agg((changed.c).tool_call_id) FILTER (WHERE untold), '[]'::jsonb))
  FROM changed

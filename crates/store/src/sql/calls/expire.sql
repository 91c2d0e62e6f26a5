-- The sweeper makes expiry permanent: waiting calls past their deadline become EXPIRED.
-- $1 batch size. SKIP LOCKED lets several sweepers share the work without waiting.
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
    RETURNING c, c.prepared_at IS NOT NULL AS was_prepared
)
SELECT COALESCE(jsonb_agg(tool_call_json(changed.c) || jsonb_build_object('was_prepared', was_prepared)), '[]'::jsonb)
  FROM changed

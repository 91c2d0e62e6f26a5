-- Executions that lost their worker with no attempts left become FAILED, with the reason.
-- $1 max attempts, $2 batch size.
WITH exhausted AS (
    SELECT tool_call_id FROM tool_calls
     WHERE status = 'EXECUTING' AND lease_until < now() AND attempts >= $1
     ORDER BY lease_until
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
changed AS (
    UPDATE tool_calls c
       SET status = 'FAILED',
           error_message = format('gave up after %s attempts: %s', c.attempts,
                                  COALESCE(c.error_message, 'the worker stopped answering')),
           status_history = c.status_history || jsonb_build_array(status_entry('FAILED',
               format('gave up after %s attempts: %s', c.attempts,
                      COALESCE(c.error_message, 'the worker stopped answering')), 'sweeper')),
           voice_response = CASE WHEN c.side_effect_started_at IS NULL
               THEN 'Sorry, I couldn''t complete that request, and nothing was done.'
               ELSE 'Sorry, something went wrong and I can''t confirm whether that request went through.' END,
           completed_at = now(), lease_owner = NULL, lease_until = NULL,
           -- Nothing irreversible started: what `prepare` left is released.
           discard_owed_since = CASE WHEN c.side_effect_started_at IS NULL AND c.checkpoint IS NOT NULL
                                     THEN now() ELSE c.discard_owed_since END
      FROM exhausted
     WHERE c.tool_call_id = exhausted.tool_call_id
       AND c.status = 'EXECUTING' AND c.lease_until < now() AND c.attempts >= $1
    RETURNING c
)
SELECT COALESCE(jsonb_agg(tool_call_json(changed.c)), '[]'::jsonb) FROM changed

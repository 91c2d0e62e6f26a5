-- Marks that the caller was told the outcome of tenant $2's call $1, if the call has settled and
-- no one marked it before; $3 is the request's Idempotency-Key (NULL without one). Answers the
-- call's id, its status as a reader must report it, and `first`: whether the mark is this
-- request's (this statement set it, or an earlier request with the same key did). Of any number
-- of requests with different keys, concurrent ones too, exactly one is first: the UPDATE
-- re-reads a row another has just marked and leaves it. NULL when the tenant has no such call;
-- the outer SELECT reads from nothing, so it is one row whatever matches (see rows.rs).
WITH called AS (
    SELECT c.tool_call_id, tool_call_effective_status(c.status, c.expires_at) AS status, c.outcome_told_by
      FROM tool_calls c
     WHERE c.tool_call_id = $1::text AND c.tenant_id = $2::text
), marked AS (
    UPDATE tool_calls c
       SET outcome_told_at = now(), outcome_told_by = $3::text
      FROM called
     WHERE c.tool_call_id = called.tool_call_id
       AND c.tenant_id = $2::text
       AND c.outcome_told_at IS NULL
       AND called.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
    RETURNING 1
)
SELECT (SELECT jsonb_build_object(
            'tool_call_id', called.tool_call_id,
            'status',       called.status,
            'first',        EXISTS (SELECT 1 FROM marked) OR COALESCE(called.outcome_told_by = $3::text, false))
          FROM called) AS told

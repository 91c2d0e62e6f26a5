-- The agent's view of one session, in one round trip: $1 = session_id, $2 = how many open
-- calls to list, $3 = how many settled calls to list, $4 = the cap of each count, $5 = the
-- tenant whose session it is (another tenant's session of the same id is another session).
--
-- Every part reads a bounded number of rows through its own index, so the answer's size and
-- time stay the same whether the session has ten calls or ten thousand:
--   open_calls:    open calls not past their deadline, newest first (tool_calls_open_idx);
--   settled_calls: settled calls (tool_calls_settled_idx), plus waiting calls already past
--                  their deadline, which read as EXPIRED before the sweeper rewrites them
--                  (tool_calls_waiting_session_expiry_idx);
--   pending / recent: the newest $2 and $3 of those, each turned into JSON once;
--   *_total: how many there are, counted up to $4 (a count of $4 means "$4 or more").
-- Statuses are reported through tool_call_effective_status(). Always exactly one row.
WITH open_calls AS (
    SELECT c.tool_call_id, c.created_at
      FROM tool_calls c
     WHERE c.session_id = $1 AND c.tenant_id = $5
       AND c.status IN ('PENDING', 'EXECUTING', 'PREPARED')
       -- Not past its deadline: tool_call_effective_status() of these is still open. Spelled
       -- out, the planner can tell how few rows it filters and walks the index newest first.
       AND (c.status = 'EXECUTING' OR c.expires_at > now())
     ORDER BY c.created_at DESC, c.tool_call_id DESC
     LIMIT $4
),
settled_calls AS (
    (SELECT c.tool_call_id, c.created_at
       FROM tool_calls c
      WHERE c.session_id = $1 AND c.tenant_id = $5
        AND c.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
      ORDER BY c.created_at DESC, c.tool_call_id DESC
      LIMIT $4)
    UNION ALL
    (SELECT c.tool_call_id, c.created_at
       FROM tool_calls c
      WHERE c.session_id = $1 AND c.tenant_id = $5
        AND c.status IN ('PENDING', 'PREPARED')
        AND c.expires_at <= now()
      ORDER BY c.created_at DESC, c.tool_call_id DESC
      LIMIT $4)
),
picked AS (
    (SELECT 'pending' AS list, tool_call_id FROM open_calls
      ORDER BY created_at DESC, tool_call_id DESC LIMIT $2)
    UNION ALL
    (SELECT 'recent', tool_call_id FROM settled_calls
      ORDER BY created_at DESC, tool_call_id DESC LIMIT $3)
),
calls AS (
    SELECT picked.list, c.created_at, c.tool_call_id,
           jsonb_build_object(
               'tool_call_id',   c.tool_call_id,
               'function_name',  c.function_name,
               'parameters',     c.parameters,
               'result',         c.result,
               'status',         tool_call_effective_status(c.status, c.expires_at),
               'voice_response', c.voice_response,
               'created_at',     rfc3339_utc(c.created_at),
               'expires_at',     rfc3339_utc(c.expires_at)
           ) AS call
      FROM picked JOIN tool_calls c USING (tool_call_id)
)
SELECT jsonb_build_object(
           'pending',       COALESCE((SELECT jsonb_agg(call ORDER BY created_at DESC, tool_call_id DESC)
                                        FROM calls WHERE list = 'pending'), '[]'::jsonb),
           'pending_total', (SELECT count(*) FROM open_calls),
           'recent',        COALESCE((SELECT jsonb_agg(call - 'expires_at' ORDER BY created_at DESC, tool_call_id DESC)
                                        FROM calls WHERE list = 'recent'), '[]'::jsonb),
           'recent_total',  (SELECT least(count(*), $4) FROM settled_calls)
       ) AS context

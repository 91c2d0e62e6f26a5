-- The agent's view of one session, in one round trip: $1 = session_id.
--
-- Two sets of calls are picked, each through its own index:
--   pending: open calls that have not expired (tool_calls_open_idx);
--   recent:  the 10 newest settled calls (tool_calls_session_created_idx).
-- Statuses are reported through tool_call_effective_status(), so a waiting call past
-- its deadline shows up in recent as EXPIRED even before the sweeper rewrites it.
-- Each call is turned into JSON once, and both lists come back as a single jsonb value.
SELECT jsonb_build_object(
           'pending', COALESCE(jsonb_agg(call ORDER BY created_at DESC, tool_call_id DESC)
                                   FILTER (WHERE list = 'pending'), '[]'::jsonb),
           'recent',  COALESCE(jsonb_agg(call - 'expires_at' ORDER BY created_at DESC, tool_call_id DESC)
                                   FILTER (WHERE list = 'recent'), '[]'::jsonb)
       ) AS context
FROM (
    SELECT picked.list,
           picked.created_at,
           picked.tool_call_id,
           jsonb_build_object(
               'tool_call_id',   picked.tool_call_id,
               'function_name',  picked.function_name,
               'parameters',     picked.parameters,
               'result',         picked.result,
               'status',         picked.effective_status,
               'voice_response', picked.voice_response,
               'created_at',     rfc3339_utc(picked.created_at),
               'expires_at',     rfc3339_utc(picked.expires_at)
           ) AS call
    FROM (
        (SELECT 'pending' AS list, c.tool_call_id, c.function_name, c.parameters, c.result,
                c.voice_response, c.created_at, c.expires_at,
                tool_call_effective_status(c.status, c.expires_at) AS effective_status
           FROM tool_calls c
          WHERE c.session_id = $1
            AND c.status IN ('PENDING', 'EXECUTING', 'PREPARED')
            AND tool_call_effective_status(c.status, c.expires_at) IN ('PENDING', 'EXECUTING', 'PREPARED'))
        UNION ALL
        (SELECT 'recent', c.tool_call_id, c.function_name, c.parameters, c.result,
                c.voice_response, c.created_at, c.expires_at,
                tool_call_effective_status(c.status, c.expires_at)
           FROM tool_calls c
          WHERE c.session_id = $1
            AND tool_call_effective_status(c.status, c.expires_at) IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
          ORDER BY c.created_at DESC, c.tool_call_id DESC
          LIMIT 10)
    ) AS picked
) AS calls

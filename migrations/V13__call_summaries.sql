-- A call as a list shows it: what it is (its parameters included, so a relay can find what a
-- lost create made), where it stands and since when, what it is doing, and whether it is
-- overdue, without its histories. A list of calls never carries a call's
-- parameters history or status history, so a page is a bounded size whatever its calls went
-- through; the status route answers a call in full: the summary and the rest (tool_call_json,
-- below) (docs/architecture.md, "Bounds").
CREATE FUNCTION tool_call_summary_json(c tool_calls)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'tool_call_id',      c.tool_call_id,
        'session_id',        c.session_id,
        'connection_id',     c.connection_id,
        'intent_id',         c.intent_id,
        'function_name',     c.function_name,
        'tool',              c.tool,
        'parameters',        c.parameters,
        'status',            tool_call_effective_status(c.status, c.expires_at),
        -- When the call entered its status: the last entry of its status history.
        'status_since',      c.status_history -> -1 ->> 'timestamp',
        'summary',           c.summary,
        -- What the agent said last: the outcome of a settled call.
        'voice_response',    c.voice_response,
        'error_message',     c.error_message,
        'attempts',          c.attempts,
        'corrections',       (SELECT count(*) FROM jsonb_array_elements(c.status_history) e
                               WHERE e ->> 'status' = 'MODIFIED'),
        -- What the call is waiting on or doing now; null once it is final.
        'current_operation', CASE tool_call_effective_status(c.status, c.expires_at)
                                 WHEN 'PENDING' THEN 'awaiting_confirmation'
                                 WHEN 'PREPARED' THEN 'awaiting_resume'
                                 -- Prepared (and resumed), past the point of no return, or a
                                 -- tool with nothing to prepare: the irreversible step is next.
                                 WHEN 'EXECUTING' THEN CASE
                                     WHEN c.needs_checkpoint AND c.prepared_at IS NULL
                                          AND c.side_effect_started_at IS NULL THEN 'prepare'
                                     ELSE 'execute' END
                             END,
        -- An execution whose last attempt failed is tried again once its lease ends.
        'next_retry_at',     CASE WHEN c.status = 'EXECUTING' AND c.error_message IS NOT NULL
                                  THEN rfc3339_utc(c.lease_until) END,
        -- Past the time it should have moved by: an execution whose worker's lease ran out and
        -- that the sweeper has not taken over, or a waiting call past its deadline that the
        -- sweeper has not expired. Either says the sweeper is behind or not running.
        'overdue',           (c.status = 'EXECUTING' AND c.lease_until < now())
                             OR (c.status IN ('PENDING', 'PREPARED') AND c.expires_at <= now()),
        'expires_at',        rfc3339_utc(c.expires_at),
        'created_at',        rfc3339_utc(c.created_at),
        'completed_at',      rfc3339_utc(c.completed_at)
    )
$$;

-- A call in full, as every route but the lists reports it: its summary, and its parameters,
-- histories, checkpoint and outcome. Lease owner, request fingerprint and the stored create
-- answer are internal and stay out.
CREATE OR REPLACE FUNCTION tool_call_json(c tool_calls)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT tool_call_summary_json(c) || jsonb_build_object(
        'parameters_history',     c.parameters_history,
        'status_history',         c.status_history,
        'checkpoint',             c.checkpoint,
        'result',                 c.result,
        'callback_url',           c.callback_url,
        'side_effect_started_at', rfc3339_utc(c.side_effect_started_at),
        'trace_id',               c.trace_id,
        'confirmed_at',           rfc3339_utc(c.confirmed_at),
        'prepared_at',            rfc3339_utc(c.prepared_at),
        'executed_at',            rfc3339_utc(c.executed_at),
        'execution_time_ms',      c.execution_time_ms
    )
$$;

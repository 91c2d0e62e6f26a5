-- Every tool call the agent asks for, from PENDING to its final state, with its audit trail.

CREATE TABLE tool_calls (
    tool_call_id           text        PRIMARY KEY
                                       CONSTRAINT tool_calls_id_format CHECK (tool_call_id ~ '^tc_[0-9a-f]{12}$'),
    session_id             text        NOT NULL
                                       CONSTRAINT tool_calls_session_id_length CHECK (char_length(session_id) BETWEEN 1 AND 200),
    connection_id          text,
    intent_id              text,
    function_name          text        NOT NULL,
    parameters             jsonb       NOT NULL
                                       CONSTRAINT tool_calls_parameters_object CHECK (jsonb_typeof(parameters) = 'object'),
    -- Append-only: [{timestamp, field, old_value, new_value, reason?}]
    parameters_history     jsonb       NOT NULL DEFAULT '[]'
                                       CONSTRAINT tool_calls_parameters_history_array CHECK (jsonb_typeof(parameters_history) = 'array'),
    -- MODIFIED is not listed: it only ever appears in status_history.
    status                 text        NOT NULL DEFAULT 'PENDING'
                                       CONSTRAINT tool_calls_status_known CHECK (status IN (
                                           'PENDING', 'EXECUTING', 'PREPARED',
                                           'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')),
    -- Append-only: [{status, timestamp, reason?, actor?}]
    status_history         jsonb       NOT NULL DEFAULT '[]'
                                       CONSTRAINT tool_calls_status_history_array CHECK (jsonb_typeof(status_history) = 'array'),
    -- The component that implements the tool; resolved from the registry when the call is created.
    tool                   text        NOT NULL,
    result                 jsonb,
    error_message          text,
    voice_response         text,
    callback_url           text,
    idempotency_key        text,
    expires_at             timestamptz,
    lease_until            timestamptz,
    attempts               integer     NOT NULL DEFAULT 0
                                       CONSTRAINT tool_calls_attempts_non_negative CHECK (attempts >= 0),
    side_effect_started_at timestamptz,
    trace_id               text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    confirmed_at           timestamptz,
    prepared_at            timestamptz,
    executed_at            timestamptz,
    completed_at           timestamptz,
    execution_time_ms      bigint
                                       CONSTRAINT tool_calls_execution_time_non_negative CHECK (execution_time_ms >= 0),

    -- Expiry fails closed only if every waiting call has a deadline.
    CONSTRAINT tool_calls_waiting_calls_expire
        CHECK (status NOT IN ('PENDING', 'PREPARED') OR expires_at IS NOT NULL)
);

-- Recent calls of a session, newest first.
CREATE INDEX tool_calls_session_created_idx ON tool_calls (session_id, created_at DESC);
-- Calls of a session in a given state.
CREATE INDEX tool_calls_session_status_idx ON tool_calls (session_id, status);
-- Open calls only: the agent's pending list stays cheap however long the history grows.
CREATE INDEX tool_calls_open_idx ON tool_calls (session_id, created_at DESC)
    WHERE status IN ('PENDING', 'EXECUTING', 'PREPARED');
-- A retried create with the same Idempotency-Key finds the first call.
CREATE UNIQUE INDEX tool_calls_idempotency_key_idx ON tool_calls (session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The status a reader must report. A waiting call past its deadline is EXPIRED even before
-- the sweeper rewrites the row, so a stale call is never presented as actionable.
-- This is the one definition of the rule: every query that reports a status uses it.
-- (A plain SQL function, so the planner inlines it.)
CREATE FUNCTION tool_call_effective_status(status text, expires_at timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('PENDING', 'PREPARED') AND expires_at <= now() THEN 'EXPIRED'
        ELSE status
    END
$$;

-- Timestamps leave the database as RFC 3339 UTC text, whatever the session's TimeZone.
CREATE FUNCTION rfc3339_utc(ts timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

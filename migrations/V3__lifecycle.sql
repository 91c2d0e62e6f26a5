-- What the lifecycle needs beyond the first migration's columns (docs/architecture.md, "The data
-- model"): lease ownership, the tool's checkpoint, the spoken summary, and the first answer to an
-- idempotent create.

ALTER TABLE tool_calls
    -- The token of the worker that holds the lease. Every step of a drive is conditional on it,
    -- so a worker whose lease was taken over can no longer change the call.
    ADD COLUMN lease_owner         text,
    -- What `prepare` left for `execute` and the message spoken at the checkpoint.
    ADD COLUMN checkpoint          jsonb,
    -- The tool's sentence for the current parameters ("I'll send an email to ...").
    ADD COLUMN summary             text,
    -- sha256 of the create request, so a reused Idempotency-Key with another body is refused.
    ADD COLUMN request_fingerprint text,
    -- The 201 body of the create, returned again to a retried create with the same key.
    ADD COLUMN create_response     jsonb;

-- The sweeper's two scans: waiting calls past their deadline, and executions whose lease ran out.
CREATE INDEX tool_calls_waiting_expiry_idx ON tool_calls (expires_at)
    WHERE status IN ('PENDING', 'PREPARED');
CREATE INDEX tool_calls_executing_lease_idx ON tool_calls (lease_until)
    WHERE status = 'EXECUTING';

-- One row for each operation a tool component performs: its per-tool execution history.
CREATE TABLE tool_executions (
    execution_id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool              text        NOT NULL,
    component         text        NOT NULL,
    component_version text        NOT NULL,
    operation         text        NOT NULL
                                  CONSTRAINT tool_executions_operation_known CHECK (operation IN (
                                      'describe', 'validate', 'summarize', 'prepare', 'execute', 'discard')),
    tool_call_id      text,
    started_at        timestamptz NOT NULL,
    duration_ms       double precision NOT NULL CONSTRAINT tool_executions_duration_non_negative CHECK (duration_ms >= 0),
    outcome           text        NOT NULL
                                  CONSTRAINT tool_executions_outcome_known CHECK (outcome IN ('ok', 'rejected', 'failed', 'crashed')),
    error             text
);

CREATE INDEX tool_executions_tool_started_idx ON tool_executions (tool, started_at DESC, execution_id DESC);
CREATE INDEX tool_executions_call_idx ON tool_executions (tool_call_id) WHERE tool_call_id IS NOT NULL;

-- One row per attempt to deliver a callback to the relay: their audit trail (docs/architecture.md, "Callbacks").
CREATE TABLE callback_attempts (
    attempt_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_call_id text        NOT NULL,
    kind         text        NOT NULL
                             CONSTRAINT callback_attempts_kind_known CHECK (kind IN ('progress', 'checkpoint', 'completion')),
    url          text        NOT NULL,
    attempt      integer     NOT NULL CONSTRAINT callback_attempts_attempt_positive CHECK (attempt >= 1),
    status_code  integer,
    error        text,
    duration_ms  double precision NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX callback_attempts_call_idx ON callback_attempts (tool_call_id, created_at);

-- One status_history entry, stamped by the database clock.
CREATE FUNCTION status_entry(status text, reason text, actor text)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'status', status, 'timestamp', rfc3339_utc(now()), 'reason', reason, 'actor', actor))
$$;

-- A call as every route reports it: the one definition of its public JSON. The status is the
-- effective one, so a stale waiting call never reads as actionable. Lease owner, request
-- fingerprint and the stored create answer are internal and stay out.
CREATE FUNCTION tool_call_json(c tool_calls)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'tool_call_id',           c.tool_call_id,
        'session_id',             c.session_id,
        'connection_id',          c.connection_id,
        'intent_id',              c.intent_id,
        'function_name',          c.function_name,
        'tool',                   c.tool,
        'parameters',             c.parameters,
        'parameters_history',     c.parameters_history,
        'status',                 tool_call_effective_status(c.status, c.expires_at),
        'status_history',         c.status_history,
        'summary',                c.summary,
        'checkpoint',             c.checkpoint,
        'result',                 c.result,
        'error_message',          c.error_message,
        'voice_response',         c.voice_response,
        'callback_url',           c.callback_url,
        'expires_at',             rfc3339_utc(c.expires_at),
        'attempts',               c.attempts,
        'side_effect_started_at', rfc3339_utc(c.side_effect_started_at),
        'trace_id',               c.trace_id,
        'created_at',             rfc3339_utc(c.created_at),
        'confirmed_at',           rfc3339_utc(c.confirmed_at),
        'prepared_at',            rfc3339_utc(c.prepared_at),
        'executed_at',            rfc3339_utc(c.executed_at),
        'completed_at',           rfc3339_utc(c.completed_at),
        'execution_time_ms',      c.execution_time_ms
    )
$$;

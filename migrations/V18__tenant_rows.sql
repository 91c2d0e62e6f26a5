-- Every row belongs to a tenant (docs/architecture.md, "Tenants"). A key sees only its own
-- tenant's calls, histories, callbacks, session context, executions and documents; every row
-- that exists already belongs to the first tenant, whose admin key `api_token` is.
--
-- This migration only adds: the release before it keeps serving beside it (docs/deploying.md,
-- "Upgrading"). `gatehouse migrate` adds the tenant columns (a constant DEFAULT changes only the
-- catalogue) and builds the new indexes concurrently before it runs the rest, which then finds
-- them in place. What the release before still uses (its idempotency index, its primary keys
-- on session context and documents, its history indexes) goes in the contract step V32.
--
-- The tenant columns carry no foreign key: a row's tenant comes from a key, and a key's tenant
-- exists (api_keys references tenants), so the check would cost every insert for nothing.

ALTER TABLE tenants
    -- Limits (docs/keys.md, "Limits"), NULL for none: how many waiting PENDING calls the tenant
    -- may hold at once, and how many calls it may create in any one second.
    ADD COLUMN max_pending_calls   integer CHECK (max_pending_calls > 0),
    ADD COLUMN creates_per_second  integer CHECK (creates_per_second > 0);

ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE tool_executions ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE callback_attempts ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE session_context ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL DEFAULT 'default';

-- Two tenants may use the same session id and the same Idempotency-Key: the key's first call is
-- looked up within the tenant.
CREATE UNIQUE INDEX IF NOT EXISTS tool_calls_tenant_idempotency_key_idx
    ON tool_calls (tenant_id, session_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- A tenant's call list, newest first, and its creates in the last second (the rate limit).
CREATE INDEX IF NOT EXISTS tool_calls_tenant_created_idx ON tool_calls (tenant_id, created_at DESC, tool_call_id DESC);
-- A tenant's waiting PENDING calls, counted against its limit.
CREATE INDEX IF NOT EXISTS tool_calls_tenant_pending_idx ON tool_calls (tenant_id, expires_at) WHERE status = 'PENDING';

-- A tool's history and stats are read per tenant.
CREATE INDEX IF NOT EXISTS tool_executions_tenant_tool_started_idx
    ON tool_executions (tenant_id, tool, started_at DESC, execution_id DESC);
CREATE INDEX IF NOT EXISTS tool_executions_tenant_errors_idx
    ON tool_executions (tenant_id, tool, started_at DESC, execution_id DESC) WHERE outcome IN ('failed', 'crashed');

-- A session's context is the tenant's session's, and each tenant has its own documents, with
-- ids of its own choosing: the keys the upserts name, which V32 makes the primary keys.
CREATE UNIQUE INDEX IF NOT EXISTS session_context_tenant_key_idx ON session_context (tenant_id, session_id, context_key);
CREATE UNIQUE INDEX IF NOT EXISTS documents_tenant_id_idx ON documents (tenant_id, id);

-- One status_history entry, stamped by the database clock, naming the key that made the change
-- (its prefix, or `api_token`; none for Gatehouse's own transitions).
CREATE FUNCTION status_entry(status text, reason text, actor text, key text)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'status', status, 'timestamp', rfc3339_utc(now()), 'reason', reason, 'actor', actor, 'key', key))
$$;

-- A call as every route reports it names its tenant, which the executor hands to the tool.
CREATE OR REPLACE FUNCTION tool_call_json(c tool_calls)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT tool_call_summary_json(c) || jsonb_build_object(
        'tenant',                 c.tenant_id,
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

-- Which of the tenant's limits a create would pass, or NULL (docs/keys.md, "Limits"):
-- `rate_limited` when it created `creates_per_second` calls in the last second, `tenant_full`
-- when it holds `max_pending_calls` waiting PENDING calls. A tenant with limits has its creates
-- take turns on an advisory lock held to their commit, and each statement here reads the rows
-- committed before its turn (a volatile function takes a new snapshot per statement): without
-- it, concurrent creates would all count the same rows and a burst would pass the limit. Each
-- count stops at the limit, through an index. A tenant without limits takes no lock and counts
-- nothing.
CREATE FUNCTION tenant_limit_met(tenant text)
RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    per_second integer;
    max_pending integer;
BEGIN
    SELECT t.creates_per_second, t.max_pending_calls INTO per_second, max_pending FROM tenants t WHERE t.id = tenant;
    IF per_second IS NULL AND max_pending IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('gatehouse.tenant_limits:' || tenant, 0));
    IF per_second IS NOT NULL AND (
        SELECT count(*) FROM (SELECT 1 FROM tool_calls o
                               WHERE o.tenant_id = tenant AND o.created_at > clock_timestamp() - interval '1 second'
                               LIMIT per_second) AS recent) >= per_second THEN
        RETURN 'rate_limited';
    END IF;
    IF max_pending IS NOT NULL AND (
        SELECT count(*) FROM (SELECT 1 FROM tool_calls o
                               WHERE o.tenant_id = tenant AND o.status = 'PENDING' AND o.expires_at > now()
                               LIMIT max_pending) AS open) >= max_pending THEN
        RETURN 'tenant_full';
    END IF;
    RETURN NULL;
END
$$;

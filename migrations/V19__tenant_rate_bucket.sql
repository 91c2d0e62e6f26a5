-- A tenant's creates per second as a rate bucket (the generic cell rate algorithm) instead of a
-- count of the last second's calls (docs/keys.md, "Limits"; docs/architecture.md, "Tenants").
--
-- `create_tat` is when the tenant's bucket is next empty: each admitted create moves it 1/N s
-- later (from now, if it lies in the past), and a create is refused while it lies more than one
-- second ahead, so a tenant allowed N a second may send N at once and then one every 1/N s.
-- Deciding reads one row instead of counting up to N of the tenant's recent calls, and a
-- refusal can be decided without a lock and without writing (`tenant_limit_now`), so a
-- tenant hammering the create route costs the database one indexed row read a request.

ALTER TABLE tenants ADD COLUMN IF NOT EXISTS create_tat timestamptz;

-- Whether the tenant holds `max_pending` waiting PENDING calls over all its sessions: counted
-- up to the limit only, through an index, so a full tenant costs no more than a busy one.
CREATE FUNCTION tenant_pending_reaches(tenant text, max_pending integer)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT count(*) >= max_pending
      FROM (SELECT 1 FROM tool_calls o
             WHERE o.tenant_id = tenant AND o.status = 'PENDING' AND o.expires_at > now()
             LIMIT max_pending) AS open
$$;

-- The create's check, inside its insert statement: exact under concurrency, because a
-- limited tenant's creates take turns on its row's lock, held to their commit, and each counts
-- what the others committed. An admitted create moves the bucket; a refused one changes
-- nothing.
CREATE OR REPLACE FUNCTION tenant_limit_met(tenant text)
RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    per_second integer;
    max_pending integer;
    next_tat timestamptz;
    at_now timestamptz;
BEGIN
    SELECT t.creates_per_second, t.max_pending_calls INTO per_second, max_pending FROM tenants t WHERE t.id = tenant;
    IF per_second IS NULL AND max_pending IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT t.create_tat INTO next_tat FROM tenants t WHERE t.id = tenant FOR NO KEY UPDATE;
    at_now := clock_timestamp();
    IF per_second IS NOT NULL THEN
        next_tat := greatest(next_tat, at_now) + interval '1 second' / per_second;
        IF next_tat > at_now + interval '1 second' THEN
            RETURN 'rate_limited';
        END IF;
    END IF;
    IF max_pending IS NOT NULL AND tenant_pending_reaches(tenant, max_pending) THEN
        RETURN 'tenant_full';
    END IF;
    IF per_second IS NOT NULL THEN
        UPDATE tenants SET create_tat = next_tat WHERE id = tenant;
    END IF;
    RETURN NULL;
END
$$;

-- The check before a create asks its tool to validate: the same answer, read without a lock
-- and without moving the bucket. The insert's `tenant_limit_met` is the one that holds.
CREATE FUNCTION tenant_limit_now(tenant text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
             WHEN t.creates_per_second IS NOT NULL
                  AND t.create_tat > clock_timestamp() + interval '1 second' - interval '1 second' / t.creates_per_second
               THEN 'rate_limited'
             WHEN t.max_pending_calls IS NOT NULL AND tenant_pending_reaches(tenant, t.max_pending_calls)
               THEN 'tenant_full'
           END
      FROM tenants t
     WHERE t.id = tenant
$$;

-- Contract step (a migration whose name starts with `contract_`): it removes what the releases
-- before V18 and V27 still use, so `gatehouse migrate` applies it only when told that no runner
-- of such a release serves any more, with `--contract`, or on a database that had no
-- migrations yet (docs/deploying.md, "Upgrading"). This release works before and after it.
--
-- A database that applied V18 and V27 before they were made add-only has none of this left:
-- every statement finds nothing to do there.

-- The idempotency key was unique per session; it is unique per tenant's session (V18).
DROP INDEX IF EXISTS tool_calls_idempotency_key_idx;

-- A tool's history is read per tenant (V18). The indexes without the tenant stayed on the rows
-- from before the history was partitioned (V24 renamed them with their table).
DROP INDEX IF EXISTS tool_executions_tool_started_idx;
DROP INDEX IF EXISTS tool_executions_errors_idx;
DROP INDEX IF EXISTS tool_executions_earlier_tool_started_idx;
DROP INDEX IF EXISTS tool_executions_earlier_errors_idx;

-- The searches order by the embedding at half precision (V27); V4's graph is no longer read.
DROP INDEX IF EXISTS documents_embedding_hnsw_idx;

-- Session context and documents are keyed by tenant: the unique indexes V18 built become the
-- primary keys, which takes only a moment's lock (the index is already there).
DO $$
BEGIN
    IF to_regclass('session_context_tenant_key_idx') IS NOT NULL THEN
        ALTER TABLE session_context DROP CONSTRAINT session_context_pkey,
            ADD CONSTRAINT session_context_pkey PRIMARY KEY USING INDEX session_context_tenant_key_idx;
    END IF;
    IF to_regclass('documents_tenant_id_idx') IS NOT NULL THEN
        ALTER TABLE documents DROP CONSTRAINT documents_pkey,
            ADD CONSTRAINT documents_pkey PRIMARY KEY USING INDEX documents_tenant_id_idx;
    END IF;
END
$$;

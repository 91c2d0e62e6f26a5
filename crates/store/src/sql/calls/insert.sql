-- Create a PENDING call, or find the first call made with the same Idempotency-Key.
-- $1 id, $2 session, $3 connection, $4 intent, $5 function_name, $6 tool, $7 parameters,
-- $8 summary, $9 callback_url, $10 idempotency_key, $11 fingerprint, $12 trace_id, $13 ttl s,
-- $14 whether the tool stops at a checkpoint; $15-$24 the tool's `validate` history row, as
-- record.sql takes it, or all NULL when the tool wrote it itself; $25 how many waiting PENDING
-- calls one session may hold; $26 the tenant, $27 the key creating it.
--
-- Limits (docs/keys.md, "Limits"): a create past one inserts nothing and answers which one it
-- met: the session's waiting PENDING calls ($25; counted up to the cap only, so a full session
-- costs no more than a busy one, and concurrent creates may pass it by a few, as each counts
-- before the others commit), then the tenant's (`tenant_limit_met`, migrations V18 and V19, exact).
-- The 201 body is built here, with the database's deadline, and stored for retries.
-- The history row is written with the call, in one statement and one commit, unless the
-- statement found neither its own insert nor a first call with the key (a concurrent create's
-- call not yet visible): the create then runs it again, and the row is written once.
WITH session AS (
    SELECT (SELECT count(*) FROM (SELECT 1 FROM tool_calls o
                                   WHERE o.session_id = $2 AND o.tenant_id = $26
                                     AND o.status = 'PENDING' AND o.expires_at > now()
                                   LIMIT $25::int8) AS open) >= $25::int8 AS full
), limits AS (
    -- A create the session refuses does not use the tenant's rate.
    SELECT s.full AS session_full, CASE WHEN s.full THEN NULL ELSE tenant_limit_met($26) END AS tenant_limit
      FROM session s
), inserted AS (
    INSERT INTO tool_calls (tool_call_id, session_id, connection_id, intent_id, function_name, tool,
                            parameters, summary, callback_url, idempotency_key, request_fingerprint,
                            trace_id, needs_checkpoint, status, status_history, expires_at, create_response,
                            tenant_id)
    SELECT $1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $14, 'PENDING',
           jsonb_build_array(status_entry('PENDING', NULL, 'relay', $27)), deadline,
           jsonb_build_object(
               'tool_call_id', $1::text, 'status', 'PENDING', 'function_name', $5::text,
               'parameters', $7::jsonb, 'message', $8::text,
               'actions_available', jsonb_build_array('confirm', 'modify', 'cancel'),
               'expires_at', rfc3339_utc(deadline)),
           $26
      FROM (SELECT now() + make_interval(secs => $13::float8) AS deadline) AS d
     WHERE NOT (SELECT l.session_full OR l.tenant_limit IS NOT NULL FROM limits l)
    ON CONFLICT (tenant_id, session_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING create_response
), first_call AS (
    -- The first call made with the same key, when this statement can see it.
    SELECT c.request_fingerprint, c.create_response
      FROM tool_calls c
     WHERE $10::text IS NOT NULL AND c.tenant_id = $26 AND c.session_id = $2 AND c.idempotency_key = $10
), validated AS (
    INSERT INTO tool_executions (tool, component, component_version, operation, tool_call_id,
                                 started_at, duration_ms, outcome, error, trace_id, tenant_id)
    SELECT $15, $16, COALESCE($17, 'unknown'), $18, $19, to_timestamp($20), $21, $22, $23, $24, $26
     WHERE $15::text IS NOT NULL
       AND (EXISTS (SELECT 1 FROM inserted) OR EXISTS (SELECT 1 FROM first_call))
)
SELECT (SELECT create_response FROM inserted) AS created,
       (SELECT jsonb_build_object('fingerprint', f.request_fingerprint, 'response', f.create_response)
          FROM first_call f
         WHERE NOT EXISTS (SELECT 1 FROM inserted)) AS existing,
       (SELECT to_jsonb(CASE WHEN l.session_full THEN 'session_full' ELSE l.tenant_limit END)
          FROM limits l) AS limit_met

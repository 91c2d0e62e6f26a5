-- The data-scale benchmark's calls (docs/benchmarks.md, "At scale"): calls $1 to $1 + $2 - 1 of
-- the fixture tool ($5, its component $6), $3 to a session, the sessions spread over the $4
-- seconds before an hour ago, all the first tenant's. Every call is final, in a platform's mix
-- of outcomes (72% COMPLETED, 12% CANCELLED, 10% EXPIRED, 6% FAILED), and a third were corrected
-- once. Each has the executions its path ran (validate at its create; prepare, and execute when
-- it went on) and, when it ran, its checkpoint and completion callbacks. Ids are `tc_5eed` and
-- eight hex digits, which no call Gatehouse makes has; sessions are `seed-N`.
WITH numbered AS (
    SELECT n, 'tc_5eed' || lpad(to_hex(n), 8, '0') AS id, 'seed-' || (n / $3::int8) AS session_id,
           now() - interval '1 hour'
             - make_interval(secs => $4::float8 * (((n / $3::int8) * 2654435761) % 1000003) / 1000003.0)
             + make_interval(secs => 20 * (n % $3::int8)) AS t,
           CASE WHEN (n * 7919) % 100 < 72 THEN 'COMPLETED'
                WHEN (n * 7919) % 100 < 84 THEN 'CANCELLED'
                WHEN (n * 7919) % 100 < 94 THEN 'EXPIRED'
                ELSE 'FAILED' END AS status,
           n % 3 = 0 AS corrected,
           (20 + (n * 31) % 400)::float8 AS execute_ms
      FROM generate_series($1::int8, $1::int8 + $2::int8 - 1) AS n
), shaped AS (
    SELECT s.*, s.status IN ('COMPLETED', 'FAILED') AS ran,
           jsonb_build_object('to', 'seed' || s.n || '@example.com', 'subject', 'Seed ' || s.n) AS parameters,
           jsonb_build_array(jsonb_build_object('status', 'PENDING', 'timestamp', rfc3339_utc(s.t), 'actor', 'relay', 'key', 'api_token'))
           || CASE WHEN s.corrected THEN jsonb_build_array(jsonb_build_object(
                  'status', 'MODIFIED', 'timestamp', rfc3339_utc(s.t + interval '5 s'), 'actor', 'relay', 'key', 'api_token'))
                   ELSE '[]'::jsonb END
           || CASE s.status
                WHEN 'COMPLETED' THEN jsonb_build_array(
                    jsonb_build_object('status', 'EXECUTING', 'timestamp', rfc3339_utc(s.t + interval '10 s'), 'actor', 'confirm', 'key', 'api_token'),
                    jsonb_build_object('status', 'PREPARED', 'timestamp', rfc3339_utc(s.t + interval '11 s'), 'actor', 'executor'),
                    jsonb_build_object('status', 'EXECUTING', 'timestamp', rfc3339_utc(s.t + interval '15 s'), 'actor', 'resume', 'reason', 'proceed', 'key', 'api_token'),
                    jsonb_build_object('status', 'COMPLETED', 'timestamp', rfc3339_utc(s.t + interval '16 s'), 'actor', 'executor'))
                WHEN 'FAILED' THEN jsonb_build_array(
                    jsonb_build_object('status', 'EXECUTING', 'timestamp', rfc3339_utc(s.t + interval '10 s'), 'actor', 'confirm', 'key', 'api_token'),
                    jsonb_build_object('status', 'FAILED', 'timestamp', rfc3339_utc(s.t + interval '12 s'), 'actor', 'executor'))
                WHEN 'CANCELLED' THEN jsonb_build_array(
                    jsonb_build_object('status', 'CANCELLED', 'timestamp', rfc3339_utc(s.t + interval '10 s'), 'actor', 'relay', 'key', 'api_token'))
                ELSE jsonb_build_array(
                    jsonb_build_object('status', 'EXPIRED', 'timestamp', rfc3339_utc(s.t + interval '300 s'), 'actor', 'sweeper'))
              END AS status_history
      FROM numbered s
), calls AS (
    INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, parameters_history, status,
                            status_history, result, error_message, voice_response, callback_url, expires_at,
                            attempts, trace_id, created_at, confirmed_at, prepared_at, executed_at, completed_at,
                            execution_time_ms, summary, request_fingerprint, needs_checkpoint, tenant_id)
    SELECT s.id, s.session_id, $5, $6, s.parameters,
           CASE WHEN s.corrected THEN jsonb_build_array(jsonb_build_object(
                    'field', 'to', 'old_value', 'seed@example.com', 'new_value', 'seed' || s.n || '@example.com',
                    'timestamp', rfc3339_utc(s.t + interval '5 s')))
                ELSE '[]'::jsonb END,
           s.status, s.status_history,
           CASE WHEN s.status = 'COMPLETED' THEN jsonb_build_object('sent', true, 'message_id', md5(s.id)) END,
           CASE WHEN s.status = 'FAILED' THEN 'The provider refused the message.' END,
           CASE s.status WHEN 'COMPLETED' THEN 'Sent.' WHEN 'FAILED' THEN 'I could not send it.' END,
           'http://127.0.0.1:3001/callbacks', s.t + interval '5 minutes',
           CASE WHEN s.ran THEN 1 ELSE 0 END, md5(s.id), s.t,
           CASE WHEN s.ran THEN s.t + interval '10 s' END,
           CASE WHEN s.status = 'COMPLETED' THEN s.t + interval '11 s' END,
           CASE WHEN s.status = 'COMPLETED' THEN s.t + interval '15 s' END,
           CASE WHEN s.ran THEN s.t + interval '16 s' END,
           CASE WHEN s.status = 'COMPLETED' THEN s.execute_ms::int8 END,
           'I''ll send a message to seed' || s.n || '@example.com about ''Seed ' || s.n || '''. Confirm to proceed.',
           md5(s.parameters::text), true, 'default'
      FROM shaped s
    RETURNING 1
), executions AS (
    INSERT INTO tool_executions (tool, component, component_version, operation, tool_call_id, started_at,
                                 duration_ms, outcome, error, trace_id, tenant_id)
    SELECT $5, $6, 'seed', e.operation, s.id, s.t + e.after, e.duration_ms, e.outcome, e.error, md5(s.id), 'default'
      FROM shaped s
     CROSS JOIN LATERAL (VALUES
         ('validate', interval '0 s', 0.4::float8, 'ok', NULL::text, true),
         ('prepare', interval '10 s', 2.0::float8, CASE WHEN s.status = 'FAILED' THEN 'failed' ELSE 'ok' END,
          CASE WHEN s.status = 'FAILED' THEN 'The provider refused the message.' END, s.ran),
         ('execute', interval '15 s', s.execute_ms, 'ok', NULL::text, s.status = 'COMPLETED')
     ) AS e(operation, after, duration_ms, outcome, error, ran)
     WHERE e.ran
    RETURNING 1
), callbacks AS (
    INSERT INTO callback_attempts (tool_call_id, kind, url, attempt, status_code, duration_ms, created_at, tenant_id)
    SELECT s.id, k.kind, 'http://127.0.0.1:3001/callbacks', 1, 200, 2.5, s.t + k.after, 'default'
      FROM shaped s
     CROSS JOIN LATERAL (VALUES ('checkpoint', interval '11 s', s.status = 'COMPLETED'),
                                ('completion', interval '16 s', s.ran)) AS k(kind, after, sent)
     WHERE k.sent
    RETURNING 1
)
SELECT (SELECT count(*) FROM calls) AS calls,
       (SELECT count(*) FROM executions) AS executions,
       (SELECT count(*) FROM callbacks) AS callbacks

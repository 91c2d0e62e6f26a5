-- The sweeper's backlog (docs/benchmarks.md, "At scale"): calls $1 to $1 + $2 - 1 of the
-- fixture tool ($3, its component $4), waiting PENDING in sessions of ten, made ten minutes
-- before their deadline, which all reach together $5 seconds from now (as after an outage of
-- every sweeper). Ids are `tc_5eef` and eight hex digits; sessions are `backlog-N`. Their
-- callback URL is $6, or none: then expiring them sends nothing.
WITH numbered AS (
    SELECT n, 'tc_5eef' || lpad(to_hex(n), 8, '0') AS id, 'backlog-' || (n / 10) AS session_id,
           now() + make_interval(secs => $5::float8) - interval '10 minutes' AS t,
           jsonb_build_object('to', 'backlog' || n || '@example.com', 'subject', 'Backlog ' || n) AS parameters
      FROM generate_series($1::int8, $1::int8 + $2::int8 - 1) AS n
), calls AS (
    INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, parameters_history, status,
                            status_history, voice_response, expires_at, attempts, trace_id, created_at, summary,
                            request_fingerprint, needs_checkpoint, tenant_id, callback_url)
    SELECT s.id, s.session_id, $3, $4, s.parameters, '[]'::jsonb, 'PENDING',
           jsonb_build_array(jsonb_build_object('status', 'PENDING', 'timestamp', rfc3339_utc(s.t), 'actor', 'relay',
                                                'key', 'api_token')),
           NULL, s.t + interval '10 minutes', 0, md5(s.id), s.t,
           'I''ll send a message to backlog' || s.n || '@example.com. Confirm to proceed.',
           md5(s.parameters::text), true, 'default', $6::text
      FROM numbered s
    RETURNING 1
)
SELECT count(*) AS calls FROM calls

-- Takes over executions whose worker is gone (lease ran out) and that have attempts left.
-- $1 lease seconds, $2 max attempts, $3 batch size. Each gets a fresh lease owner, so the
-- old worker, if it is only slow, can no longer change the call.
WITH stranded AS (
    SELECT tool_call_id FROM tool_calls
     WHERE status = 'EXECUTING' AND lease_until < now() AND attempts < $2
     ORDER BY lease_until
     LIMIT $3
       FOR UPDATE SKIP LOCKED
),
changed AS (
    UPDATE tool_calls c
       SET attempts = c.attempts + 1,
           lease_owner = md5(random()::text || clock_timestamp()::text || c.tool_call_id),
           lease_until = now() + make_interval(secs => $1::float8)
      FROM stranded
     WHERE c.tool_call_id = stranded.tool_call_id
       AND c.status = 'EXECUTING' AND c.lease_until < now() AND c.attempts < $2
    RETURNING c.tool_call_id, c.lease_owner, c.trace_id
)
SELECT COALESCE(jsonb_agg(jsonb_build_object('tool_call_id', tool_call_id, 'lease_owner', lease_owner,
                                             'trace_id', trace_id)), '[]'::jsonb)
  FROM changed

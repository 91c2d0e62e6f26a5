-- The worker gives up its lease after a tool crash, so the sweeper re-drives the call once the
-- back-off has passed: $4 seconds after the first attempt, doubling with each attempt, so a
-- tool host that is restarting has time to come back before the attempts run out. After the
-- last attempt there is nothing to wait for: the sweeper fails the call at once.
-- $1 id, $2 lease owner, $3 what went wrong, $4 back-off seconds, $5 max attempts.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET lease_until = now() + CASE WHEN c.attempts < $5
                                      THEN make_interval(secs => $4::float8 * 2 ^ (c.attempts - 1))
                                      ELSE interval '0' END,
           error_message = $3
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

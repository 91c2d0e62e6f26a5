-- The point of no return: from here a cancel is refused. Racing a cancel, exactly one wins.
-- $1 id, $2 lease owner, $3 lease seconds: the lease is renewed for the execute step. A re-drive finds side_effect_started_at already set in before.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET side_effect_started_at = COALESCE(c.side_effect_started_at, now()),
           executed_at = COALESCE(c.executed_at, now()),
           lease_until = now() + make_interval(secs => $3::float8)
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

-- The worker gives up its lease after a tool crash, so the sweeper re-drives the call at once.
-- $1 id, $2 lease owner, $3 what went wrong.
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
changed AS (
    UPDATE tool_calls c
       SET lease_until = now(), error_message = $3
     WHERE c.tool_call_id = $1
       AND c.status = 'EXECUTING' AND c.lease_owner = $2
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(changed.c) FROM changed) AS after

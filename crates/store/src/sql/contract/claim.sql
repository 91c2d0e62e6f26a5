-- A tool claims `prepare` or `execute` of a call for its current attempt, before it acts.
-- $1 id, $2 'prepare' or 'execute', $3 the attempt the request is for.
-- `prepare`: the call is EXECUTING, not yet prepared, no side effect started.
-- `execute`: the call is EXECUTING past its point of no return (begin_side_effect).
-- Either way the attempt is the call's own and the operation was not claimed for it before.
-- Answers the call before and after (after is NULL when the claim was refused) and whether
-- `execute` was claimed by an earlier attempt (its side effect may have started).
WITH before AS (SELECT c FROM tool_calls c WHERE c.tool_call_id = $1),
claimed AS (
    UPDATE tool_calls c
       SET prepare_claimed_attempt = CASE WHEN $2 = 'prepare' THEN c.attempts ELSE c.prepare_claimed_attempt END,
           execute_claimed_attempt = CASE WHEN $2 = 'execute' THEN c.attempts ELSE c.execute_claimed_attempt END
     WHERE c.tool_call_id = $1 AND c.status = 'EXECUTING' AND c.attempts = $3::int4
       AND (($2 = 'prepare' AND c.prepared_at IS NULL AND c.side_effect_started_at IS NULL
                            AND c.prepare_claimed_attempt IS DISTINCT FROM c.attempts)
         OR ($2 = 'execute' AND c.side_effect_started_at IS NOT NULL
                            AND c.execute_claimed_attempt IS DISTINCT FROM c.attempts))
    RETURNING c
)
SELECT (SELECT tool_call_json(before.c) FROM before) AS before,
       (SELECT tool_call_json(claimed.c) FROM claimed) AS after,
       (SELECT to_jsonb((before.c).execute_claimed_attempt IS NOT NULL) FROM before) AS execute_claimed_before

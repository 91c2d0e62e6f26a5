-- Forgets at most $1 records of SDK tools' calls (migrations/V16__tool_sdk_calls.sql) untouched
-- for $2 seconds, oldest first: long after their calls settled. Answers how many.
WITH old AS (
    SELECT tool, tool_call_id FROM tool_sdk_calls
    WHERE updated_at < now() - make_interval(secs => ($2::bigint)::float8)
    ORDER BY updated_at LIMIT $1
),
forgotten AS (
    DELETE FROM tool_sdk_calls c USING old WHERE c.tool = old.tool AND c.tool_call_id = old.tool_call_id RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten

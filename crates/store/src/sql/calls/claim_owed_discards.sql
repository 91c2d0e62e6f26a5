-- Discards owed for longer than a worker's lease ($1 seconds), by calls that have had fewer
-- than $2 tries: each is claimed by stamping it again and counting the try, so another sweeper
-- leaves it alone for as long. $3 batch size.
WITH owed AS (
    SELECT tool_call_id FROM tool_calls
     WHERE discard_owed_since < now() - make_interval(secs => $1::float8)
       AND discard_attempts < $2::int4
     ORDER BY discard_owed_since
     LIMIT $3
       FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE tool_calls c
       SET discard_owed_since = now(), discard_attempts = c.discard_attempts + 1
      FROM owed
     WHERE c.tool_call_id = owed.tool_call_id
       AND c.discard_owed_since < now() - make_interval(secs => $1::float8)
    RETURNING c
)
SELECT COALESCE(jsonb_agg(tool_call_json(claimed.c)), '[]'::jsonb) FROM claimed

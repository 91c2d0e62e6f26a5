-- Reports a worker owed the relay and never delivered (it died first): owed for longer than a
-- worker's lease ($1 seconds). Each is claimed by stamping it again, so another sweeper leaves
-- it alone for as long, and takes it up if this one dies too. A waiting call past its deadline
-- is left to the expiry, which owes its own report. $2 batch size.
WITH owed AS (
    SELECT tool_call_id FROM tool_calls
     WHERE report_owed_since < now() - make_interval(secs => $1::float8)
       AND NOT (status IN ('PENDING', 'PREPARED') AND expires_at <= now())
     ORDER BY report_owed_since
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE tool_calls c
       SET report_owed_since = now()
      FROM owed
     WHERE c.tool_call_id = owed.tool_call_id
       AND c.report_owed_since < now() - make_interval(secs => $1::float8)
    RETURNING c
)
SELECT COALESCE(jsonb_agg(tool_call_json(claimed.c)), '[]'::jsonb) FROM claimed

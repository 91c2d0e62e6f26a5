-- planned each time
-- One page of calls, newest first, by keyset: $1 session_id or NULL, $2 function_name or NULL,
-- $3 status or NULL (the effective status, so a stale waiting call is listed as EXPIRED, as
-- every route reports it), $4/$5 the cursor (created_at in microseconds since the epoch,
-- tool_call_id) of the last row already seen or NULL, $6 the page size, $7 the tenant whose calls
-- they are. One row more than a page is read, to know whether another page follows.
--
-- Planned for its values each time: the filters left NULL fold away, and what remains is the
-- equality prefix of one of the tenant's list indexes (V30), which yields the calls in the
-- list's order, so a page reads about a page of rows even when nothing matches
-- (docs/architecture.md, "Listing calls"). The status filter is on the stored status; a waiting
-- call past its deadline is left out of its waiting status and comes, when EXPIRED is asked
-- for, from the second branch: the few waiting calls the sweeper has not expired yet.
WITH filtered AS (
    SELECT c.created_at, c.tool_call_id, c
      FROM tool_calls c
     WHERE c.tenant_id = $7::text
       AND ($1::text IS NULL OR c.session_id = $1::text)
       AND ($2::text IS NULL OR c.function_name = $2::text)
       AND ($3::text IS NULL OR c.status = $3::text)
       AND NOT (COALESCE($3::text IN ('PENDING', 'PREPARED'), false) AND c.expires_at <= now())
       AND ($4::int8 IS NULL
            OR (c.created_at, c.tool_call_id) < (to_timestamp(0) + $4::int8 * interval '1 microsecond', $5::text))
     ORDER BY c.created_at DESC, c.tool_call_id DESC
     LIMIT $6::int8 + 1
), overdue AS (
    SELECT c.created_at, c.tool_call_id, c
      FROM tool_calls c
     WHERE $3::text = 'EXPIRED'
       AND c.tenant_id = $7::text
       AND c.status IN ('PENDING', 'PREPARED') AND c.expires_at <= now()
       AND ($1::text IS NULL OR c.session_id = $1::text)
       AND ($2::text IS NULL OR c.function_name = $2::text)
       AND ($4::int8 IS NULL
            OR (c.created_at, c.tool_call_id) < (to_timestamp(0) + $4::int8 * interval '1 microsecond', $5::text))
     ORDER BY c.created_at DESC, c.tool_call_id DESC
     LIMIT $6::int8 + 1
), page AS (
    SELECT u.created_at, u.tool_call_id, tool_call_summary_json(u.c) AS call
      FROM (SELECT * FROM filtered UNION ALL SELECT * FROM overdue) u
     ORDER BY u.created_at DESC, u.tool_call_id DESC
     LIMIT $6::int8 + 1
), shown AS (
    SELECT * FROM page ORDER BY created_at DESC, tool_call_id DESC LIMIT $6::int8
)
SELECT jsonb_build_object(
    'calls', COALESCE((SELECT jsonb_agg(s.call ORDER BY s.created_at DESC, s.tool_call_id DESC) FROM shown s),
                      '[]'::jsonb),
    'next_cursor', CASE WHEN (SELECT count(*) FROM page) > $6::int8 THEN (
        SELECT (extract(epoch FROM s.created_at) * 1000000)::int8 || '_' || s.tool_call_id
          FROM shown s ORDER BY s.created_at, s.tool_call_id LIMIT 1) END)

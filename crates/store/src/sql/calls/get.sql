-- One call, as routes report it, or NULL when no call has this id. $1 id.
-- A scalar subquery, so the answer is one row even for an unknown id (see rows.rs).
SELECT (SELECT tool_call_json(c) FROM tool_calls c WHERE c.tool_call_id = $1) AS call

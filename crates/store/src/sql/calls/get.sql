-- One call, as routes report it, or NULL when no call has this id. $1 id, $2 the tenant whose
-- call it must be, or NULL for Gatehouse's own paths (docs/architecture.md, "Tenants").
-- A scalar subquery, so the answer is one row even for an unknown id (see rows.rs).
SELECT (SELECT tool_call_json(c) FROM tool_calls c WHERE c.tool_call_id = $1 AND ($2::text IS NULL OR c.tenant_id = $2::text)) AS call

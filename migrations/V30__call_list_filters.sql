-- Every filter of a tenant's call list (`GET /voice-tools/calls`, the dashboard) is served by an
-- index that yields its calls in the list's order, so a page reads about a page of rows
-- whatever the table holds, including when nothing matches (docs/architecture.md, "Listing
-- calls"). A session's calls come from the session's own indexes; the tenant's, unfiltered,
-- from tool_calls_tenant_created_idx (V18).
--
-- `gatehouse migrate` builds each of them with CREATE INDEX CONCURRENTLY before this migration
-- runs, so the running release's reads and writes go on meanwhile; the migration then finds
-- them in place (docs/deploying.md, "Upgrading").
CREATE INDEX IF NOT EXISTS tool_calls_tenant_status_created_idx
    ON tool_calls (tenant_id, status, created_at DESC, tool_call_id DESC);
CREATE INDEX IF NOT EXISTS tool_calls_tenant_function_created_idx
    ON tool_calls (tenant_id, function_name, created_at DESC, tool_call_id DESC);
CREATE INDEX IF NOT EXISTS tool_calls_tenant_function_status_created_idx
    ON tool_calls (tenant_id, function_name, status, created_at DESC, tool_call_id DESC);

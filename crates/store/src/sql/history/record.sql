-- One tool execution. $3 is the component's version; when someone else writes the row on the
-- tool's behalf (it crashed, or a cancel stopped it first) it is NULL, and the version the
-- component last reported is used. $11 is the tenant the work was for; NULL takes the call's
-- tenant, and a row with no call (a `describe`) is the deployment's own: the first tenant's. An audit row: it commits without waiting for the disk
-- (asynchronous_commit(), migration V12).
INSERT INTO tool_executions (tool, component, component_version, operation, tool_call_id,
                             started_at, duration_ms, outcome, error, trace_id, tenant_id)
SELECT $1, $2,
       COALESCE($3, (SELECT e.component_version FROM tool_executions e
                      WHERE e.component = $2 AND e.outcome <> 'crashed'
                      ORDER BY e.execution_id DESC LIMIT 1), 'unknown'),
       $4, $5, to_timestamp($6), $7, $8, $9, $10, COALESCE($11, (SELECT c.tenant_id FROM tool_calls c WHERE c.tool_call_id = $5), 'default')
 WHERE asynchronous_commit()

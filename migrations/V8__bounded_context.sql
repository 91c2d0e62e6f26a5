-- The context route answers with the newest calls of a session and counts (capped) beside
-- them. These indexes let it read only those rows, however many calls the session holds: each
-- is in the exact order of the route's ORDER BY (newest first, the id breaking ties), so a
-- LIMIT stops after the rows it needs.

-- Open calls of a session, newest first (replaces V1's index without the tie-breaker).
DROP INDEX tool_calls_open_idx;
CREATE INDEX tool_calls_open_idx ON tool_calls (session_id, created_at DESC, tool_call_id DESC)
    WHERE status IN ('PENDING', 'EXECUTING', 'PREPARED');

-- Settled calls of a session, newest first: the `recent` list no longer walks past every
-- open call to find them.
CREATE INDEX tool_calls_settled_idx ON tool_calls (session_id, created_at DESC, tool_call_id DESC)
    WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED');

-- Waiting calls of a session by deadline: those past it read as EXPIRED before the sweeper
-- rewrites them, and are found without reading the session's live ones.
CREATE INDEX tool_calls_waiting_session_expiry_idx ON tool_calls (session_id, expires_at)
    WHERE status IN ('PENDING', 'PREPARED');

-- Asynchronous commit (synchronous_commit = off) for one transaction, for the writes whose loss
-- in a crash of the database server is harmless or repaired. A statement that calls it in its
-- WHERE clause commits without waiting for its WAL to reach the disk: the WAL writer flushes it
-- within wal_writer_delay (200 ms; at most three times that when busy), and any later
-- synchronous commit flushes it first, since the WAL is one sequence. A server crash in that
-- window can lose the write; it cannot corrupt anything, nor keep a write while losing one made
-- before it.
--
-- Who may use it, and why the loss is acceptable:
-- - a tool's history row and a callback's attempt row: an audit trail, of which a server crash
--   may lose the last fraction of a second;
-- - the mark that a report has been tried: if it is lost, the sweeper sends the report once
--   more, which a relay takes as the same report;
-- - the session context a tool's `execute` stores: the lifecycle's completion of the call, a
--   synchronous commit made after it, puts it on disk first; a call that never completes is
--   run again.
-- Never a transition of tool_calls: a state the API has answered must be on disk.
--
-- The setting is local to the transaction (set_config's third argument), so it leaves nothing
-- behind on a pooled connection, nor through a transaction-pooling proxy.
CREATE FUNCTION asynchronous_commit() RETURNS boolean
LANGUAGE sql VOLATILE
AS $$ SELECT set_config('synchronous_commit', 'off', true) = 'off' $$;

-- The stats' inbox (migration V20) is a queue: every execution is inserted, and the sweeper
-- deletes it again within seconds. After a backlog (a sweeper stopped, or the backfill of a
-- populated database) millions of deleted rows sit in it until vacuum removes them, and until
-- then the stats statement's read of the inbox scanned them all: 727 ms a request after
-- 22 million executions had gone through it, 14 ms once vacuumed (docs/benchmarks.md).
-- PostgreSQL's default vacuums a table once a fifth of it is dead, at a throttled pace, which
-- for a table emptied as fast as it fills is far too late. So vacuum the inbox once 10,000 of
-- its rows are dead, unthrottled: in the steady state it holds a few thousand rows, and each
-- such vacuum is a few milliseconds. A vacuum that finds the end of the table empty also gives
-- those pages back, so the inbox shrinks again after a backlog (docs/architecture.md, "Tool
-- stats at scale").
ALTER TABLE tool_execution_inbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);

-- The history's week partitions kept (migration V24, keep_history_partitions): created for
-- today and the seven days after it, so the default partition takes a week's rows only if no
-- sweeper has run for that long; dropped once wholly more than $1 days old (0 keeps
-- everything). Answers one row: how many partitions were created and dropped.
SELECT (SELECT jsonb_build_object('created', k.created, 'dropped', k.dropped)
          FROM keep_history_partitions(7, $1::int4) AS k) AS kept

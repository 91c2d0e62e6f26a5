-- The history's day partitions kept (migration V24, keep_history_partitions): $1 days created
-- ahead of today, $2 days of history kept (0 keeps everything). Answers one row: how many
-- partitions were created and dropped.
SELECT (SELECT jsonb_build_object('created', k.created, 'dropped', k.dropped)
          FROM keep_history_partitions($1::int4, $2::int4) AS k) AS kept

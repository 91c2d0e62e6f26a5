-- The data-scale benchmark's executions of one tool ($4, its component $5) outside any call:
-- executions $1 to $1 + $2 - 1, spread evenly over the last $3 seconds, the first tenant's, in a
-- busy tool's mix (half validate, a tenth prepare, the rest execute; 93% ok, 3% rejected, 3%
-- failed, 1% crashed) with a long tail of durations (execute 20 ms to about 2 s).
INSERT INTO tool_executions (tool, component, component_version, operation, tool_call_id, started_at,
                             duration_ms, outcome, error, trace_id, tenant_id)
SELECT $4, $5, 'seed',
       CASE WHEN r.op < 50 THEN 'validate' WHEN r.op < 60 THEN 'prepare' ELSE 'execute' END,
       NULL, now() - make_interval(secs => $3::float8 * r.at),
       CASE WHEN r.op < 50 THEN 0.2 + 2.0 * r.u WHEN r.op < 60 THEN 1.0 + 10.0 * r.u
            ELSE 20.0 + 2000.0 * r.u * r.u * r.u END,
       CASE WHEN r.outcome < 93 THEN 'ok' WHEN r.outcome < 96 THEN 'rejected' WHEN r.outcome < 99 THEN 'failed'
            ELSE 'crashed' END,
       CASE WHEN r.outcome >= 96 THEN 'seeded failure ' || r.n END,
       md5(r.n::text), 'default'
  FROM (SELECT n, (n * 7919) % 100 AS op, (n * 104729) % 100 AS outcome,
               ((n * 2654435761) % 1000003) / 1000003.0 AS u, ((n * 40503) % 1000033) / 1000033.0 AS at
          FROM generate_series($1::int8, $1::int8 + $2::int8 - 1) AS n) AS r

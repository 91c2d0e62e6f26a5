-- PostgreSQL's JIT compiles a plan whose estimated cost passes `jit_above_cost`, on every
-- execution. The routes' statements are planned on each request (docs/architecture.md,
-- "Retention"), and the stats statement's plan over the partitioned history passes it: the
-- compilation took about 80 ms of a request that otherwise takes 15 (docs/benchmarks.md). None
-- of Gatehouse's statements runs long enough to gain from JIT, so it is off for this database's
-- new sessions. Only the database's owner may change it; for anyone else this notes it, and
-- docs/deploying.md says what to set instead.
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'jit is left as it is: only the owner of database % may turn it off (docs/deploying.md)',
        current_database();
END
$$;

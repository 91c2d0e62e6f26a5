-- Partitioning the history by week, second step (see V22): the rows so far are checked against
-- the constraints V22 added. VALIDATE CONSTRAINT takes a lock that lets inserts and reads go
-- on while it scans.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT parent FROM history_partitioning_cutoffs LOOP
        EXECUTE format('ALTER TABLE %I VALIDATE CONSTRAINT %I', t.parent, t.parent || '_before_partitions');
    END LOOP;
END
$$;

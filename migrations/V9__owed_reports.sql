-- A report the relay is owed (the checkpoint callback of a PREPARED call, the completion
-- callback of a settled one) survives the worker that should have sent it. Every status change
-- that owes a report stamps `report_owed_since`; whoever delivers the report clears it once it
-- has tried. A stamp older than a worker's lease means the worker died before it tried, and the
-- sweeper delivers the report instead.

ALTER TABLE tool_calls ADD COLUMN report_owed_since timestamptz;

-- Set here rather than in each transition's statement, so no transition can forget it: a call
-- that reaches PREPARED or a final status owes a report; one that moves on (PREPARED resumed
-- to EXECUTING) no longer owes the old one.
CREATE FUNCTION tool_calls_owe_report() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.report_owed_since := CASE
        WHEN NEW.status IN ('PREPARED', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') THEN now()
    END;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_calls_owe_report
    BEFORE UPDATE OF status ON tool_calls
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION tool_calls_owe_report();

-- The sweeper's scan for reports nobody delivered: only owed rows are in it.
CREATE INDEX tool_calls_report_owed_idx ON tool_calls (report_owed_since)
    WHERE report_owed_since IS NOT NULL;

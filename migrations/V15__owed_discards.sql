-- What `prepare` left behind (a draft, a hold) is owed a `discard` once its call will never run:
-- cancelled or expired with a checkpoint. Whoever discards clears the stamp once the tool has
-- answered; one that failed (the tool host was down) stays owed, and the sweeper tries again
-- after a worker's lease, a few times (docs/architecture.md, "The sweeper").
ALTER TABLE tool_calls
    ADD COLUMN discard_owed_since timestamptz,
    ADD COLUMN discard_attempts   integer NOT NULL DEFAULT 0;

CREATE FUNCTION tool_calls_owe_discard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('CANCELLED', 'EXPIRED') AND NEW.checkpoint IS NOT NULL THEN
        NEW.discard_owed_since := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_calls_owe_discard
    BEFORE UPDATE OF status ON tool_calls
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION tool_calls_owe_discard();

-- The sweeper's scan for discards nobody completed: only owed rows are in it.
CREATE INDEX tool_calls_discard_owed_idx ON tool_calls (discard_owed_since)
    WHERE discard_owed_since IS NOT NULL;

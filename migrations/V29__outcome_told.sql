-- When a relay told the caller a settled call's outcome (POST /voice-tools/calls/:id/outcome-told),
-- and which request did (its Idempotency-Key): set once, by the first relay to claim it, so a
-- relay that restarts mid-conversation speaks the outcome of a call that settled while no relay
-- was there, and never one the caller already heard (docs/architecture.md, "Voice sessions").
-- The key lets the claimant's own retry, after a lost answer, learn that the mark is its own.
-- Nullable columns without a default: adding them rewrites no row and holds the lock only for
-- the catalog change.
ALTER TABLE tool_calls
    ADD COLUMN outcome_told_at timestamptz,
    ADD COLUMN outcome_told_by text CONSTRAINT tool_calls_outcome_told_by_bounded CHECK (length(outcome_told_by) <= 255);

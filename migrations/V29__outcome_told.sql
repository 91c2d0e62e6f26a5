-- When a relay told the caller a settled call's outcome (POST /voice-tools/calls/:id/outcome-told),
-- and which request did (its Idempotency-Key): set once, by the first relay to claim it, so a
-- relay that restarts mid-conversation speaks the outcome of a call that settled while no relay
-- was there, and never one the caller already heard (docs/architecture.md, "Voice sessions").
-- The key lets the claimant's own retry, after a lost answer, learn that the mark is its own.
-- Nullable columns without a default: adding them rewrites no row and holds the lock only for
-- the catalog change. The bound on the key is checked for new rows at once and for the rows
-- already there by V31, a scan that blocks no request (a check added with its column would scan
-- the table under this migration's exclusive lock: `gatehouse migrate --plan` said so).
ALTER TABLE tool_calls
    ADD COLUMN outcome_told_at timestamptz,
    ADD COLUMN outcome_told_by text,
    ADD CONSTRAINT tool_calls_outcome_told_by_bounded CHECK (length(outcome_told_by) <= 255) NOT VALID;

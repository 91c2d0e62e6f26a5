-- Exactly once against a replayed or duplicated contract request (docs/architecture.md,
-- "Signed hops").

-- Every nonce of a signed service request a host accepted, until its signature's window has
-- passed (after which the timestamp alone refuses it). A nonce seen twice is a replay.
CREATE TABLE service_nonces (
    nonce      text        PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX service_nonces_expires_idx ON service_nonces (expires_at);

-- The attempt of a call's execution for which the tool began `prepare` and `execute`. A tool
-- acts on a call only after claiming the operation for the call's current attempt, which
-- happens once: a second request for the same attempt (a replay, a duplicate) finds the claim
-- taken and is answered from what the call recorded, without acting. A re-drive after a
-- crash is a new attempt, and its `execute` learns from the earlier claim that the side
-- effect may have started.
ALTER TABLE tool_calls
    ADD COLUMN prepare_claimed_attempt integer,
    ADD COLUMN execute_claimed_attempt integer;

-- Records the nonce of a signed service request; true if it was new, false if it was seen
-- before (a replay). $1 nonce, $2 when it may be forgotten (unix seconds).
WITH spent AS (
    INSERT INTO service_nonces (nonce, expires_at) VALUES ($1, to_timestamp($2::float8))
    ON CONFLICT (nonce) DO NOTHING
    RETURNING 1
)
SELECT to_jsonb(count(*) = 1) AS fresh FROM spent

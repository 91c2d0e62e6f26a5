-- Forgets nonces whose window has passed, at most $1 of them; answers how many.
WITH expired AS (
    SELECT nonce FROM service_nonces WHERE expires_at < now() ORDER BY expires_at LIMIT $1
),
forgotten AS (
    DELETE FROM service_nonces n USING expired WHERE n.nonce = expired.nonce RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten

-- Records the nonce of a signed service request; true if it was new, false if it was seen
-- before (a replay). $1 nonce, $2 when it may be forgotten (unix seconds).
SELECT to_jsonb(spend_service_nonce($1, $2::float8)) AS fresh

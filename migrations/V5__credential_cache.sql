-- Short-lived credentials a component obtained and may reuse across requests (a Gmail access
-- token lives an hour; Spin gives each request a fresh instance, so memory cannot hold it).
-- Values are sealed with a key derived from the Spin secret variables: the database never
-- holds a usable credential.
CREATE TABLE credential_cache (
    cache_key  text        PRIMARY KEY,
    sealed     bytea       NOT NULL,
    expires_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

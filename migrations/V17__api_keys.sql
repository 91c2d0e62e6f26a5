-- Tenants and their API keys (docs/keys.md; docs/architecture.md, "Keys and scopes"). A key is
-- shown once, when `gatehouse keys create` makes it; the database keeps its SHA-256 (a key is 32
-- random bytes, so a fast hash is enough: nothing to guess from it) and its prefix, by which
-- lists and revocations name it. The variable `api_token` stays what it was: the first
-- tenant's admin key, checked by the components without this table.
CREATE TABLE tenants (
    id         text        PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name       text        NOT NULL CHECK (length(name) <= 200),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO tenants (id, name) VALUES ('default', 'The first tenant; api_token is its admin key');

CREATE TABLE api_keys (
    id         uuid        PRIMARY KEY,
    tenant_id  text        NOT NULL REFERENCES tenants (id),
    -- `ghk_` and eight hex digits: the key's public name.
    prefix     text        NOT NULL UNIQUE CHECK (prefix ~ '^ghk_[0-9a-f]{8}$'),
    key_hash   bytea       NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    scopes     text[]      NOT NULL CHECK (
        cardinality(scopes) > 0
        AND scopes <@ ARRAY['calls:write', 'calls:read', 'tools:read', 'admin']::text[]
    ),
    label      text        NOT NULL DEFAULT '' CHECK (length(label) <= 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    -- The key a rotation made this one to replace; both are valid until the old one is revoked.
    replaces   uuid        REFERENCES api_keys (id)
);
-- Every request with a key reads it by its hash (the UNIQUE constraint's index).

-- The calls of tools built with the SDKs (sdk/; docs/architecture.md, "Tools in any language"):
-- each SDK keeps a call's contract record (what was prepared, whether execute ran and what it
-- answered) in this table when its tool runs as a component, and replaces it only if nobody
-- did since it read it (compare-and-set on `version`). The rules live in the SDKs; the SQL they
-- send is these functions, so every SDK sends the same.
CREATE TABLE tool_sdk_calls (
    tool         text        NOT NULL,
    tool_call_id text        NOT NULL,
    version      bigint      NOT NULL,
    record       jsonb       NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tool, tool_call_id)
);
-- The sweeper forgets records no call can need any more, oldest first.
CREATE INDEX tool_sdk_calls_updated_idx ON tool_sdk_calls (updated_at);

-- A call's record and version, as {"record": ..., "version": n}; null for a call never seen.
-- A scalar, so the statement always returns one row.
CREATE FUNCTION tool_sdk_call(p_tool text, p_call text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('record', record, 'version', version)
    FROM tool_sdk_calls WHERE tool = p_tool AND tool_call_id = p_call
$$;

-- Stores `p_record` as the call's next version if the call is still at `p_version` (0: absent);
-- whether it did.
CREATE FUNCTION save_tool_sdk_call(p_tool text, p_call text, p_record jsonb, p_version bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_version = 0 THEN
        INSERT INTO tool_sdk_calls (tool, tool_call_id, version, record)
        VALUES (p_tool, p_call, 1, p_record) ON CONFLICT DO NOTHING;
    ELSE
        UPDATE tool_sdk_calls SET record = p_record, version = version + 1, updated_at = now()
        WHERE tool = p_tool AND tool_call_id = p_call AND version = p_version;
    END IF;
    RETURN FOUND;
END
$$;

-- Records the nonce of a signed service request until `p_expires_at` (unix seconds): true the
-- first time, false for a replay. The Rust tools (crates/store/src/sql/contract/spend_nonce.sql)
-- and the SDKs both spend nonces through it.
CREATE FUNCTION spend_service_nonce(p_nonce text, p_expires_at float8) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO service_nonces (nonce, expires_at) VALUES (p_nonce, to_timestamp(p_expires_at))
    ON CONFLICT (nonce) DO NOTHING;
    RETURN FOUND;
END
$$;

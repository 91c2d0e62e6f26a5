-- Data one tool leaves for the agent or for another tool in the same session,
-- e.g. the last vector-search results. A row past expires_at is treated as absent.

CREATE TABLE session_context (
    session_id    text        NOT NULL
                              CONSTRAINT session_context_session_id_length CHECK (char_length(session_id) BETWEEN 1 AND 200),
    context_key   text        NOT NULL
                              CONSTRAINT session_context_key_length CHECK (char_length(context_key) BETWEEN 1 AND 200),
    context_value jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL DEFAULT now() + interval '1 hour',
    PRIMARY KEY (session_id, context_key)
);

-- Lets the sweeper delete expired rows without scanning the table.
CREATE INDEX session_context_expires_idx ON session_context (expires_at);

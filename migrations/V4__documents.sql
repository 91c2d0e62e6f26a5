-- The corpus that query_vector_db searches, loaded by `gatehouse ingest`.
-- Embeddings come from all-MiniLM-L6-v2 (384 dimensions, L2-normalized).

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    id           text        PRIMARY KEY
                             CONSTRAINT documents_id_length CHECK (char_length(id) BETWEEN 1 AND 200),
    content      text        NOT NULL
                             CONSTRAINT documents_content_not_blank CHECK (btrim(content) <> ''),
    metadata     jsonb       NOT NULL DEFAULT '{}'
                             CONSTRAINT documents_metadata_object CHECK (jsonb_typeof(metadata) = 'object'),
    doc_date     date,
    embedding    vector(384) NOT NULL,
    -- Hex SHA-256 of `content`: a re-ingest compares it to skip re-embedding unchanged text.
    content_hash text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Nearest neighbours by cosine distance (`embedding <=> $1`).
CREATE INDEX documents_embedding_hnsw_idx ON documents USING hnsw (embedding vector_cosine_ops);
-- Metadata filters by containment (`metadata @> '{"region": "EMEA"}'`).
CREATE INDEX documents_metadata_idx ON documents USING gin (metadata jsonb_path_ops);
-- Date range filters.
CREATE INDEX documents_doc_date_idx ON documents (doc_date);

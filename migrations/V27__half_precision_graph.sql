-- query_vector_db orders by the embedding at half precision (`embedding::halfvec(384)`), so
-- every nearest-neighbour index is built on that expression: half the size of one on the
-- full-precision vector, read in about 60% of the time, and the order barely moves (the score
-- the search answers is still computed at full precision). This replaces V4's graph with the
-- same graph on the new expression. `gatehouse index` builds larger corpora's indexes on it
-- too (docs/architecture.md, "Vector search").
--
-- On a populated table the build takes a while (minutes at a million documents): `gatehouse
-- migrate` builds it concurrently beforehand, so ingests go on, and the release before this one
-- keeps searching through V4's graph, which the contract step V32 drops.
SET LOCAL maintenance_work_mem = '1GB';
CREATE INDEX IF NOT EXISTS documents_embedding_idx ON documents
    USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops);

-- query_vector_db orders by `embedding <=> $q` with LIMIT top_k and its filters in WHERE.
-- A plain HNSW scan hands back only hnsw.ef_search (40) candidates and the filters run after
-- it, so a filtered search, or one asking for more than 40 documents, would come back short.
-- An iterative scan (pgvector 0.8) keeps walking the graph until the LIMIT is met; the search
-- re-sorts what it gets, so the relaxed order is enough. New sessions pick the setting up.
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET hnsw.iterative_scan = %L', current_database(), 'relaxed_order');
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'could not enable hnsw.iterative_scan on database %: only its owner can; ask them to run '
                  'ALTER DATABASE % SET hnsw.iterative_scan = relaxed_order, or filtered searches may return '
                  'fewer than top_k documents', current_database(), current_database();
END
$$;

//! `query_vector_db`: the tool contract on the private route (`/tool/...`), and the gated
//! direct flow on `POST /query-vector-db`.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

mod flow;

gatehouse_tool::tool_component!(gatehouse_vector_search::VectorQuery, "/query-vector-db" => flow::query_vector_db);

//! `query_vector_db`: the tool contract on the private route (`/tool/...`), and the gated
//! direct flow on `POST /query-vector-db`.

mod flow;

gatehouse_tool::tool_component!(gatehouse_vector_search::VectorQuery, "/query-vector-db" => flow::query_vector_db);

//! `query_vector_db`: the tool contract on the private route (`/tool/...`), and the gated
//! direct flow on `POST /query-vector-db`.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

mod flow;
mod tool;

use gatehouse_http::{IncomingRequest, ResponseOutparam};

/// The public route; everything else reaches this component through service chaining.
const DIRECT_FLOW_PATH: &str = "/query-vector-db";

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    if req.path_with_query().is_some_and(|path| path.split('?').next() == Some(DIRECT_FLOW_PATH)) {
        gatehouse_http::serve(req, out, flow::query_vector_db).await
    } else {
        gatehouse_tool::serve_tool(req, out, &tool::VectorQuery).await
    }
}

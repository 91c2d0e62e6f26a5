//! `POST /mcp`: the lifecycle as MCP tools (docs/architecture.md, "MCP"), over the Streamable HTTP
//! transport and without sessions. Every POST carries one JSON-RPC message and gets a plain JSON
//! answer; there is no server-initiated stream, so GET and DELETE answer 405 as the transport
//! allows.
//!
//! Both eras share the endpoint, chosen per request ([`protocol::era`]): 2026-07-28, stateless
//! by design (`server/discover`, per-request `_meta`, `resultType`, the Tasks extension and
//! `input_required`), and the `initialize` handshake of 2025-11-25 and older.
//!
//! The tools call the same lifecycle functions as the REST routes ([`tools`]), behind the
//! same bearer token.
//!
//! The modules use each other top down, never back: [`tools`] lists and runs the
//! [`operations`] and hands a registered tool to [`confirmation`], which uses [`tasks`]; both
//! ask and answer the [`questions`] a call waits on, and every one of them answers through
//! [`results`]. [`protocol`], [`jsonrpc`] and [`schemas`] are the leaves below.

mod confirmation;
mod jsonrpc;
mod operations;
mod protocol;
mod questions;
mod results;
mod schemas;
mod tasks;
mod tools;

use gatehouse_domain::{ApiError, ErrorCode};
use gatehouse_http::{BodyError, Component, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;
use serde_json::{Map, Value};

use crate::jsonrpc::{INVALID_REQUEST, METHOD_NOT_FOUND, Message, PARSE_ERROR, RpcError};
use crate::protocol::{Era, Headers};
use crate::results::internal;

pub use protocol::{MODERN_VERSION, SUPPORTED_VERSIONS};

pub async fn handle(component: Component, req: Request) -> Result<Reply, ApiError> {
    // MCP is an agent's way to propose and act on calls: the same scope as the REST routes that do.
    let grant = gatehouse_http::require_key(&req, gatehouse_http::Scope::CallsWrite)?;
    check_origin(&req)?;
    if *req.method() != Method::Post {
        return Err(ApiError::method_not_allowed("POST"));
    }
    let headers = Headers {
        protocol_version: gatehouse_http::header(&req, "mcp-protocol-version"),
        method: gatehouse_http::header(&req, "mcp-method"),
        name: gatehouse_http::header(&req, "mcp-name"),
    };
    let body = match gatehouse_http::parse_body::<Map<String, Value>>(&req) {
        Ok(Some(message)) => Value::Object(message),
        // A wrong media type keeps its HTTP answer; everything else about the body is
        // JSON-RPC's business: not JSON at all is its parse error, a batch or a scalar is
        // an invalid request (the shape is checked before any member is read).
        Err(BodyError::MediaType) => return Err(BodyError::MediaType.into()),
        Err(BodyError::NotAnObject(kind)) => {
            let error = RpcError::new(
                INVALID_REQUEST,
                format!("A message must be one JSON-RPC 2.0 object, not {kind}; batches are not supported."),
            );
            return Ok(rpc_answer(400, &jsonrpc::error(&Value::Null, &error)));
        }
        Ok(None) | Err(_) => {
            let error = RpcError::new(PARSE_ERROR, "The body is not a JSON-RPC message.");
            return Ok(rpc_answer(400, &jsonrpc::error(&Value::Null, &error)));
        }
    };
    match jsonrpc::classify(body) {
        Ok(Message::NoReply) => match protocol::known_version(headers) {
            Ok(()) => Ok(accepted()),
            Err(error) => Ok(rpc_answer(error.http_status, &jsonrpc::error(&Value::Null, &error))),
        },
        Ok(Message::Request { id, method, params }) => match protocol::era(headers, &method, &params) {
            Ok(era) => Ok(answer(component, Ctx::for_grant(grant), &era, &id, &method, &params).await),
            Err(error) => Ok(rpc_answer(error.http_status, &jsonrpc::error(&id, &error))),
        },
        Err((id, error)) => Ok(rpc_answer(400, &jsonrpc::error(&id, &error))),
    }
}

async fn answer(component: Component, ctx: Ctx, era: &Era, id: &Value, method: &str, params: &Value) -> Reply {
    let modern = matches!(era, Era::Modern { .. });
    let outcome = match (method, modern) {
        ("initialize", false) => Ok((protocol::initialize_result(params, component.version), None)),
        ("ping", false) => Ok((serde_json::json!({}), None)),
        ("server/discover", true) => Ok((protocol::discover_result(component.version), None)),
        ("tools/list", _) => tools::list(&ctx, era).await.map(|list| (list, None)).map_err(internal),
        ("tools/call", _) => tools::call(&ctx, era, params).await,
        ("tasks/get" | "tasks/update" | "tasks/cancel", true) if !era.tasks() => Err(tasks::not_declared()),
        ("tasks/get", true) => tasks::get(&ctx, params).await.map(|task| (task, None)),
        ("tasks/update", true) => tasks::update(&ctx, params).await,
        ("tasks/cancel", true) => tasks::cancel(&ctx, params).await,
        // Under 2026-07-28 an unknown method is 404, so that a client can tell it from a
        // server without this endpoint.
        (other, _) => {
            let error = RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {other}"));
            Err(if modern { error.with_status(404) } else { error })
        }
    };
    match outcome {
        Ok((result, after)) => {
            let result = if modern { protocol::modern_result(result, component.version) } else { result };
            let reply = rpc_answer(200, &jsonrpc::result(id, result));
            match after {
                Some(work) => reply.then(work),
                None => reply,
            }
        }
        Err(error) => rpc_answer(error.http_status, &jsonrpc::error(id, &error)),
    }
}

fn rpc_answer(status: u16, message: &Value) -> Reply {
    gatehouse_http::json_response(status, message).into()
}

/// A notification or a response from the client: 202 with no body.
fn accepted() -> Reply {
    gatehouse_http::Response::builder().status(202).body(Vec::new()).build().into()
}

/// DNS rebinding: a browser page must not reach this endpoint from another origin. A request
/// with an `Origin` (which browsers send, and other clients do not) is accepted only from an
/// origin the `mcp_allowed_origins` variable lists, scheme included. The request's own `Host`
/// is never trusted for it: a rebinding page controls both.
fn check_origin(req: &Request) -> Result<(), ApiError> {
    let Some(origin) = gatehouse_http::header(req, "origin") else { return Ok(()) };
    let allowed = spin_sdk::variables::get(ALLOWED_ORIGINS)
        .map_err(|e| ApiError::internal().with_detail(format!("reading the {ALLOWED_ORIGINS} variable: {e:?}")))?;
    if origin_allowed(&allowed, origin) {
        return Ok(());
    }
    Err(ApiError::new(ErrorCode::Forbidden, "Requests from that origin are not allowed."))
}

/// The variable listing the browser origins the MCP endpoint admits.
const ALLOWED_ORIGINS: &str = "mcp_allowed_origins";

/// Whether `origin` is one of `allowed` (comma-separated `scheme://host[:port]`), compared
/// without case and without a trailing slash.
fn origin_allowed(allowed: &str, origin: &str) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    !origin.is_empty()
        && allowed
            .split(',')
            .map(|entry| entry.trim().trim_end_matches('/'))
            .any(|entry| entry.eq_ignore_ascii_case(origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_with_their_scheme_are_allowed() {
        let allowed = "https://app.example.com, http://localhost:5173/";
        assert!(origin_allowed(allowed, "https://app.example.com"));
        assert!(origin_allowed(allowed, "HTTPS://APP.EXAMPLE.COM/"));
        assert!(origin_allowed(allowed, "http://localhost:5173"));
        assert!(!origin_allowed(allowed, "http://app.example.com"), "another scheme");
        assert!(!origin_allowed(allowed, "https://app.example.com:8443"), "another port");
        assert!(!origin_allowed(allowed, "https://evil.example"));
        assert!(!origin_allowed("", "https://app.example.com"), "nothing listed");
        assert!(!origin_allowed(allowed, "null"), "an opaque origin");
    }
}

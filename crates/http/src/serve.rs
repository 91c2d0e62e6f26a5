use std::pin::pin;

use futures::StreamExt;
use gatehouse_domain::ApiError;
use spin_sdk::http::{Headers, IncomingRequest, Request, Response};

use crate::body::MAX_BODY_BYTES;
use crate::response::error_response;

/// Runs a component handler: reads the request (body capped at [`MAX_BODY_BYTES`]),
/// calls `handler`, and turns an `Err` into the matching error response.
pub async fn serve<F>(req: IncomingRequest, handler: F) -> Response
where
    F: FnOnce(Request) -> Result<Response, ApiError>,
{
    serve_with_body_limit(req, MAX_BODY_BYTES, handler).await
}

/// [`serve`] with a different body cap, for the rare route that needs one.
pub async fn serve_with_body_limit<F>(req: IncomingRequest, limit: usize, handler: F) -> Response
where
    F: FnOnce(Request) -> Result<Response, ApiError>,
{
    let outcome = match read_request(req, limit).await {
        Ok(request) => handler(request),
        Err(error) => Err(error),
    };
    outcome.unwrap_or_else(|error| {
        log_error(&error);
        error_response(&error)
    })
}

/// Spin's own conversion to `Request` buffers the whole body first; this one stops
/// reading as soon as the cap is passed.
async fn read_request(incoming: IncomingRequest, limit: usize) -> Result<Request, ApiError> {
    let headers = incoming.headers();
    if declared_length(&headers).is_some_and(|length| length > limit) {
        return Err(ApiError::payload_too_large(limit));
    }
    let mut builder = Request::builder();
    builder.method(incoming.method()).uri(incoming.uri()).headers(headers);

    let mut body = Vec::new();
    let mut chunks = pin!(incoming.into_body_stream());
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::invalid_input("The request body could not be read.").with_detail(e.to_debug_string())
        })?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::payload_too_large(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(builder.body(body).build())
}

fn declared_length(headers: &Headers) -> Option<usize> {
    let values = headers.get("content-length");
    let value = values.first()?;
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// Logs a server-side failure as one JSON object per line, with the operator-only
/// detail. Client mistakes (4xx) are the client's to read and are not logged.
pub fn log_error(error: &ApiError) {
    if error.http_status() < 500 {
        return;
    }
    let line = serde_json::json!({
        "level": "error",
        "code": error.code,
        "message": error.message,
        "detail": error.detail,
    });
    eprintln!("{line}");
}

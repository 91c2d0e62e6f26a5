use std::future::Future;
use std::pin::{Pin, pin};

use futures::StreamExt;
use gatehouse_domain::ApiError;
use spin_sdk::http::{Fields, Headers, IncomingRequest, OutgoingResponse, Request, Response, ResponseOutparam};

use crate::body::MAX_BODY_BYTES;
use crate::response::error_response;

/// Work a handler wants done after its response has gone out.
pub type AfterResponse = Pin<Box<dyn Future<Output = ()>>>;

/// A handler's answer, and optionally the work that continues once the client has it.
///
/// Spin lets a component send its response and keep running (SPEC §4); confirm relies on it
/// to answer 202 before the executor starts, and cancel to call back the relay afterwards.
pub struct Reply {
    pub response: Response,
    pub after: Option<AfterResponse>,
}

impl Reply {
    pub fn then(mut self, work: impl Future<Output = ()> + 'static) -> Reply {
        self.after = Some(Box::pin(work));
        self
    }
}

impl From<Response> for Reply {
    fn from(response: Response) -> Reply {
        Reply { response, after: None }
    }
}

/// Runs a component handler: reads the request (body capped at [`MAX_BODY_BYTES`]), calls
/// `handler`, sends its response (or the matching error response), then runs the handler's
/// after-response work.
pub async fn serve<F, Fut>(req: IncomingRequest, out: ResponseOutparam, handler: F)
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<Reply, ApiError>>,
{
    serve_with_body_limit(req, out, MAX_BODY_BYTES, handler).await
}

/// [`serve`] with a different body cap, for the rare route that needs one.
pub async fn serve_with_body_limit<F, Fut>(req: IncomingRequest, out: ResponseOutparam, limit: usize, handler: F)
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<Reply, ApiError>>,
{
    let outcome = match read_request(req, limit).await {
        Ok(request) => handler(request).await,
        Err(error) => Err(error),
    };
    let reply = outcome.unwrap_or_else(|error| {
        log_error(&error);
        error_response(&error).into()
    });
    send_response(out, reply.response).await;
    if let Some(after) = reply.after {
        after.await;
    }
}

async fn send_response(out: ResponseOutparam, response: Response) {
    let headers: Vec<(String, Vec<u8>)> =
        response.headers().map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec())).collect();
    let fields = match Fields::from_list(&headers) {
        Ok(fields) => fields,
        Err(e) => {
            log_line("error", &format!("building response headers: {e:?}"));
            Fields::new()
        }
    };
    let outgoing = OutgoingResponse::new(fields);
    if outgoing.set_status_code(*response.status()).is_err() {
        log_line("error", "the handler produced an invalid status code");
    }
    // A client that hung up is not an error of ours; the work after the response goes on.
    if let Err(e) = out.set_with_body(outgoing, response.into_body()).await {
        log_line("warn", &format!("sending the response: {e:?}"));
    }
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

/// One JSON log line from a component.
pub fn log_line(level: &str, message: &str) {
    eprintln!("{}", serde_json::json!({"level": level, "message": message}));
}

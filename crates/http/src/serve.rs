use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Instant;

use futures::StreamExt;
use gatehouse_domain::ApiError;
use spin_sdk::http::{Fields, IncomingRequest, Method, OutgoingResponse, Request, Response, ResponseOutparam};

use crate::body::MAX_BODY_BYTES;
use crate::response::error_response;
use gatehouse_platform::{Component, log_error, log_event, log_line};

/// Work a handler wants done after its response has gone out.
pub type AfterResponse = Pin<Box<dyn Future<Output = ()>>>;

/// A handler's answer, and optionally the work that continues once the client has it.
/// (A [`Response`] is Spin's, what a handler builds; a `Reply` is one with the work after it;
/// an [`OutboundResponse`](crate::OutboundResponse) is what an outbound request got back.)
///
/// Spin lets a component send its response and keep running (docs/architecture.md, "Work
/// after the answer"); confirm relies on it to answer 202 before the executor starts, and
/// cancel to call back the relay afterwards.
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

/// Runs a component handler: reads the request (body capped at [`MAX_BODY_BYTES`]), starts its
/// span of the trace, calls `handler`, sends its response (or the matching error response),
/// logs one line for the request, then runs the handler's after-response work.
pub async fn serve<F, Fut>(component: Component, req: IncomingRequest, out: ResponseOutparam, handler: F)
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<Reply, ApiError>>,
{
    let limit = MAX_BODY_BYTES;
    let clock = Instant::now();
    let head = RequestHead::read(&req);
    gatehouse_platform::begin_span(component, head.first("traceparent").as_deref());
    let access = AccessLine::of(&head);
    let outcome = match read_request(req, head, limit).await {
        Ok(request) => handler(request).await,
        Err(error) => Err(error),
    };
    let reply = reply_or_error(outcome);
    let status = *reply.response.status();
    send_response(out, reply.response).await;
    access.write(status, clock);
    if let Some(after) = reply.after {
        after.await;
    }
}

/// The handler's reply, or the response for its error (logged if it is ours, a 5xx).
fn reply_or_error(outcome: Result<Reply, ApiError>) -> Reply {
    outcome.unwrap_or_else(|error| {
        log_error(&error);
        error_response(&error).into()
    })
}

/// What the one log line per request says about it. Never a header value or a body: those
/// may hold a token or someone's email.
struct AccessLine {
    method: String,
    route: String,
    path: String,
}

impl AccessLine {
    fn of(head: &RequestHead) -> AccessLine {
        let path = head.path_with_query.split('?').next().unwrap_or_default().to_owned();
        // The route pattern (`/voice-tools/confirm/:id`); a chained request matches `/...`.
        let route = head.first("spin-matched-route").unwrap_or_else(|| path.clone());
        AccessLine { method: head.method.to_string(), route, path }
    }

    fn write(self, status: u16, clock: Instant) {
        let duration_ms = (clock.elapsed().as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
        log_event(
            "info",
            "request",
            serde_json::json!({
                "method": self.method, "route": self.route, "path": self.path,
                "status": status, "duration_ms": duration_ms,
            }),
        );
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

/// The request's method, target and headers, copied out of the host's resources.
///
/// The `headers` handle is a child of the request, and reading the body consumes the request:
/// Spin 3.x's wasmtime refuses to drop a resource while a child of it is alive ("resource has
/// children"), so no handle may outlive this function (docs/architecture.md, "Hosts pinned to
/// Spin's wasmtime").
struct RequestHead {
    method: Method,
    uri: String,
    path_with_query: String,
    headers: Vec<(String, Vec<u8>)>,
}

impl RequestHead {
    fn read(req: &IncomingRequest) -> RequestHead {
        let headers = req.headers().entries();
        RequestHead {
            method: req.method(),
            uri: req.uri(),
            path_with_query: req.path_with_query().unwrap_or_default(),
            headers,
        }
    }

    /// The first value of header `name`, if it is UTF-8.
    fn first(&self, name: &str) -> Option<String> {
        let (_, value) = self.headers.iter().find(|(seen, _)| seen.eq_ignore_ascii_case(name))?;
        std::str::from_utf8(value).ok().map(str::to_owned)
    }
}

/// Spin's own conversion to `Request` buffers the whole body first; this one stops
/// reading as soon as the cap is passed.
async fn read_request(incoming: IncomingRequest, head: RequestHead, limit: usize) -> Result<Request, ApiError> {
    let declared_length = head.first("content-length").and_then(|length| length.trim().parse::<usize>().ok());
    if declared_length.is_some_and(|length| length > limit) {
        return Err(ApiError::payload_too_large(limit));
    }
    let mut builder = Request::builder();
    builder.method(head.method).uri(head.uri).headers(combine_repeated(head.headers));

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

/// Joins the lines of a header sent more than once into one value, separated by ", ", as
/// HTTP defines (RFC 9110 §5.3). The request type keeps one value per name; without this the
/// last line would silently win, and `Authorization: Bearer wrong` followed by
/// `Authorization: Bearer right` would be let in. Joined, the credential is a list, which
/// [`crate::require_key`] refuses.
fn combine_repeated(entries: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    let mut combined: Vec<(String, Vec<u8>)> = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        match combined.iter_mut().find(|(seen, _)| seen.eq_ignore_ascii_case(&name)) {
            Some((_, joined)) => {
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(&value);
            }
            None => combined.push((name, value)),
        }
    }
    combined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, value: &str) -> (String, Vec<u8>) {
        (name.to_owned(), value.as_bytes().to_vec())
    }

    #[test]
    fn repeated_header_lines_become_one_list() {
        let combined = combine_repeated(vec![
            entry("authorization", "Bearer wrong"),
            entry("content-type", "application/json"),
            entry("Authorization", "Bearer right"),
        ]);
        assert_eq!(
            combined,
            vec![entry("authorization", "Bearer wrong, Bearer right"), entry("content-type", "application/json")]
        );
    }
}

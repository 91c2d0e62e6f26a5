//! Outbound HTTP from a component (service chaining and callbacks), with a deadline, and the
//! timer it needs.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use futures::future::{Either, select};
pub use spin_sdk::http::Method;
use spin_sdk::http::conversions::TryIntoOutgoingRequest;
use spin_sdk::http::{ErrorCode, IncomingResponse, Request, SendError};
use wasi::clocks::monotonic_clock;

/// What came back from an outbound request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl OutboundResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Why an outbound request produced no answer. The text is for logs and audit rows; it
/// never contains a header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendFailure {
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    #[error("{0}")]
    Transport(String),
    /// No connection was made (refused, no such host, no route, or the connection attempt
    /// timed out): the request never reached the other side, so sending it again is safe.
    #[error("no connection: {0}")]
    NotConnected(String),
    /// The answer was longer than [`MAX_ANSWER_BYTES`]; reading stopped there.
    #[error("the answer is longer than {0} bytes")]
    TooLarge(usize),
    /// The host refused to let the request out: the manifest's `allowed_outbound_hosts` does
    /// not name its origin. Nothing was sent, and trying again will not help.
    #[error("not allowed by the component's allowed_outbound_hosts")]
    Denied,
}

/// Sends one request and waits at most `timeout` for the whole answer.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<OutboundResponse, SendFailure> {
    // The body's length is known, so say it: without it the request goes out chunked, and
    // simple webhook receivers (Python's http.server, some serverless front doors) read only
    // Content-Length, see an empty body, and every signature check fails for them.
    let declare_length =
        !body.is_empty() || !matches!(method, Method::Get | Method::Head | Method::Delete | Method::Options);
    let mut builder = Request::builder();
    builder.method(method).uri(url);
    for (name, value) in headers {
        builder.header(*name, *value);
    }
    if declare_length {
        builder.header("content-length", body.len().to_string());
    }
    let request = builder.body(body).build();
    let answer = async move {
        let response = exchange(request).await?;
        let status = response.status();
        // Copied out in one statement, so the headers handle (a child of the response) is gone
        // before the body is read (docs/architecture.md, "Hosts pinned to Spin's wasmtime").
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| (name, String::from_utf8(value).unwrap_or_default()))
            .collect();
        let body = read_capped(&response, MAX_ANSWER_BYTES).await?;
        Ok(OutboundResponse { status, headers, body })
    };
    within(timeout, answer).await.unwrap_or(Err(SendFailure::TimedOut(timeout)))
}

/// Sends the request and writes its body side by side. The host decides whether the request
/// may go out when it is handed over; writing the body first (as `spin_sdk::http::send` does)
/// would report a refusal as a closed body stream, and a refused origin would read like an
/// unreachable one.
async fn exchange(request: Request) -> Result<IncomingResponse, SendFailure> {
    use futures::SinkExt;
    let (outgoing, body) = TryIntoOutgoingRequest::try_into_outgoing_request(request)
        .map_err(|e| SendFailure::Transport(format!("building the request: {e}")))?;
    let mut sink = outgoing.take_body();
    let write = async move {
        if let Some(body) = body.filter(|body| !body.is_empty()) {
            sink.send(body).await.map_err(|_| ())?;
        }
        // Dropping the sink finishes the body.
        drop(sink);
        Ok::<(), ()>(())
    };
    let (answer, written) = futures::join!(spin_sdk::http::send::<_, IncomingResponse>(outgoing), write);
    match answer {
        Err(SendError::Http(ErrorCode::HttpRequestDenied)) => Err(SendFailure::Denied),
        Err(SendError::Http(
            code @ (ErrorCode::ConnectionRefused
            | ErrorCode::DnsError(_)
            | ErrorCode::DestinationNotFound
            | ErrorCode::DestinationUnavailable
            | ErrorCode::DestinationIpUnroutable
            | ErrorCode::DestinationIpProhibited
            | ErrorCode::ConnectionTimeout),
        )) => Err(SendFailure::NotConnected(format!("{code:?}"))),
        Err(e) => Err(SendFailure::Transport(e.to_string())),
        Ok(_) if written.is_err() => Err(SendFailure::Transport("writing the request body".to_owned())),
        Ok(response) => Ok(response),
    }
}

/// The most of an answer an outbound request reads (a callback's, a tool's, Gmail's; each is
/// a few kilobytes): a relay or a tool host answering with hundreds of megabytes fails the
/// request instead of the component.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The answer's body, read chunk by chunk, refused as soon as it passes `cap`.
async fn read_capped(response: &IncomingResponse, cap: usize) -> Result<Vec<u8>, SendFailure> {
    let mut chunks = pin!(response.take_body_stream());
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| SendFailure::Transport(format!("reading the answer: {e:?}")))?;
        if body.len() + chunk.len() > cap {
            return Err(SendFailure::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Waits without blocking the component's other futures.
pub fn sleep(duration: Duration) -> impl Future<Output = ()> {
    let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let deadline = monotonic_clock::now().saturating_add(nanos);
    std::future::poll_fn(move |context| {
        if monotonic_clock::now() >= deadline {
            return Poll::Ready(());
        }
        spin_executor::push_waker(monotonic_clock::subscribe_instant(deadline), context.waker().clone());
        Poll::Pending
    })
}

/// Runs `work` and gives up on it after `timeout`, returning `None`.
pub async fn within<T>(timeout: Duration, work: impl Future<Output = T>) -> Option<T> {
    match select(pin!(work), pin!(sleep(timeout))).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(((), _)) => None,
    }
}

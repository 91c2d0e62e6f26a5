//! Outbound HTTP from a component (service chaining and callbacks), with a deadline, and the
//! timer it needs.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures::future::{Either, select};
pub use spin_sdk::http::Method;
use spin_sdk::http::{Request, Response};
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
    let exchange = async move {
        let response: Response =
            spin_sdk::http::send(request).await.map_err(|e| SendFailure::Transport(e.to_string()))?;
        let headers = response
            .headers()
            .map(|(name, value)| (name.to_owned(), value.as_str().unwrap_or_default().to_owned()))
            .collect();
        Ok(OutboundResponse { status: *response.status(), headers, body: response.into_body() })
    };
    within(timeout, exchange).await.unwrap_or(Err(SendFailure::TimedOut(timeout)))
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

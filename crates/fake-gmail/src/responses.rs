use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

pub(crate) type Answer = Response<Full<Bytes>>;

/// Google's JSON APIs answer `application/json; charset=UTF-8`.
pub(crate) fn json(status: StatusCode, body: &Value) -> Answer {
    let text = serde_json::to_vec_pretty(body).unwrap_or_else(|_| b"{}".to_vec());
    with_type(status, "application/json; charset=UTF-8", text)
}

pub(crate) fn empty(status: StatusCode) -> Answer {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

pub(crate) fn with_type(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Adds a header whose value was built here; a value that is not a valid header is dropped
/// rather than failing the answer.
pub(crate) fn add_header(response: &mut Answer, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

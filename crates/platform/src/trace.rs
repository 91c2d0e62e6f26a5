//! Where this request sits in a trace (W3C Trace Context), and the JSON log lines that say so.
//!
//! Spin gives every request a fresh component instance, and an instance runs one thread, so
//! the request's context is a thread-local that the HTTP server sets (see [`begin_span`]).
//! Every log line the instance writes then carries the component, the trace id and the span,
//! without each call site having to pass them along.

use std::cell::RefCell;
use std::io::Write;

use gatehouse_domain::ApiError;
use serde_json::{Map, Value, json};

use crate::random::{hex, random_bytes};

/// Which component this is: its crate's name and version, fixed when it is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    pub name: &'static str,
    pub version: &'static str,
}

/// The calling crate as a [`Component`].
#[macro_export]
macro_rules! this_component {
    () => {
        $crate::Component { name: env!("CARGO_PKG_NAME"), version: env!("CARGO_PKG_VERSION") }
    };
}

#[derive(Debug, Clone)]
struct Context {
    component: &'static str,
    trace_id: String,
    span_id: String,
    parent_span_id: Option<String>,
}

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// Starts this instance's span: in the trace of the request's `traceparent`, or in a new trace.
/// The HTTP server calls it once per request, before the handler runs.
pub fn begin_span(component: Component, traceparent: Option<&str>) {
    let parent = traceparent.and_then(parse_traceparent);
    let (trace_id, parent_span_id) = match parent {
        Some((trace, span)) => (trace, Some(span)),
        None => (hex(&random_bytes::<16>()), None),
    };
    let context = Context { component: component.name, trace_id, span_id: hex(&random_bytes::<8>()), parent_span_id };
    CURRENT.with(|current| *current.borrow_mut() = Some(context));
}

fn with_context<T>(read: impl FnOnce(Option<&Context>) -> T) -> T {
    CURRENT.with(|current| read(current.borrow().as_ref()))
}

/// The trace this request belongs to.
pub fn trace_id() -> String {
    with_context(|context| context.map(|c| c.trace_id.clone())).unwrap_or_else(|| hex(&random_bytes::<16>()))
}

/// A `traceparent` header that carries `trace_id` on to the next hop, with this request's span
/// as the parent. Work on a stored call passes the call's own trace id.
pub fn traceparent(trace_id: &str) -> String {
    let span = with_context(|context| context.map(|c| c.span_id.clone())).unwrap_or_else(|| hex(&random_bytes::<8>()));
    format!("00-{trace_id}-{span}-01")
}

/// Writes one JSON log line on stderr: `level`, `msg`, the component, the trace and the span,
/// then `fields`. Callers never put a secret, a header value or a message body in it.
pub fn log_event(level: &str, message: &str, fields: Value) {
    let mut text = Value::Object(log_line_fields(level, message, fields)).to_string();
    text.push('\n');
    // One write: formatting straight into stderr would cost a host call per JSON token. A line
    // that cannot be written is not worth failing a request for.
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// A log line's fields. The message is `msg`, the key the runner's own lines use, so a line
/// reads the same whether `gatehouse up` or Spin runs the component (docs/observability.md).
fn log_line_fields(level: &str, message: &str, fields: Value) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("level".into(), json!(level));
    line.insert("msg".into(), json!(message));
    with_context(|context| {
        if let Some(context) = context {
            line.insert("component".into(), json!(context.component));
            line.insert("trace_id".into(), json!(context.trace_id));
            line.insert("span_id".into(), json!(context.span_id));
            if let Some(parent) = &context.parent_span_id {
                line.insert("parent_span_id".into(), json!(parent));
            }
        }
    });
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    line
}

/// One JSON log line from a component.
pub fn log_line(level: &str, message: &str) {
    log_event(level, message, Value::Null);
}

/// Logs a server-side failure with the operator-only detail. Client mistakes (4xx) are the
/// client's to read and are not logged beyond the request's own line.
pub fn log_error(error: &ApiError) {
    if error.http_status() < 500 {
        return;
    }
    log_event("error", &error.message, serde_json::json!({"code": error.code, "detail": error.detail}));
}

/// The trace id and parent span of a valid `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`).
fn parse_traceparent(value: &str) -> Option<(String, String)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let is_hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let not_zero = |s: &str| s.bytes().any(|b| b != b'0');
    let valid = is_hex(version, 2)
        && version != "ff"
        && is_hex(trace, 32)
        && not_zero(trace)
        && is_hex(parent, 16)
        && not_zero(parent)
        && is_hex(flags, 2)
        // Version 00 has exactly four fields; later versions may append more.
        && (version != "00" || parts.next().is_none());
    valid.then(|| (trace.to_owned(), parent.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn reads_valid_traceparents_only() {
        let parsed = parse_traceparent(&format!("00-{TRACE}-00f067aa0ba902b7-01"));
        assert_eq!(parsed, Some((TRACE.to_owned(), "00f067aa0ba902b7".to_owned())));
        assert_eq!(parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), None);
        assert_eq!(parse_traceparent(&format!("00-{TRACE}-0000000000000000-01")), None);
        assert_eq!(parse_traceparent(&format!("00-{}-00f067aa0ba902b7-01", TRACE.to_uppercase())), None);
        assert_eq!(parse_traceparent(&format!("00-{TRACE}-00f067aa0ba902b7-01-extra")), None);
        assert!(parse_traceparent(&format!("01-{TRACE}-00f067aa0ba902b7-01-extra")).is_some());
        assert_eq!(parse_traceparent("garbage"), None);
    }

    #[test]
    fn a_line_carries_the_fields_the_operators_guide_names() {
        let context = Context {
            component: "pending",
            trace_id: TRACE.to_owned(),
            span_id: "1111111111111111".to_owned(),
            parent_span_id: Some("00f067aa0ba902b7".to_owned()),
        };
        CURRENT.with(|current| *current.borrow_mut() = Some(context));
        let line = log_line_fields("info", "request", json!({"status": 201}));
        assert_eq!(line["msg"], "request");
        assert!(!line.contains_key("message"), "one key for the message: {line:?}");
        for field in ["level", "component", "trace_id", "span_id", "parent_span_id", "status"] {
            assert!(line.contains_key(field), "no {field}: {line:?}");
        }
        // docs/observability.md quotes the request line's message as it is written.
        let guide = include_str!("../../../docs/observability.md");
        assert!(guide.contains(r#"`"msg":"request"`"#), "docs/observability.md names another key");
        assert!(!guide.contains(r#""message":"request""#), "docs/observability.md names another key");
    }

    #[test]
    fn the_next_hop_gets_this_span_as_its_parent() {
        let context = Context {
            component: "probe",
            trace_id: TRACE.to_owned(),
            span_id: "1111111111111111".to_owned(),
            parent_span_id: Some("00f067aa0ba902b7".to_owned()),
        };
        CURRENT.with(|current| *current.borrow_mut() = Some(context));
        assert_eq!(trace_id(), TRACE);
        assert_eq!(traceparent(TRACE), format!("00-{TRACE}-1111111111111111-01"));
    }
}

//! One JSON object per line on stderr: the runner's own events and its components' output.
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::{Map, Value, json};

static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Turns the per-request debug lines on if the environment variable `name` is `debug` (the
/// `gatehouse` CLI reads `GATEHOUSE_LOG`). Call it before the first log line; the first call
/// wins, and without one the debug lines stay off.
pub fn debug_from_env(name: &str) {
    let _ = DEBUG.set(std::env::var(name).is_ok_and(|v| v.eq_ignore_ascii_case("debug")));
}

/// Whether per-request debug lines are written: they cost a write per request, so they are
/// off unless [`debug_from_env`] turned them on.
pub(crate) fn debug_enabled() -> bool {
    *DEBUG.get_or_init(|| false)
}

/// Writes one log line. `fields` are merged into the object beside `ts`, `level` and `msg`.
pub(crate) fn event(level: &str, msg: &str, fields: Value) {
    if level == "debug" && !debug_enabled() {
        return;
    }
    let mut line = Map::new();
    line.insert("ts".into(), json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
    line.insert("level".into(), json!(level));
    line.insert("msg".into(), json!(msg));
    if let Value::Object(extra) = fields {
        line.extend(extra);
    }
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    // A log line that cannot be written is not worth failing a request for.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

pub fn debug(msg: &str, fields: Value) {
    event("debug", msg, fields);
}

pub fn info(msg: &str, fields: Value) {
    event("info", msg, fields);
}

pub fn warn(msg: &str, fields: Value) {
    event("warn", msg, fields);
}

pub fn error(msg: &str, fields: Value) {
    event("error", msg, fields);
}

/// The span a guest's lines belong to, as the host records it: the component's run
/// (src/telemetry.rs). The guest is handed that span as its parent and cannot tell it from its
/// caller's, so the host, which knows it, writes it into the lines (docs/architecture.md,
/// "Traces").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineSpan {
    pub trace_id: String,
    pub span_id: String,
    /// The span the component's continues (the caller's), if the request named one.
    pub parent_span_id: Option<String>,
}

/// A guest's stdout or stderr: each line it writes becomes a log line tagged with the component.
/// A guest line that is already a JSON object becomes the line itself: its fields stay at the
/// top level beside `ts`, its `level` and `msg` (or `message`) are the line's, and `component`
/// is the id the application gives the component. When the component's span is recorded, its
/// ids replace the guest's own `trace_id`, `span_id` and `parent_span_id`.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    component: std::sync::Arc<str>,
    stream: &'static str,
    span: Option<std::sync::Arc<LineSpan>>,
}

impl GuestOutput {
    pub(crate) fn new(
        component: std::sync::Arc<str>,
        stream: &'static str,
        span: Option<std::sync::Arc<LineSpan>>,
    ) -> GuestOutput {
        GuestOutput { component, stream, span }
    }

    fn emit(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        if let Some((level, message, fields)) = self.line(text.trim_end()) {
            event(&level, &message, Value::Object(fields));
        }
    }

    /// A guest's line as the host logs it: its level, its message and its other fields; none
    /// for an empty line.
    fn line(&self, text: &str) -> Option<(String, String, Map<String, Value>)> {
        if text.is_empty() {
            return None;
        }
        let default_level = if self.stream == "stderr" { "warn" } else { "info" };
        let (level, message, mut fields) = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut guest)) => {
                let level = match guest.remove("level") {
                    Some(Value::String(level)) => level,
                    _ => default_level.to_owned(),
                };
                let message = match guest.remove("msg").or_else(|| guest.remove("message")) {
                    Some(Value::String(message)) => message,
                    _ => "guest log".to_owned(),
                };
                (level, message, guest)
            }
            _ => (default_level.to_owned(), text.to_owned(), Map::new()),
        };
        fields.insert("component".into(), json!(&*self.component));
        fields.insert("stream".into(), json!(self.stream));
        if let Some(span) = &self.span {
            fields.insert("trace_id".into(), json!(span.trace_id));
            fields.insert("span_id".into(), json!(span.span_id));
            match &span.parent_span_id {
                Some(parent) => fields.insert("parent_span_id".into(), json!(parent)),
                None => fields.remove("parent_span_id"),
            };
        }
        Some((level, message, fields))
    }
}

impl wasmtime_wasi::cli::IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter { output: self.clone(), pending: Vec::new() })
    }

    /// A stream the guest writes into directly. The default adapter runs every stream through
    /// a task of its own and makes each flush wait for it; with a log line per request that
    /// halved the throughput of the write routes under load.
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(LineWriter { output: self.clone(), pending: Vec::new() })
    }
}

struct LineWriter {
    output: GuestOutput,
    pending: Vec<u8>,
}

impl LineWriter {
    fn flush_lines(&mut self) {
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            self.output.emit(&line);
        }
        // A guest that never writes a newline must not grow this buffer without bound.
        if self.pending.len() > 16 * 1024 {
            let line = std::mem::take(&mut self.pending);
            self.output.emit(&line);
        }
    }
}

/// How much a guest may write at once; a line longer than the line buffer's cap is emitted
/// in pieces anyway.
const WRITE_BUDGET: usize = 64 * 1024;

impl wasmtime_wasi::p2::OutputStream for LineWriter {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), wasmtime_wasi::p2::StreamError> {
        self.pending.extend_from_slice(&bytes);
        self.flush_lines();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), wasmtime_wasi::p2::StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, wasmtime_wasi::p2::StreamError> {
        Ok(WRITE_BUDGET)
    }
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for LineWriter {
    /// Always ready: a write never waits.
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(mut self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        self.flush_lines();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let rest = std::mem::take(&mut self.pending);
        self.output.emit(&rest);
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        let rest = std::mem::take(&mut self.pending);
        self.output.emit(&rest);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const GUEST_LINE: &str = r#"{"level":"info","msg":"request","component":"pending","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"1111111111111111","parent_span_id":"2222222222222222","status":201}"#;

    #[test]
    fn a_recorded_component_span_names_the_guests_lines() {
        let span = LineSpan {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".to_owned(),
            span_id: "3333333333333333".to_owned(),
            parent_span_id: Some("2222222222222222".to_owned()),
        };
        let output = GuestOutput::new(Arc::from("pending"), "stderr", Some(Arc::new(span)));
        let (level, message, fields) = output.line(GUEST_LINE).expect("a line");
        assert_eq!((level.as_str(), message.as_str()), ("info", "request"));
        assert_eq!(fields["span_id"], "3333333333333333", "the exported span's id, not the guest's own");
        assert_eq!(fields["parent_span_id"], "2222222222222222");
        assert_eq!(fields["status"], 201);
        let (_, plain, fields) = output.line("not JSON").expect("a line");
        assert_eq!(plain, "not JSON");
        assert_eq!(fields["span_id"], "3333333333333333", "a plain line is in the span too");
    }

    #[test]
    fn without_a_recorded_span_the_guests_ids_stay() {
        let output = GuestOutput::new(Arc::from("pending"), "stderr", None);
        let (_, message, fields) = output.line(GUEST_LINE).expect("a line");
        assert_eq!(message, "request");
        assert_eq!(fields["span_id"], "1111111111111111");
        assert_eq!(fields["parent_span_id"], "2222222222222222");
        assert!(output.line("").is_none());
    }
}

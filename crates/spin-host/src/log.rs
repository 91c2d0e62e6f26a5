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

/// A guest's stdout or stderr: each line it writes becomes a log line tagged with the component.
/// A guest line that is already a JSON object becomes the line itself: its fields stay at the
/// top level beside `ts`, its `level` and `message` are the line's, and `component` is the id
/// the application gives the component.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    component: std::sync::Arc<str>,
    stream: &'static str,
}

impl GuestOutput {
    pub(crate) fn new(component: std::sync::Arc<str>, stream: &'static str) -> GuestOutput {
        GuestOutput { component, stream }
    }

    fn emit(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        let default_level = if self.stream == "stderr" { "warn" } else { "info" };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut guest)) => {
                let level = match guest.remove("level") {
                    Some(Value::String(level)) => level,
                    _ => default_level.to_owned(),
                };
                let message = match guest.remove("message").or_else(|| guest.remove("msg")) {
                    Some(Value::String(message)) => message,
                    _ => "guest log".to_owned(),
                };
                guest.insert("component".into(), json!(&*self.component));
                guest.insert("stream".into(), json!(self.stream));
                event(&level, &message, Value::Object(guest));
            }
            _ => event(default_level, text, json!({"component": &*self.component, "stream": self.stream})),
        }
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

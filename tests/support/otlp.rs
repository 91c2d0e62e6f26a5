//! An OpenTelemetry collector's receiving end, as the tests need it: OTLP over HTTP/protobuf
//! (`POST /v1/traces`), each export decoded with the protocol's official generated types and
//! answered as the protocol says. What it received is kept, one [`ReceivedSpan`] per span.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

use crate::http_server::{Exchange, Reply, serve_on};

/// One span as exported, with its resource's service name.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub service: String,
    pub name: String,
    /// Lowercase hex, as in `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a span with no parent.
    pub parent_span_id: String,
    /// `SpanKind` as the protocol numbers it: 2 server, 3 client.
    pub kind: i32,
    /// Every attribute's value as text (numbers in decimal).
    pub attributes: BTreeMap<String, String>,
    /// `StatusCode` as the protocol numbers it: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
}

pub const SERVER: i32 = 2;
pub const CLIENT: i32 = 3;

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The receiver, on a free loopback port.
pub struct Collector {
    /// Its base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    pub async fn start() -> Result<Collector> {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (kept, problems) = (spans.clone(), refused.clone());
        let url = serve_on("127.0.0.1:0", move |exchange: Exchange| {
            let (kept, problems) = (kept.clone(), problems.clone());
            async move { receive(&exchange, &kept, &problems) }
        })
        .await?;
        Ok(Collector { url, spans, refused })
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().map(|spans| spans.clone()).unwrap_or_default()
    }

    /// Exports that were not the protocol's (wrong path, type or body), described.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().map(|refused| refused.clone()).unwrap_or_default()
    }

    /// Polls until `done` holds for the spans of trace `trace_id`, and answers them; fails
    /// with what arrived after `timeout`.
    pub async fn wait_for_trace(
        &self,
        trace_id: &str,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Result<Vec<ReceivedSpan>> {
        let deadline = Instant::now() + timeout;
        loop {
            let trace: Vec<ReceivedSpan> = self.spans().into_iter().filter(|span| span.trace_id == trace_id).collect();
            if done(&trace) {
                return Ok(trace);
            }
            if Instant::now() > deadline {
                let names: Vec<String> = trace.iter().map(|s| format!("{}: {}", s.service, s.name)).collect();
                bail!("the trace did not complete within {timeout:?}; it holds {} spans: {names:#?}", trace.len());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn receive(exchange: &Exchange, kept: &Mutex<Vec<ReceivedSpan>>, refused: &Mutex<Vec<String>>) -> Reply {
    let refuse = |problem: String| {
        if let Ok(mut refused) = refused.lock() {
            refused.push(problem);
        }
        Reply::bytes(400, "text/plain", Vec::new())
    };
    if exchange.method != "POST" || exchange.path != "/v1/traces" {
        return refuse(format!("{} {}", exchange.method, exchange.path));
    }
    if exchange.header("content-type") != Some("application/x-protobuf") {
        return refuse(format!("content-type {:?}", exchange.header("content-type")));
    }
    let request = match ExportTraceServiceRequest::decode(exchange.body.as_slice()) {
        Ok(request) => request,
        Err(e) => return refuse(format!("undecodable export: {e}")),
    };
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| r.attributes).unwrap_or_default();
        let service = attributes(&resource).remove("service.name").unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    kind: span.kind,
                    attributes: attributes(&span.attributes),
                    status: span.status.map(|s| s.code).unwrap_or_default(),
                    start_unix_nanos: span.start_time_unix_nano,
                    end_unix_nanos: span.end_time_unix_nano,
                });
            }
        }
    }
    if let Ok(mut kept) = kept.lock() {
        kept.extend(spans);
    }
    Reply::bytes(200, "application/x-protobuf", ExportTraceServiceResponse::default().encode_to_vec())
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map(text).unwrap_or_default())).collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// One trace drawn as a waterfall (SVG): a row per span in tree order, indented by depth, with
/// its service, name and Gatehouse attributes, and a bar from its start to its end. docs/
/// shows the seed conversation's (docs/observability.md).
pub fn waterfall_svg(trace: &[ReceivedSpan]) -> String {
    const ROW: usize = 18;
    const LABEL: usize = 620;
    const BARS: usize = 560;
    let start = trace.iter().map(|s| s.start_unix_nanos).min().unwrap_or_default();
    let end = trace.iter().map(|s| s.end_unix_nanos).max().unwrap_or(start + 1).max(start + 1);
    let known: std::collections::HashSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    let mut rows: Vec<(usize, &ReceivedSpan)> = Vec::new();
    let mut roots: Vec<&ReceivedSpan> = trace.iter().filter(|s| !known.contains(s.parent_span_id.as_str())).collect();
    roots.sort_by_key(|s| s.start_unix_nanos);
    let mut stack: Vec<(usize, &ReceivedSpan)> = roots.into_iter().rev().map(|s| (0, s)).collect();
    while let Some((depth, span)) = stack.pop() {
        rows.push((depth, span));
        let mut children: Vec<&ReceivedSpan> = trace.iter().filter(|c| c.parent_span_id == span.span_id).collect();
        children.sort_by_key(|c| std::cmp::Reverse(c.start_unix_nanos));
        stack.extend(children.into_iter().map(|c| (depth + 1, c)));
    }
    let height = (rows.len() + 2) * ROW;
    let width = LABEL + BARS + 20;
    let total_ms = (end - start) as f64 / 1e6;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"monospace\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"4\" y=\"13\" font-weight=\"bold\">trace {} ({} spans, {total_ms:.0} ms)</text>\n",
        trace.first().map(|s| s.trace_id.as_str()).unwrap_or_default(),
        trace.len()
    );
    for (row, (depth, span)) in rows.iter().enumerate() {
        let y = (row + 1) * ROW;
        let color = match (span.service.as_str(), span.attributes.contains_key("db.system.name")) {
            (_, true) => "#9e9e9e",
            ("gatehouse-edge", _) => "#1f77b4",
            _ => "#ff7f0e",
        };
        let mut label =
            format!("{}{}: {}", "  ".repeat(*depth), span.service.trim_start_matches("gatehouse-"), span.name);
        for key in ["gatehouse.tool.operation", "gatehouse.tool.outcome", "http.response.status_code"] {
            if let Some(value) = span.attribute(key) {
                label.push_str(&format!(" {}={value}", key.rsplit('.').next().unwrap_or(key)));
            }
        }
        let label: String = label.chars().take(96).collect();
        let x =
            LABEL as f64 + (span.start_unix_nanos.saturating_sub(start)) as f64 / (end - start) as f64 * BARS as f64;
        let w = ((span.end_unix_nanos.saturating_sub(span.start_unix_nanos)) as f64 / (end - start) as f64
            * BARS as f64)
            .max(1.0);
        let escaped = label.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        svg.push_str(&format!(
            "<text x=\"4\" y=\"{}\" xml:space=\"preserve\">{escaped}</text>\n<rect x=\"{x:.1}\" y=\"{}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"/>\n",
            y + 13,
            y + 3,
            ROW - 6
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

//! Traces over OTLP (docs/architecture.md, "Traces"): the exporter `gatehouse up` installs when
//! the standard OpenTelemetry variables name a collector, and the application's own facts on
//! each component's span (the tool, the call, the outcome) and in the metrics (the tools'
//! operations by outcome, what each outbound request is).
//!
//! The host (`gatehouse-spin-host`) makes the spans; this module decides where they go. Without
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) nothing is installed
//! and every span is a no-op.
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use gatehouse_domain::contract::{self, CALL_ID_HEADER, CONTRACT_PATH, Operation, TOOL_HEADER};
use gatehouse_spin_host::{ComponentFacts, RequestFacts, TelemetryHooks};
use http::{HeaderMap, StatusCode};
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use prometheus::{IntCounterVec, Opts, Registry};

/// The service name spans carry when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES`
/// names one.
const SERVICE_NAME: &str = "gatehouse";
/// The longest answer read from a collector: it answers an export with a small status.
const MAX_COLLECTOR_ANSWER_BYTES: usize = 64 * 1024;
/// How long shutdown waits for the last spans to reach the collector.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest label taken from a request header into a span.
const MAX_LABEL_CHARS: usize = 128;
/// A tool operation's outcomes, as [`contract_outcome`] reads them from the status code.
const OUTCOMES: [&str; 3] = ["ok", "rejected", "crashed"];

/// The installed exporter, if any; [`Traces::shutdown`] sends what is still batched.
pub(crate) struct Traces {
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    /// Installs an OTLP exporter (HTTP/protobuf) as the global tracer provider when the
    /// environment names a collector; otherwise installs nothing.
    pub(crate) fn start_from_env() -> Result<Traces> {
        let set = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        if disabled || endpoint.is_none() {
            return Ok(Traces { provider: None });
        }
        if let Some(exporter) = set("OTEL_TRACES_EXPORTER").filter(|v| !v.eq_ignore_ascii_case("otlp")) {
            bail!("OTEL_TRACES_EXPORTER={exporter}: gatehouse exports traces over OTLP only (otlp or none)");
        }
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol.filter(|p| p != "http/protobuf") {
            bail!("OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: gatehouse exports traces over http/protobuf only");
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(CollectorClient::new()?)
            .build()
            .context("the OTLP trace exporter")?;
        let mut resource = Resource::builder();
        let named = set("OTEL_SERVICE_NAME").is_some()
            || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| attributes.contains("service.name="));
        if !named {
            resource = resource.with_service_name(SERVICE_NAME);
        }
        let resource = resource.with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))]).build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        Ok(Traces { provider: Some(provider) })
    }

    /// Sends the spans still batched, within a few seconds.
    pub(crate) async fn shutdown(self) {
        let Some(provider) = self.provider else { return };
        // The SDK's shutdown blocks its caller until its export thread is done.
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT)).await;
        if let Ok(Err(e)) = flushed {
            gatehouse_spin_host::log::warn(
                "the last spans were not exported",
                serde_json::json!({"error": e.to_string()}),
            );
        }
    }
}

/// The exporter's HTTP client: the runner's own (reqwest, TLS over rustls with the web's roots),
/// driven on the runner's runtime, since the SDK exports from a thread of its own.
#[derive(Debug)]
struct CollectorClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl CollectorClient {
    fn new() -> Result<CollectorClient> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .build()
            .context("the OTLP exporter's HTTP client")?;
        Ok(CollectorClient { client, runtime: tokio::runtime::Handle::current() })
    }
}

#[async_trait::async_trait]
impl HttpClient for CollectorClient {
    async fn send_bytes(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let exchange = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let mut response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_COLLECTOR_ANSWER_BYTES {
                    return Err::<_, HttpError>("the collector's answer is too long".into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(Bytes::from(body))?)
        });
        exchange.await?
    }
}

/// Gatehouse's facts on each component's span: the call a request is about, and for the tool
/// contract the tool, the operation and its outcome; and the count of the tools' operations.
pub(crate) struct GatehouseTelemetry {
    tool_operations: IntCounterVec,
}

impl GatehouseTelemetry {
    /// The facts, with the tools' operations counted in `registry`.
    pub(crate) fn hooks(registry: &Registry) -> Result<Arc<dyn TelemetryHooks>> {
        let tool_operations = IntCounterVec::new(
            Opts::new(
                "gatehouse_tool_operations_total",
                "Tool contract operations this host's tool components answered, by component, operation and \
                 outcome (ok, rejected, crashed).",
            ),
            &["component", "operation", "outcome"],
        )?;
        registry.register(Box::new(tool_operations.clone()))?;
        Ok(Arc::new(GatehouseTelemetry { tool_operations }))
    }
}

/// A header's value as a span label: bounded, and only when it is text.
fn label(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    Some(value.chars().take(MAX_LABEL_CHARS).collect())
}

/// An operation's outcome, from the status code that carries it (crates/domain/src/contract.rs).
fn contract_outcome(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=299 => OUTCOMES[0],
        422 => OUTCOMES[1],
        _ => OUTCOMES[2],
    }
}

/// Whether `component` is a tool, whose operations are counted from 0: the manifest serves its
/// contract at `contract::tool_host_route`.
fn is_tool(component: &ComponentFacts<'_>) -> bool {
    component.routes.iter().any(|route| contract::tool_of_host_route(route) == Some(component.id))
}

/// The contract operation a request's path names (`.../tool/execute`), if it is one.
fn contract_operation(path: &str) -> Option<Operation> {
    let (before, operation) = path.rsplit_once('/')?;
    before.ends_with(CONTRACT_PATH).then(|| Operation::parse(operation)).flatten()
}

impl TelemetryHooks for GatehouseTelemetry {
    fn request_attributes(&self, request: &RequestFacts<'_>) -> Vec<KeyValue> {
        let mut attributes = Vec::new();
        let call = label(request.headers, CALL_ID_HEADER).or_else(|| {
            request
                .params
                .iter()
                .find(|(name, _)| name == "id")
                .map(|(_, id)| id.chars().take(MAX_LABEL_CHARS).collect())
        });
        if let Some(call) = call {
            attributes.push(KeyValue::new("gatehouse.call.id", call));
        }
        if let Some(operation) = contract_operation(request.path) {
            attributes.push(KeyValue::new("gatehouse.tool.operation", operation.as_str()));
            if let Some(tool) = label(request.headers, TOOL_HEADER) {
                attributes.push(KeyValue::new("gatehouse.tool.name", tool));
            }
        }
        attributes
    }

    fn response_attributes(
        &self,
        request: &RequestFacts<'_>,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Vec<KeyValue> {
        let mut attributes = Vec::new();
        if label(request.headers, CALL_ID_HEADER).is_none()
            && let Some(call) = label(headers, CALL_ID_HEADER)
        {
            attributes.push(KeyValue::new("gatehouse.call.id", call));
        }
        if contract_operation(request.path).is_some() {
            attributes.push(KeyValue::new("gatehouse.tool.outcome", contract_outcome(status)));
        }
        attributes
    }

    fn answered(&self, request: &RequestFacts<'_>, status: StatusCode) {
        // A refused signature is no operation of the tool's, and its labels are the caller's.
        if let Some(operation) = contract_operation(request.path)
            && !matches!(status.as_u16(), 401 | 403)
        {
            let outcome = contract_outcome(status);
            self.tool_operations.with_label_values(&[request.component, operation.as_str(), outcome]).inc();
        }
    }

    /// Each tool's operations at 0 for every operation and outcome, so the first crash is an
    /// increase Prometheus sees (docs/architecture.md, "Metrics").
    fn loaded(&self, components: &[ComponentFacts<'_>]) {
        for component in components.iter().filter(|component| is_tool(component)) {
            for operation in Operation::ALL {
                for outcome in OUTCOMES {
                    self.tool_operations.with_label_values(&[component.id, operation.as_str(), outcome]);
                }
            }
        }
    }

    fn outbound_kind(&self, path: &str, headers: &HeaderMap) -> &'static str {
        if headers.contains_key(gatehouse_domain::callback::SIGNATURE_HEADER) {
            "callback"
        } else if contract_operation(path).is_some() {
            "tool"
        } else if path == gatehouse_domain::service_auth::EXECUTOR_DRIVE_PATH {
            "executor"
        } else {
            "other"
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus::Encoder as _;

    use super::*;

    #[test]
    fn a_contract_operation_is_read_from_the_last_segment_after_the_contract_path() {
        assert_eq!(contract_operation("/tool/execute"), Some(Operation::Execute));
        assert_eq!(contract_operation("/internal/tools/gmail/tool/prepare"), Some(Operation::Prepare));
        assert_eq!(contract_operation("/internal/tools/gmail/tool/nothing"), None);
        assert_eq!(contract_operation("/voice-tools/confirm/abc"), None);
        assert_eq!(contract_operation("/mytool/execute"), None);
    }

    #[test]
    fn a_tools_operations_exist_at_zero_from_the_start_and_nothing_else_does() {
        let registry = Registry::new();
        let telemetry = GatehouseTelemetry::hooks(&registry).expect("fresh registry");
        telemetry.loaded(&[
            ComponentFacts { id: "gmail", routes: vec!["/execute-gmail", "/internal/tools/gmail/..."] },
            ComponentFacts { id: "pending", routes: vec!["/voice-tools/pending"] },
            ComponentFacts { id: "sweeper", routes: vec!["/internal/tools/gmail/..."] },
        ]);
        let mut text = Vec::new();
        prometheus::TextEncoder::new().encode(&registry.gather(), &mut text).expect("text format");
        let text = String::from_utf8(text).expect("UTF-8");
        let series: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
        assert_eq!(series.len(), Operation::ALL.len() * OUTCOMES.len(), "{text}");
        let crashed = r#"gatehouse_tool_operations_total{component="gmail",operation="execute",outcome="crashed"} 0"#;
        assert!(series.contains(&crashed), "{text}");
        assert!(!text.contains("pending") && !text.contains("sweeper"), "{text}");
    }
}

//! Spans and metrics of what the host does for its guests. Spans follow OpenTelemetry's semantic
//! conventions (docs/architecture.md, "Traces"): one for each component's run (a request from the
//! network or from another component), one for each request a guest sends (to another component
//! or to the network), and one for each SQL statement. The same three points count the host's
//! metrics (src/metrics.rs).
//!
//! Spans go to OpenTelemetry's global tracer provider. The program around the host installs one
//! that exports them (the CLI does when `OTEL_EXPORTER_OTLP_ENDPOINT` is set); without it every
//! span is a no-op, and requests carry their `traceparent` on unchanged.
//!
//! The trace context travels in the W3C `traceparent` header. A component's span continues the
//! request's; its guest sees the component's span as its parent, and the guest's log lines
//! carry the component's span as theirs (the host writes its ids into them, src/log.rs, since a
//! guest cannot tell the host's span from its caller's); a request the guest sends is a child
//! of the component's span, or of the trace the guest names itself (a stored call's own trace),
//! and carries the request's span on to the next hop.
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use http::{HeaderMap, Request, StatusCode};
use opentelemetry::global::BoxedTracer;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;

use crate::log::LineSpan;

/// The name a span starts with, replaced once it is known to be recorded.
const UNNAMED: &str = "request";
/// The instrumentation scope the spans are recorded under.
const SCOPE: &str = "gatehouse-spin-host";
/// How much of a statement's text a span keeps: the application's SQL is parameterized, so the
/// text holds no value, but a span must stay small.
const MAX_STATEMENT_CHARS: usize = 2_000;

/// The application's own part in the telemetry, which a generic host cannot know: implemented
/// by the program around the host (the CLI adds the tool, the call and the outcome to spans,
/// and counts the tools' operations), and given to [`crate::AppConfig`].
pub trait TelemetryHooks: Send + Sync {
    /// Attributes of a component's span, from the request it serves; asked only of a recorded
    /// span.
    fn request_attributes(&self, request: &RequestFacts<'_>) -> Vec<KeyValue>;
    /// Attributes of a component's span, from its answer's head; asked only of a recorded span.
    fn response_attributes(&self, request: &RequestFacts<'_>, status: StatusCode, headers: &HeaderMap)
    -> Vec<KeyValue>;
    /// Told of every answer, recorded or not, for the application's own metrics.
    fn answered(&self, request: &RequestFacts<'_>, status: StatusCode);
    /// What a request a guest sends is to the application (`callback`, `tool`), for the
    /// outbound requests' metric; `other` when it is nothing in particular.
    fn outbound_kind(&self, path: &str, headers: &HeaderMap) -> &'static str;
    /// Told once, when the application loads, which components it serves, so the
    /// application's counters can show each of them at 0 from the first scrape.
    fn loaded(&self, components: &[ComponentFacts<'_>]);
}

/// What the host knows of a component when the application loads.
#[derive(Debug)]
pub struct ComponentFacts<'a> {
    /// The component's id in the manifest.
    pub id: &'a str,
    /// Its public routes as the manifest writes them (`/internal/tools/gmail/...`); none for a
    /// component reached by service chaining only.
    pub routes: Vec<&'a str>,
}

/// What the host knows of a request a component serves.
#[derive(Debug)]
pub struct RequestFacts<'a> {
    /// The component's id in the manifest.
    pub component: &'a str,
    pub method: &'a http::Method,
    pub path: &'a str,
    /// The route's parameters (`:id` of `/voice-tools/confirm/:id`), by name.
    pub params: &'a [(String, String)],
    pub headers: &'a HeaderMap,
}

/// Adds nothing: a host whose program gives no [`TelemetryHooks`].
pub(crate) struct NoHooks;

impl TelemetryHooks for NoHooks {
    fn request_attributes(&self, _request: &RequestFacts<'_>) -> Vec<KeyValue> {
        Vec::new()
    }

    fn response_attributes(
        &self,
        _request: &RequestFacts<'_>,
        _status: StatusCode,
        _headers: &HeaderMap,
    ) -> Vec<KeyValue> {
        Vec::new()
    }

    fn answered(&self, _request: &RequestFacts<'_>, _status: StatusCode) {}

    fn outbound_kind(&self, _path: &str, _headers: &HeaderMap) -> &'static str {
        "other"
    }

    fn loaded(&self, _components: &[ComponentFacts<'_>]) {}
}

/// What spans and metrics are made with: the host's metrics and the application's facts.
pub(crate) struct Telemetry {
    pub(crate) metrics: crate::metrics::HostMetrics,
    pub(crate) hooks: Arc<dyn TelemetryHooks>,
}

/// One guest's part of the telemetry: its component's span, which the spans of its statements
/// and requests are children of, and what counts them.
#[derive(Clone)]
pub(crate) struct GuestTelemetry {
    cx: Context,
    component: Arc<str>,
    telemetry: Arc<Telemetry>,
    /// The component's span as the guest's log lines name it, when the span is recorded.
    line_span: Option<Arc<LineSpan>>,
}

impl GuestTelemetry {
    /// A guest with no span and metrics of its own (a unit test's store).
    #[cfg(test)]
    pub(crate) fn detached() -> GuestTelemetry {
        let metrics =
            crate::metrics::HostMetrics::register(&prometheus::Registry::new(), ["test"]).expect("fresh registry");
        let telemetry = Arc::new(Telemetry { metrics, hooks: Arc::new(NoHooks) });
        GuestTelemetry { cx: Context::new(), component: Arc::from("test"), telemetry, line_span: None }
    }

    /// The span the guest's log lines belong to: the component's, when it is recorded; none
    /// when it is not, and the guest's lines keep the ids the guest gave them.
    pub(crate) fn line_span(&self) -> Option<Arc<LineSpan>> {
        self.line_span.clone()
    }

    /// Starts the span of a request the guest sends, and puts its trace context on the request.
    /// `chained` says whether another component of this application serves it.
    pub(crate) fn outbound<B>(&self, request: &mut Request<B>, chained: bool) -> OutboundSpan {
        let kind = self.telemetry.hooks.outbound_kind(request.uri().path(), request.headers());
        OutboundSpan::start(self, request, chained, kind)
    }

    /// Starts the span of a statement the guest runs.
    pub(crate) fn statement(&self, statement: &str) -> StatementSpan {
        StatementSpan::start(self, statement)
    }
}

fn tracer() -> &'static BoxedTracer {
    static TRACER: OnceLock<BoxedTracer> = OnceLock::new();
    TRACER.get_or_init(|| opentelemetry::global::tracer(SCOPE))
}

fn propagator() -> &'static TraceContextPropagator {
    static PROPAGATOR: OnceLock<TraceContextPropagator> = OnceLock::new();
    PROPAGATOR.get_or_init(TraceContextPropagator::new)
}

/// The trace context a request's headers carry; empty when they carry none (or a malformed one).
fn extract(headers: &HeaderMap) -> Context {
    propagator().extract(&HeaderExtractor(headers))
}

/// Writes `cx`'s span into `headers` as `traceparent`, replacing what was there, when the span
/// is recorded; an unrecorded span leaves the headers as they are.
fn inject(cx: &Context, headers: &mut HeaderMap) {
    if cx.span().is_recording() {
        propagator().inject_context(cx, &mut HeaderInjector(headers));
    }
}

/// The span of one component's run: from its request's arrival to the end of any work the guest
/// goes on with after answering (the answer is an event within it).
pub(crate) struct ComponentSpan {
    guest: GuestTelemetry,
    request: OwnedFacts,
    /// The route for the metrics: the manifest's, or `chained`.
    route: String,
    arrived: Instant,
}

/// [`RequestFacts`] kept until the answer, for [`TelemetryHooks::answered`].
struct OwnedFacts {
    component: Arc<str>,
    method: http::Method,
    path: String,
    params: Vec<(String, String)>,
    /// The request's headers, kept only when the span is recorded: they only feed its attributes.
    headers: HeaderMap,
}

impl OwnedFacts {
    fn view(&self) -> RequestFacts<'_> {
        RequestFacts {
            component: &self.component,
            method: &self.method,
            path: &self.path,
            params: &self.params,
            headers: &self.headers,
        }
    }
}

impl ComponentSpan {
    /// Starts the span of `component` serving `request`, in the trace the request's
    /// `traceparent` names (or a new one), and hands the guest the span as its parent.
    /// `route` is the manifest's route (`None` for a private component reached by chaining);
    /// `client` is the network peer, if the request came from one; `arrived` is when the
    /// request did, which its deadline also counts from.
    pub(crate) fn start<B>(
        component: Arc<str>,
        route: Option<&str>,
        params: Vec<(String, String)>,
        client: Option<std::net::SocketAddr>,
        arrived: Instant,
        request: &mut Request<B>,
        telemetry: Arc<Telemetry>,
    ) -> ComponentSpan {
        let parent = extract(request.headers());
        // A span's name and attributes cost allocations on every request: an unrecorded span
        // (no exporter installed, or not sampled) gets neither. Samplers see no name or
        // attributes here; the default one (parent-based, always on) reads neither.
        let span = tracer().span_builder(UNNAMED).with_kind(SpanKind::Server).start_with_context(tracer(), &parent);
        let cx = parent.with_span(span);
        let recording = cx.span().is_recording();
        let headers = if recording { request.headers().clone() } else { HeaderMap::new() };
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let facts = OwnedFacts { component, method, path, params, headers };
        if recording {
            let name = match route {
                Some(route) => format!("{} {route}", facts.method),
                None => format!("{} {}", facts.method, facts.component),
            };
            let mut fields = vec![
                KeyValue::new("http.request.method", facts.method.to_string()),
                KeyValue::new("url.path", facts.path.clone()),
                KeyValue::new("url.scheme", "http"),
                KeyValue::new("gatehouse.component", facts.component.to_string()),
            ];
            if let Some(route) = route {
                fields.push(KeyValue::new("http.route", route.to_owned()));
            }
            if let Some(client) = client {
                fields.push(KeyValue::new("client.address", client.ip().to_string()));
                fields.push(KeyValue::new("client.port", i64::from(client.port())));
            }
            fields.extend(telemetry.hooks.request_attributes(&facts.view()));
            let span = cx.span();
            span.update_name(name);
            span.set_attributes(fields);
            inject(&cx, request.headers_mut());
        }
        let line_span = recording.then(|| {
            let parent = parent.span().span_context().clone();
            let own = cx.span().span_context().clone();
            Arc::new(LineSpan {
                trace_id: own.trace_id().to_string(),
                span_id: own.span_id().to_string(),
                parent_span_id: parent.is_valid().then(|| parent.span_id().to_string()),
            })
        });
        let route = route.unwrap_or("chained").to_owned();
        let guest = GuestTelemetry { cx, component: facts.component.clone(), telemetry, line_span };
        ComponentSpan { guest, request: facts, route, arrived }
    }

    /// The guest's part: what its statements' and requests' spans are children of.
    pub(crate) fn guest(&self) -> GuestTelemetry {
        self.guest.clone()
    }

    /// Records the answer's head.
    pub(crate) fn answered(&self, status: StatusCode, headers: &HeaderMap) {
        let telemetry = &self.guest.telemetry;
        let seconds = self.arrived.elapsed().as_secs_f64();
        telemetry.metrics.answered(&self.guest.component, &self.route, status.as_u16(), seconds);
        telemetry.hooks.answered(&self.request.view(), status);
        let span = self.guest.cx.span();
        if !span.is_recording() {
            return;
        }
        let attributes = telemetry.hooks.response_attributes(&self.request.view(), status, headers);
        span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status.as_u16())));
        span.set_attributes(attributes);
        if status.is_server_error() {
            span.set_attribute(KeyValue::new("error.type", status.as_u16().to_string()));
            span.set_status(Status::error(""));
        }
        span.add_event("answered", Vec::new());
    }

    /// Records why the run failed (a trap, a deadline), before or after it answered. The error's
    /// text stays in the log: it can quote what a guest held.
    pub(crate) fn failed(&self, error_type: &'static str) {
        let metrics = &self.guest.telemetry.metrics;
        match error_type {
            DEADLINE_EXCEEDED => metrics.deadline_exceeded(&self.guest.component),
            _ => metrics.failed(&self.guest.component),
        }
        let span = self.guest.cx.span();
        span.set_attribute(KeyValue::new("error.type", error_type));
        span.set_status(Status::error(error_type));
    }
}

/// The span ends when both the guest's run and the recording of its answer are done: the
/// dispatch and the guest's task each hold it.
impl Drop for ComponentSpan {
    fn drop(&mut self) {
        self.guest.cx.span().end();
    }
}

/// The `error.type` of a guest stopped at its deadline.
pub(crate) const DEADLINE_EXCEEDED: &str = "deadline_exceeded";

/// The span of one request a guest sends: to another component (service chaining) or to the
/// network (another host, Gmail, a relay's callback).
pub(crate) struct OutboundSpan {
    cx: Context,
    /// The sending guest, which counts the request.
    guest: GuestTelemetry,
    /// What the request is to the application ([`TelemetryHooks::outbound_kind`]).
    kind: &'static str,
    chained: bool,
}

impl OutboundSpan {
    /// Starts the span of `request`, a child of `component` (the sending guest's span), or of
    /// the trace the guest's own `traceparent` names when that is another trace: work on a
    /// stored call continues the call's trace. The request then carries this span on.
    fn start<B>(guest: &GuestTelemetry, request: &mut Request<B>, chained: bool, kind: &'static str) -> OutboundSpan {
        let component = &guest.cx;
        let named = extract(request.headers());
        let named_trace = named.span().span_context().trace_id();
        let parent =
            if named.span().span_context().is_valid() && named_trace != component.span().span_context().trace_id() {
                named
            } else {
                component.clone()
            };
        let uri = request.uri();
        let method = request.method().to_string();
        // Another component's paths are the application's own, with no id in them; a path on
        // the network may hold anything, so it stays out of the span's name.
        let name = if chained { format!("{method} {}", uri.path()) } else { method.clone() };
        let span = tracer().span_builder(name).with_kind(SpanKind::Client).start_with_context(tracer(), &parent);
        let cx = parent.with_span(span);
        let outbound = OutboundSpan { cx, guest: guest.clone(), kind, chained };
        if !outbound.cx.span().is_recording() {
            return outbound;
        }
        let host = uri.host().unwrap_or_default().to_owned();
        let scheme = uri.scheme_str().unwrap_or("http").to_owned();
        let port = uri.port_u16().or(match scheme.as_str() {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        });
        let explicit_port = uri.port_u16().map(|port| format!(":{port}")).unwrap_or_default();
        let mut fields = vec![
            KeyValue::new("http.request.method", method),
            KeyValue::new("server.address", host.clone()),
            // No query and no user info: either may carry a secret.
            KeyValue::new("url.full", format!("{scheme}://{host}{}{}", explicit_port, uri.path())),
        ];
        if let Some(port) = port {
            fields.push(KeyValue::new("server.port", i64::from(port)));
        }
        if chained {
            fields.push(KeyValue::new(
                "gatehouse.peer_component",
                host.trim_end_matches(crate::outbound::CHAINING_SUFFIX).to_owned(),
            ));
        }
        outbound.cx.span().set_attributes(fields);
        inject(&outbound.cx, request.headers_mut());
        outbound
    }

    fn count(&self, outcome: &str) {
        self.guest.telemetry.metrics.sent(&self.guest.component, self.kind, self.chained, outcome);
    }

    /// Ends the span with the answer's status.
    pub(crate) fn answered(self, status: StatusCode) {
        self.count(status.as_str());
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status.as_u16())));
        if status.is_client_error() || status.is_server_error() {
            span.set_attribute(KeyValue::new("error.type", status.as_u16().to_string()));
            span.set_status(Status::error(""));
        }
        span.end();
    }

    /// Ends the span of a request that got no answer.
    pub(crate) fn failed(self, error_type: impl Into<Cow<'static, str>>) {
        let error_type = error_type.into();
        self.count(&error_type);
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("error.type", error_type.clone()));
        span.set_status(Status::error(error_type));
        span.end();
    }
}

/// The span of one SQL statement a guest runs.
pub(crate) struct StatementSpan {
    cx: Context,
    guest: GuestTelemetry,
    started: Instant,
}

impl StatementSpan {
    /// Starts the span of `statement`, a child of the guest's span.
    fn start(guest: &GuestTelemetry, statement: &str) -> StatementSpan {
        let started = Instant::now();
        let component = &guest.cx;
        if !component.span().is_recording() {
            return StatementSpan { cx: component.clone(), guest: guest.clone(), started };
        }
        let operation = operation_name(statement);
        let text = gatehouse_domain::sql::statement_excerpt(statement, MAX_STATEMENT_CHARS);
        let span = tracer()
            .span_builder(operation.clone())
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("db.system.name", "postgresql"),
                KeyValue::new("db.operation.name", operation),
                KeyValue::new("db.query.text", text),
            ])
            .start_with_context(tracer(), component);
        StatementSpan { cx: component.with_span(span), guest: guest.clone(), started }
    }

    fn count(&self, ok: bool) {
        let metrics = &self.guest.telemetry.metrics;
        metrics.statement(&self.guest.component, ok).observe(self.started.elapsed().as_secs_f64());
    }

    /// Ends the span with the rows the statement returned or changed.
    pub(crate) fn succeeded(self, rows: u64) {
        self.count(true);
        let span = self.cx.span();
        if span.is_recording() {
            span.set_attribute(KeyValue::new("db.response.returned_rows", i64::try_from(rows).unwrap_or(i64::MAX)));
            span.end();
        }
    }

    /// Ends the span of a statement that failed: `code` is PostgreSQL's SQLSTATE, when it gave one.
    pub(crate) fn failed(self, code: Option<&str>) {
        self.count(false);
        let span = self.cx.span();
        if span.is_recording() {
            let code = code.unwrap_or("_OTHER").to_owned();
            span.set_attribute(KeyValue::new("db.response.status_code", code.clone()));
            span.set_attribute(KeyValue::new("error.type", code));
            span.set_status(Status::error(""));
            span.end();
        }
    }
}

/// The statement's operation: its first keyword (`SELECT`, `INSERT`, `WITH`), after comments.
fn operation_name(statement: &str) -> String {
    let excerpt = gatehouse_domain::sql::statement_excerpt(statement, 40);
    excerpt
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|word| !word.is_empty())
        .map(str::to_ascii_uppercase)
        .unwrap_or_else(|| "SQL".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The span the host hands the guest (the `traceparent` the guest reads) is the span whose
    /// ids the guest's lines carry, and the one the host records and exports. Sets the global
    /// tracer provider: nextest runs each test in a process of its own.
    #[test]
    fn the_guests_lines_name_the_recorded_component_span() {
        opentelemetry::global::set_tracer_provider(opentelemetry_sdk::trace::SdkTracerProvider::builder().build());
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let mut request = Request::builder()
            .uri("/voice-tools/pending")
            .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
            .body(())
            .expect("a request");
        let telemetry = GuestTelemetry::detached().telemetry;
        let started = Instant::now();
        let span = ComponentSpan::start(Arc::from("pending"), None, Vec::new(), None, started, &mut request, telemetry);
        let recorded = span.guest.cx.span().span_context().clone();
        assert!(span.guest.cx.span().is_recording(), "an installed provider records the span");
        let line = span.guest().line_span().expect("a recorded span names the guest's lines");
        assert_eq!(line.span_id, recorded.span_id().to_string(), "the line names the recorded span");
        assert_eq!(line.trace_id, trace);
        assert_eq!(line.parent_span_id.as_deref(), Some("00f067aa0ba902b7"), "the caller's span is its parent");
        let handed = request.headers().get("traceparent").and_then(|value| value.to_str().ok());
        assert_eq!(handed, Some(format!("00-{trace}-{}-01", line.span_id).as_str()), "the guest is handed that span");
    }

    #[test]
    fn a_statement_is_named_by_its_first_keyword() {
        assert_eq!(operation_name("-- The call's row.\nselect id FROM tool_calls"), "SELECT");
        assert_eq!(operation_name("  WITH moved AS (UPDATE x SET y = 1) SELECT 1"), "WITH");
        assert_eq!(operation_name(""), "SQL");
    }
}

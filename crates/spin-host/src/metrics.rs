//! The host's metrics, in Prometheus' registry (docs/architecture.md, "Metrics"): requests by
//! component, route and status with their latency, guests stopped at their deadline, requests
//! guests send, statements and their latency, guest instances and pooled connections in use.
//!
//! The program around the host gives the registry ([`crate::AppConfig`]) and serves it; the
//! host only counts. Labels are the manifest's names and status codes, never a path or an id,
//! so their number stays bounded.
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// Latency buckets, in seconds: from a millisecond (a cached read) to the default deadline.
const LATENCY_BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

pub(crate) struct HostMetrics {
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    deadline_exceeded: IntCounterVec,
    failures: IntCounterVec,
    outbound: IntCounterVec,
    statement_seconds: HistogramVec,
    pub(crate) instances_in_use: IntGauge,
    pub(crate) instances_max: IntGauge,
    pub(crate) pool_connections: IntGaugeVec,
}

impl HostMetrics {
    /// The host's metrics, registered in `registry`.
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<HostMetrics> {
        let latency = |name: &str, help: &str, labels: &[&str]| {
            HistogramVec::new(HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()), labels)
        };
        let metrics = HostMetrics {
            requests: IntCounterVec::new(
                Opts::new("gatehouse_requests_total", "Requests components answered, by component, route and status."),
                &["component", "route", "status"],
            )?,
            request_seconds: latency(
                "gatehouse_request_duration_seconds",
                "Time from a request's arrival to its answer's head, by component and route.",
                &["component", "route"],
            )?,
            deadline_exceeded: IntCounterVec::new(
                Opts::new("gatehouse_deadline_exceeded_total", "Guests stopped at their request's deadline."),
                &["component"],
            )?,
            failures: IntCounterVec::new(
                Opts::new("gatehouse_component_failures_total", "Guests that trapped or answered no response."),
                &["component"],
            )?,
            outbound: IntCounterVec::new(
                Opts::new(
                    "gatehouse_outbound_requests_total",
                    "Requests guests sent, by component, kind (what the application calls it), destination \
                     (chained or network) and outcome (the status code, or the failure).",
                ),
                &["component", "kind", "destination", "outcome"],
            )?,
            statement_seconds: latency(
                "gatehouse_sql_statement_duration_seconds",
                "Time of each SQL statement a guest ran, by component and outcome (ok or error).",
                &["component", "outcome"],
            )?,
            instances_in_use: IntGauge::new("gatehouse_guest_instances_in_use", "Component instances alive now.")?,
            instances_max: IntGauge::new(
                "gatehouse_guest_instances_max",
                "The most component instances alive at once.",
            )?,
            pool_connections: IntGaugeVec::new(
                Opts::new("gatehouse_db_pool_connections", "The guests' pooled database connections, by state."),
                &["state"],
            )?,
        };
        registry.register(Box::new(metrics.requests.clone()))?;
        registry.register(Box::new(metrics.request_seconds.clone()))?;
        registry.register(Box::new(metrics.deadline_exceeded.clone()))?;
        registry.register(Box::new(metrics.failures.clone()))?;
        registry.register(Box::new(metrics.outbound.clone()))?;
        registry.register(Box::new(metrics.statement_seconds.clone()))?;
        registry.register(Box::new(metrics.instances_in_use.clone()))?;
        registry.register(Box::new(metrics.instances_max.clone()))?;
        registry.register(Box::new(metrics.pool_connections.clone()))?;
        Ok(metrics)
    }

    pub(crate) fn answered(&self, component: &str, route: &str, status: u16, seconds: f64) {
        self.requests.with_label_values(&[component, route, &status.to_string()]).inc();
        self.request_seconds.with_label_values(&[component, route]).observe(seconds);
    }

    pub(crate) fn deadline_exceeded(&self, component: &str) {
        self.deadline_exceeded.with_label_values(&[component]).inc();
    }

    pub(crate) fn failed(&self, component: &str) {
        self.failures.with_label_values(&[component]).inc();
    }

    pub(crate) fn sent(&self, component: &str, kind: &str, chained: bool, outcome: &str) {
        let destination = if chained { "chained" } else { "network" };
        self.outbound.with_label_values(&[component, kind, destination, outcome]).inc();
    }

    pub(crate) fn statement(&self, component: &str, ok: bool) -> Histogram {
        self.statement_seconds.with_label_values(&[component, if ok { "ok" } else { "error" }])
    }
}

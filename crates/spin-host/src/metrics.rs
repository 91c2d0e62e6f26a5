//! The host's metrics, in Prometheus' registry (docs/architecture.md, "Metrics"): requests by
//! component, route and status with their latency, guests stopped at their deadline, requests
//! guests send, statements and their latency, guest instances and pooled connections in use.
//!
//! The program around the host gives the registry ([`crate::AppConfig`]) and serves it; the
//! host only counts. Labels are the manifest's names and status codes, never a path or an id,
//! so their number stays bounded. A counter whose labels are all known when the application
//! loads (the failures, by component) has each series at 0 from the start: Prometheus sees a
//! series only once it is exposed, so one born at 1 hides its first event from `increase()`
//! and from every alert built on it (docs/architecture.md, "Metrics").
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
    /// The host's metrics, registered in `registry`, with the failure counters of each of
    /// `components` (the ids in the manifest) at 0.
    pub(crate) fn register<'a>(
        registry: &Registry,
        components: impl IntoIterator<Item = &'a str>,
    ) -> prometheus::Result<HostMetrics> {
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
        for component in components {
            metrics.deadline_exceeded.with_label_values(&[component]);
            metrics.failures.with_label_values(&[component]);
        }
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

#[cfg(test)]
mod tests {
    use prometheus::{Encoder, TextEncoder};

    use super::*;

    /// What a scrape of `registry` shows, in Prometheus' text format.
    fn scrape(registry: &Registry) -> String {
        let mut text = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut text).expect("text format");
        String::from_utf8(text).expect("UTF-8")
    }

    #[test]
    fn each_components_failure_counters_exist_at_zero_before_any_failure() {
        let registry = Registry::new();
        let metrics = HostMetrics::register(&registry, ["pending", "gmail"]).expect("fresh registry");
        let first = scrape(&registry);
        for name in ["gatehouse_deadline_exceeded_total", "gatehouse_component_failures_total"] {
            for component in ["pending", "gmail"] {
                let line = format!("{name}{{component=\"{component}\"}} 0\n");
                assert!(first.contains(&line), "no {line:?} in\n{first}");
            }
        }
        metrics.deadline_exceeded("gmail");
        let after = scrape(&registry);
        assert!(after.contains("gatehouse_deadline_exceeded_total{component=\"gmail\"} 1\n"), "{after}");
    }
}

//! `/metrics` in Prometheus' text format, on a listener of its own (`gatehouse up
//! --metrics-listen`), never the public port (docs/architecture.md, "Metrics"); or, where the
//! components run under Spin, the database's gauges alone (`gatehouse metrics serve`).
//!
//! A scrape answers the host's counters (requests, latency, deadlines, outbound requests,
//! statements, instances, pooled connections, from `gatehouse-spin-host`), the tools'
//! operations this host served, gauges read from the database at that moment: calls waiting
//! in each state and the oldest of each, how far the sweeper is behind, and the reports
//! (callbacks) still owed; and the process's own series and the build's (src/metrics/process.rs).
//! Every database read is an index range over the open calls only.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use gatehouse_domain::Status;
use gatehouse_http_listener::{Answer, Serving};
use gatehouse_spin_host::App;
use http::{Method, StatusCode};
use http_body_util::Full;
use prometheus::{Encoder, Gauge, GaugeVec, IntGauge, Opts, Registry, TextEncoder};

use self::process::ProcessMetrics;

mod process;

/// How long a scrape waits for the database before answering without its gauges.
const DATABASE_TIMEOUT: Duration = Duration::from_secs(3);

/// Calls in each waiting state, and since when the oldest has waited.
const OPEN_CALLS: &str = "\
SELECT status, count(*)::bigint,
       COALESCE(extract(epoch FROM now() - min(CASE status WHEN 'PENDING' THEN created_at
                                                           WHEN 'PREPARED' THEN prepared_at
                                                           ELSE confirmed_at END)), 0)::float8
  FROM tool_calls
 WHERE status IN ('PENDING', 'EXECUTING', 'PREPARED')
 GROUP BY status";

/// The work the sweeper owes, by state: waiting calls past their deadline, executions whose
/// lease ran out; how many, and how long the oldest has waited for it.
const OVERDUE_CALLS: &str = "\
SELECT status, count(*)::bigint, extract(epoch FROM now() - min(expires_at))::float8
  FROM tool_calls
 WHERE status IN ('PENDING', 'PREPARED') AND expires_at < now()
 GROUP BY status
UNION ALL
SELECT status, count(*)::bigint, extract(epoch FROM now() - min(lease_until))::float8
  FROM tool_calls
 WHERE status = 'EXECUTING' AND lease_until < now()
 GROUP BY status";

/// Reports owed to relays (a callback not yet delivered), and the oldest one's age.
const OWED_REPORTS: &str = "\
SELECT count(*)::bigint, COALESCE(extract(epoch FROM now() - min(report_owed_since)), 0)::float8
  FROM tool_calls
 WHERE report_owed_since IS NOT NULL";

/// The gauges read from the database at each scrape.
struct DatabaseGauges {
    up: IntGauge,
    calls: GaugeVec,
    oldest: GaugeVec,
    overdue: GaugeVec,
    sweeper_lag: Gauge,
    reports_owed: Gauge,
    oldest_report_owed: Gauge,
}

impl DatabaseGauges {
    fn register(registry: &Registry) -> prometheus::Result<DatabaseGauges> {
        let gauges = DatabaseGauges {
            up: IntGauge::new("gatehouse_database_up", "1 when this scrape read the database's gauges, else 0.")?,
            calls: GaugeVec::new(Opts::new("gatehouse_calls", "Calls waiting in each state."), &["state"])?,
            oldest: GaugeVec::new(
                Opts::new(
                    "gatehouse_oldest_call_age_seconds",
                    "How long the oldest call in each waiting state has been in it.",
                ),
                &["state"],
            )?,
            overdue: GaugeVec::new(
                Opts::new(
                    "gatehouse_overdue_calls",
                    "Calls the sweeper owes work: PENDING or PREPARED past their deadline (a PREPARED one is stuck \
                     at its checkpoint), EXECUTING past their lease.",
                ),
                &["state"],
            )?,
            sweeper_lag: Gauge::new(
                "gatehouse_sweeper_lag_seconds",
                "How long the oldest work the sweeper owes has waited: a waiting call past its deadline, or an \
                 execution whose lease ran out. 0 when it owes none.",
            )?,
            reports_owed: Gauge::new("gatehouse_reports_owed", "Calls whose report (callback) is not delivered yet.")?,
            oldest_report_owed: Gauge::new(
                "gatehouse_oldest_report_owed_seconds",
                "How long the oldest report not delivered yet has been owed.",
            )?,
        };
        registry.register(Box::new(gauges.up.clone()))?;
        registry.register(Box::new(gauges.calls.clone()))?;
        registry.register(Box::new(gauges.oldest.clone()))?;
        registry.register(Box::new(gauges.overdue.clone()))?;
        registry.register(Box::new(gauges.sweeper_lag.clone()))?;
        registry.register(Box::new(gauges.reports_owed.clone()))?;
        registry.register(Box::new(gauges.oldest_report_owed.clone()))?;
        Ok(gauges)
    }

    /// Reads the database and sets the gauges; on failure, `up` says so and the gauges keep
    /// their last values.
    async fn refresh(&self, database_url: &str) {
        let read = tokio::time::timeout(DATABASE_TIMEOUT, self.read(database_url)).await;
        match read {
            Ok(Ok(())) => self.up.set(1),
            Ok(Err(e)) => {
                self.up.set(0);
                gatehouse_spin_host::log::warn(
                    "metrics: the database gauges were not read",
                    serde_json::json!({"error": format!("{e:#}")}),
                );
            }
            Err(_) => {
                self.up.set(0);
                gatehouse_spin_host::log::warn(
                    "metrics: the database did not answer in time",
                    serde_json::json!({"timeout_seconds": DATABASE_TIMEOUT.as_secs()}),
                );
            }
        }
    }

    async fn read(&self, database_url: &str) -> Result<()> {
        let (client, _driver) = gatehouse_pg_connect::connect(database_url).await.context("connecting")?;
        let open = client.query(OPEN_CALLS, &[]).await.context("reading the open calls")?;
        for (state, count, age) in by_state(&open)? {
            self.calls.with_label_values(&[state]).set(count as f64);
            self.oldest.with_label_values(&[state]).set(age);
        }
        let overdue = client.query(OVERDUE_CALLS, &[]).await.context("reading the overdue calls")?;
        let mut lag: f64 = 0.0;
        for (state, count, age) in by_state(&overdue)? {
            self.overdue.with_label_values(&[state]).set(count as f64);
            lag = lag.max(age);
        }
        self.sweeper_lag.set(lag);
        let owed = client.query_one(OWED_REPORTS, &[]).await.context("reading the owed reports")?;
        self.reports_owed.set(owed.try_get::<_, i64>(0)? as f64);
        self.oldest_report_owed.set(owed.try_get(1)?);
        Ok(())
    }
}

/// Each open state's count and age (open as `gatehouse_domain::Status` says), from rows of
/// (state, count, age in seconds); a state without a row has none.
fn by_state(rows: &[tokio_postgres::Row]) -> Result<Vec<(&'static str, i64, f64)>> {
    let mut found = std::collections::HashMap::new();
    for row in rows {
        let state: String = row.try_get(0)?;
        found.insert(state, (row.try_get::<_, i64>(1)?, row.try_get::<_, f64>(2)?));
    }
    Ok(Status::ALL
        .into_iter()
        .filter(|status| status.is_open())
        .map(|status| {
            let state = status.as_str();
            let (count, age) = found.get(state).copied().unwrap_or((0, 0.0));
            (state, count, age)
        })
        .collect())
}

/// The metrics listener.
pub(crate) struct MetricsServer {
    serving: Serving,
}

impl MetricsServer {
    /// Serves `registry` (with the application's gauges, when it runs here, and the
    /// database's, read at each scrape) on `listen`.
    pub(crate) async fn start(
        listen: SocketAddr,
        registry: Registry,
        app: Option<Arc<App>>,
        database_url: String,
    ) -> Result<(MetricsServer, SocketAddr)> {
        let gauges = Arc::new(DatabaseGauges::register(&registry).context("registering the database gauges")?);
        process::register_build_info(&registry).context("registering the build's series")?;
        let process = Arc::new(ProcessMetrics::register(&registry).context("registering the process's series")?);
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen} for metrics"))?;
        let address = listener.local_addr()?;
        let database_url = Arc::new(database_url);
        let serving = gatehouse_http_listener::serve(listener, move |request: http::Request<hyper::body::Incoming>| {
            let (registry, app, gauges, process, database_url) =
                (registry.clone(), app.clone(), gauges.clone(), process.clone(), database_url.clone());
            async move {
                if request.uri().path() != "/metrics" {
                    return text(StatusCode::NOT_FOUND, "Only /metrics is served here.\n".into());
                }
                if request.method() != Method::GET {
                    return text(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".into());
                }
                if let Some(app) = &app {
                    app.refresh_metrics();
                }
                gauges.refresh(&database_url).await;
                if let Some(process) = process.as_ref() {
                    process.refresh();
                }
                let mut body = Vec::new();
                match TextEncoder::new().encode(&registry.gather(), &mut body) {
                    Ok(()) => text(StatusCode::OK, body),
                    Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding failed: {e}\n").into_bytes()),
                }
            }
        });
        Ok((MetricsServer { serving }, address))
    }

    pub(crate) async fn stop(self) {
        self.serving.stop().await;
    }
}

/// An answer in Prometheus' text format (version 0.0.4), or plain text for a refusal.
fn text(status: StatusCode, body: Vec<u8>) -> Answer {
    let mut answer = http::Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        answer.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
    }
    answer
}

//! Metrics (docs/architecture.md, "Metrics"): `/metrics` on its own listener, in Prometheus'
//! text format as a Prometheus parser reads it, with the counters and gauges moving as one call
//! moves through its life. A scratch database makes the call gauges this test's own.
use std::collections::HashMap;

use anyhow::{Result, ensure};
use gatehouse_tests::cluster::free_port;
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::unique;
use prometheus_parse::{Scrape, Value};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(30);

/// One scrape, parsed: each sample's value by its name and labels (`name{a="1",b="2"}`, labels
/// sorted; a histogram's count as `name_count{...}`).
struct Metrics(HashMap<String, f64>);

impl Metrics {
    async fn scrape(url: &str) -> Result<Metrics> {
        let response = reqwest::get(url).await?;
        ensure!(response.status() == 200, "{}", response.status());
        let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        ensure!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
        let text = response.text().await?;
        let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_owned())))?;
        let mut samples = HashMap::new();
        for sample in scrape.samples {
            let mut labels: Vec<(String, String)> = sample.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            labels.sort();
            let labels = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect::<Vec<_>>().join(",");
            let (name, value) = match sample.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => (sample.metric, v),
                Value::Histogram(_) | Value::Summary(_) => (format!("{}_present", sample.metric), 1.0),
            };
            samples.insert(format!("{name}{{{labels}}}"), value);
        }
        // Histograms: their `_count` lines, which the parser folds into the histogram.
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            if let Some((key, value)) = line.rsplit_once(' ')
                && key.contains("_count")
            {
                samples.insert(key.to_owned(), value.parse()?);
            }
        }
        Ok(Metrics(samples))
    }

    fn value(&self, key: &str) -> f64 {
        self.0.get(key).copied().unwrap_or(0.0)
    }
}

#[tokio::test]
async fn metrics_are_on_their_own_port_and_move_as_a_call_moves() -> Result<()> {
    let scratch = ScratchDatabase::create("metrics").await?;
    let metrics_address = format!("127.0.0.1:{}", free_port()?);
    let options =
        scratch.serve(lifecycle_options(&[], &["--metrics-listen", &metrics_address, "--sweep-interval", "0"]));
    let app = App::start(options).await?;
    let url = format!("http://{metrics_address}/metrics");
    let relay = Relay::start().await?;

    // Not on the public port; only GET /metrics on its own.
    let public = app.send(Method::GET, "/metrics", None).await?;
    ensure!(public.status == 404, "the public port serves no metrics: {}", public.status);
    let posted = reqwest::Client::new().post(&url).send().await?;
    ensure!(posted.status() == 405, "{}", posted.status());
    let elsewhere = reqwest::get(format!("http://{metrics_address}/other")).await?;
    ensure!(elsewhere.status() == 404, "{}", elsewhere.status());

    let before = Metrics::scrape(&url).await?;
    ensure!(before.value("gatehouse_database_up{}") == 1.0, "the database gauges were read");
    ensure!(before.value("gatehouse_calls{state=\"PENDING\"}") == 0.0);
    ensure!(before.value("gatehouse_guest_instances_max{}") >= 1.0);
    let created_key = "gatehouse_requests_total{component=\"pending\",route=\"/voice-tools/pending\",status=\"201\"}";

    let session = unique("metrics");
    let id = app.create_id(&session, json!({"to": "ann@example.com", "subject": "Metrics"}), Some(&relay.url)).await?;
    let pending = Metrics::scrape(&url).await?;
    ensure!(pending.value(created_key) == before.value(created_key) + 1.0, "the create is counted");
    ensure!(pending.value("gatehouse_calls{state=\"PENDING\"}") == 1.0, "one call waits");
    ensure!(pending.value("gatehouse_oldest_call_age_seconds{state=\"PENDING\"}") >= 0.0);
    let validated = "gatehouse_tool_operations_total{component=\"fixture-tool\",operation=\"validate\",outcome=\"ok\"}";
    ensure!(pending.value(validated) >= before.value(validated) + 1.0, "the tool's validate is counted");
    let statements = "gatehouse_sql_statement_duration_seconds_count{component=\"pending\",outcome=\"ok\"}";
    ensure!(pending.value(statements) > before.value(statements), "the create's statements are counted");

    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    let prepared = Metrics::scrape(&url).await?;
    ensure!(prepared.value("gatehouse_calls{state=\"PENDING\"}") == 0.0);
    ensure!(prepared.value("gatehouse_calls{state=\"PREPARED\"}") == 1.0, "the call waits at its checkpoint");
    let checkpoint_sent = "gatehouse_outbound_requests_total{component=\"async-executor\",destination=\"network\",kind=\"callback\",outcome=\"200\"}";
    ensure!(prepared.value(checkpoint_sent) >= 1.0, "the checkpoint's callback is counted");

    ensure!(app.resume(&id, "proceed").await?.status == 202);
    relay.wait_for(&id, "completion", SETTLE).await?;
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    let done = Metrics::scrape(&url).await?;
    for state in ["PENDING", "EXECUTING", "PREPARED"] {
        ensure!(done.value(&format!("gatehouse_calls{{state=\"{state}\"}}")) == 0.0, "no call waits in {state}");
    }
    let executed = "gatehouse_tool_operations_total{component=\"fixture-tool\",operation=\"execute\",outcome=\"ok\"}";
    ensure!(done.value(executed) == before.value(executed) + 1.0, "one execute");
    ensure!(done.value("gatehouse_sweeper_lag_seconds{}") == 0.0, "the sweeper owes nothing");
    ensure!(done.value("gatehouse_reports_owed{}") == 0.0, "every report was delivered");
    ensure!(done.value(checkpoint_sent) >= 2.0, "the completion's callback is counted too");
    ensure!(
        done.0.keys().any(|k| k.starts_with("gatehouse_db_pool_connections{state=\"idle\"}")),
        "{:?}",
        done.0.keys()
    );
    let _ = scratch;
    Ok(())
}

//! Metrics (docs/architecture.md, "Metrics"): `/metrics` on its own listener, in Prometheus'
//! text format as a Prometheus parser reads it, with the counters and gauges moving as one call
//! moves through its life (a scratch database makes the call gauges this test's own); and
//! deploy/observability's alert rules and dashboard against a real Prometheus.
use std::collections::HashMap;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::cluster::free_port;
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{unique, workspace_root};
use prometheus_parse::Scrape;
use reqwest::Method;
use serde_json::{Value, json};

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
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => (sample.metric, v),
                prometheus_parse::Value::Histogram(_) | prometheus_parse::Value::Summary(_) => {
                    (format!("{}_present", sample.metric), 1.0)
                }
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
    let options = scratch.serve(lifecycle_options(&[], &["--metrics-listen", "127.0.0.1:0", "--sweep-interval", "0"]));
    let app = App::start(options).await?;
    let metrics_address = app.runner.metrics_address.clone().context("the runner named no metrics address")?;
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

/// deploy/observability: the alert rules pass promtool's checks and their own unit tests, and a
/// real Prometheus, scraping a running host with those rules loaded, answers every query of the
/// Grafana dashboard's panels.
#[tokio::test]
async fn prometheus_loads_the_rules_and_answers_every_dashboard_query() -> Result<()> {
    let observability = workspace_root().join("deploy/observability");
    for args in [
        vec!["check", "rules", "alerts.yaml"],
        vec!["test", "rules", "alerts.test.yaml"],
        vec!["check", "config", "prometheus.yml"],
    ] {
        let output = std::process::Command::new("promtool").args(&args).current_dir(&observability).output()?;
        ensure!(
            output.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let app = App::start(lifecycle_options(&[], &["--metrics-listen", "127.0.0.1:0"])).await?;
    let metrics_address = app.runner.metrics_address.clone().context("the runner named no metrics address")?;
    app.create_id(&unique("prometheus"), json!({"to": "bo@example.com", "subject": "Scraped"}), None).await?;

    // prometheus.yml with this host as its target, and its rules by absolute path.
    let dir = workspace_root().join("target/prometheus").join(unique("run"));
    std::fs::create_dir_all(&dir)?;
    let config = std::fs::read_to_string(observability.join("prometheus.yml"))?
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace("127.0.0.1:9464", &metrics_address)
        .replace("- alerts.yaml", &format!("- {}", observability.join("alerts.yaml").display()));
    std::fs::write(dir.join("prometheus.yml"), config)?;
    let web = format!("127.0.0.1:{}", free_port()?);
    let log = std::fs::File::create(dir.join("prometheus.log"))?;
    let mut prometheus = ChildGuard(
        std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting prometheus")?,
    );
    let api = format!("http://{web}/api/v1");
    let query = |expr: String| {
        let url = format!("{api}/query");
        async move {
            let answer: Value = reqwest::Client::new().get(url).query(&[("query", expr)]).send().await?.json().await?;
            Ok::<Value, anyhow::Error>(answer)
        }
    };

    // Three scrapes at least, so that a rate over them has two points.
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let answer = query("count_over_time(gatehouse_database_up[1m])".into()).await.unwrap_or(Value::Null);
        let scrapes = answer["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
        if scrapes.is_some_and(|n| n >= 3.0) {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "prometheus did not scrape the host: {answer}\n{}",
            prometheus.log(&dir)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let rules: Value = reqwest::get(format!("{api}/rules")).await?.json().await?;
    let loaded: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    ensure!(loaded.len() == 7 && loaded.iter().all(|r| r["health"] == "ok"), "{rules}");

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(observability.join("grafana-dashboard.json"))?)?;
    let panels = dashboard["panels"].as_array().context("panels")?;
    ensure!(panels.len() >= 10, "{} panels", panels.len());
    for panel in panels {
        for target in panel["targets"].as_array().context("targets")? {
            let expr = target["expr"].as_str().context("an expression")?.replace("$__rate_interval", "1m");
            let answer = query(expr.clone()).await?;
            ensure!(answer["status"] == "success", "{}: {expr}: {answer}", panel["title"]);
        }
    }
    // The panels show this host: its calls by state and its requests' rate.
    let waiting = query("max by (state) (gatehouse_calls)".into()).await?;
    ensure!(waiting["data"]["result"].as_array().is_some_and(|r| r.len() == 3), "{waiting}");
    let requests = query("sum(rate(gatehouse_requests_total[1m]))".into()).await?;
    ensure!(requests["data"]["result"].as_array().is_some_and(|r| r.len() == 1), "{requests}");
    prometheus.stop();
    drop(app);
    Ok(())
}

/// A child process killed when the test ends, however it ends.
struct ChildGuard(std::process::Child);

impl ChildGuard {
    fn log(&self, dir: &std::path::Path) -> String {
        std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

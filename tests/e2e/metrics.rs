//! Metrics (docs/architecture.md, "Metrics"): `/metrics` on its own listener, in Prometheus'
//! text format as a Prometheus parser reads it, with the counters and gauges moving as one call
//! moves through its life (a scratch database makes the call gauges this test's own); and
//! deploy/observability's alert rules and dashboard against a real Prometheus.
use std::collections::HashMap;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::cluster::free_port;
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{Runner, RunnerOptions, fixture_manifest, unique, workspace_root};
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
    // Counters whose labels are known at the start exist at 0 before their first event, so
    // Prometheus sees that event as an increase (docs/observability.md, "Metrics").
    for component in ["pending", "async-executor", "fixture-tool"] {
        for counter in ["gatehouse_deadline_exceeded_total", "gatehouse_component_failures_total"] {
            let key = format!("{counter}{{component=\"{component}\"}}");
            ensure!(before.0.get(&key) == Some(&0.0), "{key} is not at 0: {:?}", before.0.get(&key));
        }
    }
    let crashed =
        "gatehouse_tool_operations_total{component=\"fixture-tool\",operation=\"execute\",outcome=\"crashed\"}";
    ensure!(before.0.get(crashed) == Some(&0.0), "{crashed} is not at 0");
    ensure!(
        !before.0.keys().any(|key| key.starts_with("gatehouse_tool_operations_total{component=\"pending\"")),
        "only tools have tool operations"
    );
    // The process and the build, as every Prometheus client names them.
    for series in ["process_cpu_seconds_total{}", "process_resident_memory_bytes{}", "process_open_fds{}"] {
        ensure!(before.0.get(series).is_some_and(|value| *value > 0.0), "{series}: {:?}", before.0.get(series));
    }
    let started = before.value("process_start_time_seconds{}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    ensure!(started > now - 600.0 && started <= now + 1.0, "the runner started at {started}, now is {now}");
    ensure!(
        before.0.iter().any(|(key, value)| key.starts_with("gatehouse_build_info{")
            && key.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION")))
            && *value == 1.0),
        "no gatehouse_build_info"
    );
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

    let mut prometheus = Prometheus::start(&metrics_address)?;
    // Three scrapes at least, so that a rate over them has two points.
    prometheus.wait_for_scrapes(3).await?;
    let api = prometheus.api.clone();
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
            let answer = prometheus.query(expr.clone()).await?;
            ensure!(answer["status"] == "success", "{}: {expr}: {answer}", panel["title"]);
        }
    }
    // The panels show this host: its calls by state and its requests' rate.
    let waiting = prometheus.query("max by (state) (gatehouse_calls)".into()).await?;
    ensure!(waiting["data"]["result"].as_array().is_some_and(|r| r.len() == 3), "{waiting}");
    let requests = prometheus.query("sum(rate(gatehouse_requests_total[1m]))".into()).await?;
    ensure!(requests["data"]["result"].as_array().is_some_and(|r| r.len() == 1), "{requests}");
    prometheus.stop();
    drop(app);
    Ok(())
}

/// The first deadline a host hits after its start fires `GatehouseDeadlinesHit` in a real
/// Prometheus: the rule sees the counter go from 0 to 1, which it can only if the host exposed
/// the 0 before the hit (a series born at 1 has no increase). The alert rules' unit test
/// (alerts.test.yaml) feeds the rule the same shape.
#[tokio::test]
async fn the_first_deadline_a_host_hits_fires_its_alert() -> Result<()> {
    let options = RunnerOptions {
        env: vec![("SPIN_VARIABLE_MUST_HAVE".to_owned(), "present".to_owned())],
        extra_args: ["--request-timeout", "1", "--metrics-listen", "127.0.0.1:0"].map(String::from).to_vec(),
        ..Default::default()
    };
    let runner = Runner::start(&fixture_manifest(), options)?;
    let metrics_address = runner.metrics_address.clone().context("the runner named no metrics address")?;
    let prometheus = Prometheus::start(&metrics_address)?;
    // Prometheus has seen the counter before the hit.
    prometheus.wait_for_scrapes(2).await?;
    let seen = prometheus.query("gatehouse_deadline_exceeded_total{component=\"probe\"}".into()).await?;
    ensure!(seen["data"]["result"][0]["value"][1] == "0", "the counter is scraped at 0 before the hit: {seen}");

    // A guest that never returns is stopped at its deadline: a 503 that says when to retry.
    let stopped = reqwest::Client::builder().timeout(SETTLE).build()?.get(runner.url("/spin")).send().await?;
    ensure!(stopped.status() == 503, "{}", stopped.status());
    let retry_after = stopped.headers().get("retry-after").and_then(|value| value.to_str().ok());
    ensure!(retry_after == Some("1"), "Retry-After {retry_after:?}");

    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let firing = prometheus.firing().await?;
        let hit = firing.iter().find(|alert| {
            alert["labels"]["alertname"] == "GatehouseDeadlinesHit" && alert["labels"]["component"] == "probe"
        });
        if let Some(alert) = hit {
            ensure!(
                alert["annotations"]["summary"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("probe was stopped at its deadline")),
                "{alert}"
            );
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "GatehouseDeadlinesHit did not fire: {firing:?}\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(prometheus);
    drop(runner);
    Ok(())
}

/// Debian's Prometheus with deploy/observability's configuration and rules, scraping one host
/// every second and evaluating the rules every second; stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    dir: std::path::PathBuf,
    api: String,
}

impl Prometheus {
    fn start(metrics_address: &str) -> Result<Prometheus> {
        let observability = workspace_root().join("deploy/observability");
        // prometheus.yml with this host as its target, and its rules by absolute path.
        let dir = workspace_root().join("target/prometheus").join(unique("run"));
        std::fs::create_dir_all(&dir)?;
        let config = std::fs::read_to_string(observability.join("prometheus.yml"))?
            .replace("scrape_interval: 15s", "scrape_interval: 1s")
            .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
            .replace("127.0.0.1:9464", metrics_address)
            .replace("- alerts.yaml", &format!("- {}", observability.join("alerts.yaml").display()));
        std::fs::write(dir.join("prometheus.yml"), config)?;
        let web = format!("127.0.0.1:{}", free_port()?);
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting prometheus")?;
        Ok(Prometheus { child, dir, api: format!("http://{web}/api/v1") })
    }

    /// An instant query's answer.
    async fn query(&self, expr: String) -> Result<Value> {
        let url = format!("{}/query", self.api);
        Ok(reqwest::Client::new().get(url).query(&[("query", expr)]).send().await?.json().await?)
    }

    /// Waits, up to [`SETTLE`], until Prometheus has scraped the host `count` times.
    async fn wait_for_scrapes(&self, count: u32) -> Result<()> {
        let deadline = std::time::Instant::now() + SETTLE;
        loop {
            let answer = self.query("count_over_time(gatehouse_database_up[1m])".into()).await.unwrap_or(Value::Null);
            let scrapes = answer["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
            if scrapes.is_some_and(|n| n >= f64::from(count)) {
                return Ok(());
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "prometheus did not scrape the host: {answer}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The alerts firing now, as Prometheus' API lists them.
    async fn firing(&self) -> Result<Vec<Value>> {
        let alerts: Value = reqwest::get(format!("{}/alerts", self.api)).await?.json().await?;
        let alerts = alerts["data"]["alerts"].as_array().cloned().unwrap_or_default();
        Ok(alerts.into_iter().filter(|alert| alert["state"] == "firing").collect())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

//! Draining a host before it stops: on SIGTERM its readiness answer (Spin's
//! `/.well-known/spin/health`) turns to 503 while it goes on serving for `--drain-delay`, so a
//! proxy moves new requests to another host; then it stops accepting, answers the requests it
//! already has, and exits cleanly.

use std::time::Duration;

use anyhow::{Result, ensure};
use gatehouse_tests::http;
use gatehouse_tests::lifecycle::{App, lifecycle_options};
use gatehouse_tests::unique;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn spin_health_answers_ok_and_the_application_never_sees_the_reserved_routes() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let health = http().get(app.runner.url("/.well-known/spin/health")).send().await?;
    ensure!(health.status() == 200, "health: {}", health.status());
    ensure!(health.text().await? == "OK");
    let info: serde_json::Value = http().get(app.runner.url("/.well-known/spin/info")).send().await?.json().await?;
    ensure!(info["ready"] == true && info["application"].is_string(), "{info}");
    // Reserved: not the application's fallback, whose 404s name no route either, but the host's.
    let other = http().get(app.runner.url("/.well-known/spin/anything")).send().await?;
    ensure!(other.status() == 404);
    ensure!(app.runner.logs().iter().all(|line| !line.contains("/.well-known/spin/")), "a component saw the request");
    Ok(())
}

#[tokio::test]
async fn sigterm_reports_not_ready_serves_through_the_delay_and_finishes_what_it_has() -> Result<()> {
    let mut app = App::start(lifecycle_options(&[], &["--drain-delay", "1"])).await?;
    // A call whose irreversible step takes 2 s, confirmed by a client that waits for the end:
    // its request is still in flight when the host stops accepting.
    let params = json!({"to": "a@example.com", "checkpoint": false, "delay_ms": {"execute": 2000}});
    let id = app.create_id(&unique("drain"), params, None).await?;
    let confirm_path = format!("/voice-tools/confirm/{id}");
    let confirm = app.send_with(Method::POST, &confirm_path, None, &[("prefer", "wait=10")]);
    let during = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        app.runner.signal("TERM")?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Draining: not ready, but still serving.
        let health = http().get(app.runner.url("/.well-known/spin/health")).send().await?;
        let health = (health.status().as_u16(), health.text().await?);
        let status = app.status(&id).await?.status;
        // Past the delay: no new connection is accepted.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let refused = http().get(app.runner.url("/.well-known/spin/health")).send().await.is_err();
        Ok::<_, anyhow::Error>((health, status, refused))
    };
    let (confirmed, during) = tokio::join!(confirm, during);
    let ((health_status, health_text), status_during_drain, refused_after) = during?;
    ensure!(
        health_status == 503 && health_text == "draining",
        "readiness while draining: {health_status} {health_text}"
    );
    ensure!(status_during_drain == 200, "a request during the drain delay was answered {status_during_drain}");
    ensure!(refused_after, "the host still accepted a connection after the drain delay");
    let confirmed = confirmed?;
    ensure!(confirmed.status == 200, "the in-flight confirm: {} {}", confirmed.status, confirmed.body);
    ensure!(confirmed.body["status"] == "COMPLETED", "{}", confirmed.body);
    let exit = app.runner.wait_for_exit(Duration::from_secs(30))?;
    ensure!(exit.success(), "the runner exited with {exit}");
    ensure!(app.runner.logs().iter().any(|line| line.contains("\"draining\"")), "no draining log line");
    Ok(())
}

//! The dashboard (`/dashboard/`) in a real browser, and the API it reads.
//!
//! The browser test drives Debian's headless `chromium` through `chromedriver` (both installed
//! by `scripts/setup --tests`) over WebDriver: it signs in with a wrong token and then the right
//! one, finds the calls it made (corrected, cancelled, failed, completed through the
//! checkpoint, and one created while the page was open), opens calls, cancels one from the
//! page, reads a tool's counts and the health page, and saves screenshots of each page under
//! `target/dashboard-screenshots/`. It prints the page's load time from the Navigation Timing
//! API. The other tests check the files' security headers and the two routes the dashboard
//! added, `GET /voice-tools/calls` and `GET /voice-tools/calls/:id/callbacks`.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use fantoccini::{Client, ClientBuilder, Locator};
use gatehouse_tests::lifecycle::{App, FIXTURE_REGISTRY, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{TOKEN, unique, workspace_root};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);
/// How long the browser may take to show what the test waits for (the list polls every 3 s).
const SHOW: Duration = Duration::from_secs(15);
const TOOL: &str = "fixture_action";

/// The flags the issue asks for: headless, no sandbox (the tests may run as root), nothing
/// that reaches the network on its own.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One chromedriver for this test binary, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Result<Driver> {
        let port = free_port()?;
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context(
                "starting chromedriver (Debian: apt-get install chromium chromium-driver, or scripts/setup --tests)",
            )?;
        let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(20);
        let http = reqwest::Client::new();
        loop {
            let ready = http.get(format!("{}/status", driver.url)).send().await;
            if let Ok(answer) = ready {
                let body: Value = answer.json().await.unwrap_or_default();
                if body["value"]["ready"] == true {
                    return Ok(driver);
                }
            }
            ensure!(Instant::now() < deadline, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A headless Chromium with a profile of its own, thrown away afterwards.
    async fn browser(&self, profile: &std::path::Path) -> Result<Client> {
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut options = json!({"args": args});
        if let Some(binary) =
            ["/usr/bin/chromium", "/usr/lib/chromium/chromium"].iter().find(|p| std::path::Path::new(p).exists())
        {
            options["binary"] = json!(binary);
        }
        let capabilities = json!({"browserName": "chrome", "goog:chromeOptions": options});
        let capabilities = capabilities.as_object().cloned().context("capabilities")?;
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        Ok(ClientBuilder::new(connector).capabilities(capabilities).connect(&self.url).await?)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the screenshots go: `target/dashboard-screenshots/`.
fn screenshots() -> Result<PathBuf> {
    let dir = workspace_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn screenshot(browser: &Client, name: &str) -> Result<()> {
    let png = browser.screenshot().await?;
    std::fs::write(screenshots()?.join(format!("{name}.png")), png)?;
    Ok(())
}

/// Waits until `css` matches an element whose text contains `text`, and returns that text.
async fn wait_for_text(browser: &Client, css: &str, text: &str) -> Result<String> {
    let deadline = Instant::now() + SHOW;
    let mut last = String::new();
    loop {
        for element in browser.find_all(Locator::Css(css)).await.unwrap_or_default() {
            // The page may redraw between the find and the read; the next round finds it again.
            if let Ok(found) = element.text().await {
                if found.contains(text) {
                    return Ok(found);
                }
                last = found;
            }
        }
        ensure!(Instant::now() < deadline, "no {css} showed {text:?} within {SHOW:?} (last: {last:?})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn script(browser: &Client, js: &str) -> Result<Value> {
    Ok(browser.execute(js, Vec::new()).await?)
}

/// The page's own timing (Navigation Timing Level 2), in milliseconds from the navigation start.
async fn load_timing(browser: &Client) -> Result<(f64, f64)> {
    let timing = script(
        browser,
        "const n = performance.getEntriesByType('navigation')[0]; \
         return [n.domContentLoadedEventEnd, n.loadEventEnd];",
    )
    .await?;
    Ok((timing[0].as_f64().unwrap_or(-1.0), timing[1].as_f64().unwrap_or(-1.0)))
}

async fn db_status(db: &tokio_postgres::Client, id: &str) -> Result<String> {
    Ok(db.query_one("SELECT status FROM tool_calls WHERE tool_call_id = $1", &[&id]).await?.get(0))
}

/// The calls the browser test looks for, made through the API.
struct Calls {
    corrected: String,
    cancelled: String,
    failed: String,
    completed: String,
    /// Left at the checkpoint, for the health page's countdown.
    prepared: String,
    /// Stuck in its `execute` past its worker's lease, with no sweeper to take it over.
    stuck: String,
}

async fn make_calls(app: &App, relay: &Relay, session: &str) -> Result<Calls> {
    let to = |who: &str| json!({"to": format!("{who}@example.com")});
    // Corrected while PENDING, and left there.
    let corrected = app.create_id(session, to("ann"), Some(&relay.url)).await?;
    let patch = json!({"parameters": {"to": "ann.smith@example.com"}, "reason": "caller corrected the address"});
    let modified = app.send(Method::PATCH, &format!("/voice-tools/modify/{corrected}"), Some(patch)).await?;
    ensure!(modified.status == 200, "modify: {}", modified.body);
    // Cancelled by the relay.
    let cancelled = app.create_id(session, to("bob"), Some(&relay.url)).await?;
    ensure!(app.cancel(&cancelled).await?.status == 200, "cancel");
    // Failed in execute, with no checkpoint.
    let failed = app
        .create_id(
            session,
            json!({"to": "cy@example.com", "checkpoint": false, "fail_in": "execute"}),
            Some(&relay.url),
        )
        .await?;
    ensure!(app.confirm(&failed).await?.status == 202, "confirm");
    app.wait_for(&failed, "FAILED", SETTLE).await?;
    // Completed through the checkpoint.
    let completed = app.create_id(session, to("dee"), Some(&relay.url)).await?;
    ensure!(app.confirm(&completed).await?.status == 202, "confirm");
    app.wait_for(&completed, "PREPARED", SETTLE).await?;
    ensure!(app.resume(&completed, "proceed").await?.status == 202, "resume");
    app.wait_for(&completed, "COMPLETED", SETTLE).await?;
    relay.wait_for(&completed, "completion", SETTLE).await?;
    // Waiting at the checkpoint.
    let prepared = app.create_id(session, to("fay"), Some(&relay.url)).await?;
    ensure!(app.confirm(&prepared).await?.status == 202, "confirm");
    app.wait_for(&prepared, "PREPARED", SETTLE).await?;
    relay.wait_for(&prepared, "checkpoint", SETTLE).await?;
    // Executing for a minute, past its one-second lease: overdue, since nothing sweeps.
    let stuck = app
        .create_id(session, json!({"to": "gus@example.com", "checkpoint": false, "delay_ms": {"execute": 60000}}), None)
        .await?;
    ensure!(app.confirm(&stuck).await?.status == 202, "confirm");
    Ok(Calls { corrected, cancelled, failed, completed, prepared, stuck })
}

/// The tool's executions in the database by outcome, once the history has stopped growing
/// (rows are written after each answer).
async fn settled_counts(db: &tokio_postgres::Client) -> Result<(i64, i64, i64)> {
    let count = || async {
        let row = db
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE outcome = 'ok'), count(*) FILTER (WHERE outcome = 'failed')
                   FROM tool_executions WHERE tool = $1",
                &[&TOOL],
            )
            .await?;
        anyhow::Ok((row.get(0), row.get(1), row.get(2)))
    };
    let mut last = count().await?;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = count().await?;
        if now == last {
            return Ok(now);
        }
        last = now;
    }
}

#[tokio::test]
async fn the_dashboard_in_a_real_browser() -> Result<()> {
    let scratch = ScratchDatabase::create("dashboard").await?;
    // Beside the fixture tool, one the manifest does not let the components reach.
    let registry = format!("{FIXTURE_REGISTRY},far_away=https://tools.elsewhere.example/internal/tools/x");
    let variables = [("execution_lease_seconds", "1"), ("tool_registry", registry.as_str())];
    let app = App::start(scratch.serve(lifecycle_options(&variables, &["--sweep-interval", "0"]))).await?;
    let relay = Relay::start().await?;
    let session = unique("dash");
    let calls = make_calls(&app, &relay, &session).await?;
    let db = scratch.connect().await?;

    let driver = Driver::start().await?;
    let profile = std::env::temp_dir().join(unique("dashboard-profile"));
    std::fs::create_dir_all(&profile)?;
    let browser = driver.browser(&profile).await?;
    let mut outcome = drive(&browser, &app, &relay, &db, &session, &calls).await;
    if outcome.is_ok() {
        outcome = read_only(&browser, &app, &scratch.url, &calls).await;
    }
    let _ = browser.close().await;
    drop(driver);
    let _ = std::fs::remove_dir_all(&profile);
    outcome
}

async fn drive(
    browser: &Client,
    app: &App,
    relay: &Relay,
    db: &tokio_postgres::Client,
    session: &str,
    calls: &Calls,
) -> Result<()> {
    let page = app.runner.url("/dashboard/");

    // A cold load, then a warm one: the page's own timing of each, printed for the record (how
    // fast it is belongs to the measurements, not to a test); that the browser reports a
    // completed navigation at all is what is checked.
    for round in ["first", "second"] {
        browser.goto(&page).await?;
        browser.wait().at_most(SHOW).for_element(Locator::Css("#token")).await?;
        let (ready, loaded) = load_timing(browser).await?;
        println!("dashboard page load ({round}): DOMContentLoaded {ready:.1} ms, load {loaded:.1} ms");
        ensure!(loaded > 0.0 && ready > 0.0, "the browser reported no completed navigation");
    }

    // A wrong token: a sign-in error, no data, nothing kept.
    browser.find(Locator::Css("#token")).await?.send_keys("not-the-token").await?;
    browser.find(Locator::Css("#sign-in-form button")).await?.click().await?;
    let error = wait_for_text(browser, "#sign-in-error", "not accepted").await?;
    ensure!(error.contains("not accepted"), "{error}");
    let shown = script(
        browser,
        "return {view: document.getElementById('view').hidden, rows: document.querySelectorAll('tr[data-call]').length, \
                 kept: sessionStorage.length, nav: document.getElementById('nav').hidden};",
    )
    .await?;
    ensure!(shown == json!({"view": true, "rows": 0, "kept": 0, "nav": true}), "after a wrong token: {shown}");
    screenshot(browser, "sign-in-error").await?;

    // The right token: the calls, each with its status.
    let token = browser.find(Locator::Css("#token")).await?;
    token.clear().await?;
    token.send_keys(TOKEN).await?;
    browser.find(Locator::Css("#sign-in-form button")).await?.click().await?;
    for (id, status) in [
        (&calls.corrected, "PENDING"),
        (&calls.cancelled, "CANCELLED"),
        (&calls.failed, "FAILED"),
        (&calls.completed, "COMPLETED"),
        (&calls.prepared, "PREPARED"),
    ] {
        wait_for_text(browser, &format!("tr[data-call='{id}']"), status).await?;
    }
    // What each waiting or working call is doing, and for how long.
    wait_for_text(browser, &format!("tr[data-call='{}'] td.doing", calls.prepared), "waiting at the checkpoint")
        .await?;
    wait_for_text(browser, &format!("tr[data-call='{}'] td.doing", calls.corrected), "waiting for confirmation")
        .await?;
    let stuck = wait_for_text(browser, &format!("tr[data-call='{}'] td.doing", calls.stuck), "executing").await?;
    wait_for_text(browser, &format!("tr[data-call='{}'] td.doing", calls.stuck), "overdue").await?;
    ensure!(stuck.contains("executing"), "{stuck}");
    let in_state = wait_for_text(browser, &format!("tr[data-call='{}'] td.in-state", calls.stuck), "s").await?;
    ensure!(in_state.chars().any(|c| c.is_ascii_digit()), "time in state: {in_state}");
    let url = browser.current_url().await?;
    ensure!(!url.as_str().contains(TOKEN), "the token is in the URL: {url}");
    let kept =
        script(browser, "return Object.keys(sessionStorage).length + ':' + Object.keys(localStorage).length;").await?;
    // The token, and who it is (its tenant and scopes, to show): for the tab only.
    ensure!(kept == "2:0", "the token is kept for the tab only (sessionStorage:localStorage = {kept})");

    // A call made while the page is open appears without a reload.
    let live = app.create_id(session, json!({"to": "eve@example.com"}), Some(&relay.url)).await?;
    wait_for_text(browser, &format!("tr[data-call='{live}']"), "PENDING").await?;
    // Filtered by status.
    browser.find(Locator::Css("#f-status")).await?.select_by_value("FAILED").await?;
    browser.find(Locator::Css("form.filters button")).await?.click().await?;
    wait_for_text(browser, &format!("tr[data-call='{}']", calls.failed), "FAILED").await?;
    let rows =
        script(browser, "return [...document.querySelectorAll('tr[data-call]')].map(r => r.dataset.call);").await?;
    ensure!(rows == json!([calls.failed]), "status=FAILED shows {rows}");
    browser.find(Locator::Css("#f-status")).await?.select_by_value("").await?;
    browser.find(Locator::Css("form.filters button")).await?.click().await?;
    wait_for_text(browser, &format!("tr[data-call='{}']", calls.completed), "COMPLETED").await?;
    screenshot(browser, "calls").await?;

    // The corrected call: its timeline and its correction, old → new with the reason.
    browser.find(Locator::Css(&format!("a[href='#/call/{}']", calls.corrected))).await?.click().await?;
    let timeline = wait_for_text(browser, "#timeline", "PENDING").await?;
    ensure!(timeline.contains("MODIFIED"), "the timeline: {timeline}");
    let correction = wait_for_text(browser, "#corrections", "ann.smith@example.com").await?;
    ensure!(
        correction.contains("ann@example.com") && correction.contains("caller corrected the address"),
        "the correction: {correction}"
    );
    screenshot(browser, "call-corrected").await?;

    // The completed call: through PREPARED, its checkpoint and completion callbacks answered.
    browser.goto(&format!("{page}#/call/{}", calls.completed)).await?;
    let timeline = wait_for_text(browser, "#timeline", "COMPLETED").await?;
    ensure!(timeline.contains("PREPARED") && timeline.contains("EXECUTING"), "the timeline: {timeline}");
    let callbacks = wait_for_text(browser, "#callbacks", "completion").await?;
    ensure!(callbacks.contains("checkpoint") && callbacks.contains("HTTP 200"), "the callbacks: {callbacks}");
    let status = app.status(&calls.completed).await?.body;
    let trace = status["trace_id"].as_str().unwrap_or_default();
    ensure!(!trace.is_empty(), "no trace id: {status}");
    wait_for_text(browser, "#trace-id", trace).await?;
    ensure!(browser.find_all(Locator::Css("#cancel-call")).await?.is_empty(), "a settled call offers a cancel");
    screenshot(browser, "call-completed").await?;

    // The failed call shows its error.
    browser.goto(&format!("{page}#/call/{}", calls.failed)).await?;
    wait_for_text(browser, "#timeline", "FAILED").await?;
    browser.wait().at_most(SHOW).for_element(Locator::Css("#call-error")).await?;

    // Cancel a PENDING call from the page: the route's answer is shown, the database agrees.
    browser.goto(&format!("{page}#/call/{live}")).await?;
    browser.wait().at_most(SHOW).for_element(Locator::Css("#cancel-call")).await?.click().await?;
    let answer = wait_for_text(browser, "#cancel-answer", "Cancelled").await?;
    ensure!(answer.contains("HTTP 200"), "the cancel's answer: {answer}");
    ensure!(db_status(db, &live).await? == "CANCELLED", "{live} is not CANCELLED in the database");
    wait_for_text(browser, "#call-status", "CANCELLED").await?;
    // The page says why in the call's own history.
    wait_for_text(browser, "#timeline", "cancelled from the dashboard").await?;
    screenshot(browser, "call-cancelled").await?;

    // The stuck call's own page says what it is doing and that it is overdue.
    browser.goto(&format!("{page}#/call/{}", calls.stuck)).await?;
    wait_for_text(browser, "#doing", "overdue").await?;
    wait_for_text(browser, "#in-state", "s").await?;

    // The tools: each with whether it stops at a checkpoint.
    browser.goto(&format!("{page}#/tools")).await?;
    wait_for_text(browser, &format!("tr[data-tool='{TOOL}'] td.checkpoint"), "yes").await?;
    wait_for_text(browser, "tr[data-tool='far_away'] .unreachable", "unreachable: not allowed").await?;
    screenshot(browser, "tools").await?;

    // The tool's page: the counts the database holds, one failure among them.
    let (executions, ok, failed) = settled_counts(db).await?;
    ensure!(failed == 1, "the fixture tool failed {failed} times, not once");
    browser.goto(&format!("{page}#/tools/{TOOL}")).await?;
    browser.wait().at_most(SHOW).for_element(Locator::Css("#count-executions")).await?;
    for (card, expected) in [("count-executions", executions), ("count-ok", ok), ("count-failed", 1)] {
        let shown = browser.find(Locator::Css(&format!("#{card} .value"))).await?.text().await?;
        ensure!(shown == expected.to_string(), "{card} shows {shown}, the database holds {expected}");
    }
    browser.wait().at_most(SHOW).for_element(Locator::Css("#tool-chart rect")).await?;
    let listed = browser.find_all(Locator::Css("tr.execution")).await?.len();
    ensure!(listed == usize::try_from(executions.min(20))?, "{listed} execution rows for {executions} executions");
    let errors = wait_for_text(browser, "tr.last-error", "execute").await?;
    ensure!(errors.contains("failed"), "the last error: {errors}");
    screenshot(browser, "tool").await?;

    // Health: the database, and the calls waiting with the time they have left (the corrected
    // call is still PENDING, one waits at its checkpoint).
    browser.goto(&format!("{page}#/health")).await?;
    wait_for_text(browser, "#health-database", "ok").await?;
    for (card, expected) in [("health-prepared", "1"), ("health-pending", "1")] {
        let shown = browser.find(Locator::Css(&format!("#{card} .value"))).await?.text().await?;
        ensure!(shown == expected, "{card} shows {shown}, not {expected}");
    }
    let waiting = wait_for_text(browser, "#health-prepared-list", &calls.prepared).await?;
    ensure!(waiting.contains("min"), "no countdown to the checkpoint's expiry: {waiting}");
    wait_for_text(browser, "#health-pending-list", &calls.corrected).await?;
    wait_for_text(browser, "#health-sweeper", "No call has expired yet.").await?;
    wait_for_text(browser, "#health-overdue .value", "1").await?;
    let late = wait_for_text(browser, "#health-overdue-list", &calls.stuck).await?;
    ensure!(late.contains("executing"), "the overdue call's operation: {late}");
    screenshot(browser, "health").await?;

    // A phone-sized screen: nothing wider than the screen but the tables' own scrolling boxes.
    browser.set_window_size(390, 844).await?;
    browser.goto(&format!("{page}#/calls")).await?;
    wait_for_text(browser, &format!("tr[data-call='{}']", calls.completed), "COMPLETED").await?;
    let overflow =
        script(browser, "return document.documentElement.scrollWidth - document.documentElement.clientWidth;").await?;
    ensure!(overflow.as_i64() == Some(0), "the page is wider than a phone's screen by {overflow} px");
    screenshot(browser, "calls-phone").await?;
    browser.set_window_size(1280, 900).await?;

    // Signing out forgets the token and shows no data.
    browser.find(Locator::Css("#sign-out")).await?.click().await?;
    let after =
        script(browser, "return [sessionStorage.length, document.querySelectorAll('tr[data-call]').length];").await?;
    ensure!(after == json!([0, 0]), "after signing out: {after}");
    Ok(())
}

/// Signed in with a read-only key of another tenant: only that tenant's call is listed, the page
/// says who is signed in, the cancel button is disabled (and the route would refuse it), and the
/// timeline names the key that made each change.
async fn read_only(browser: &Client, app: &App, database_url: &str, calls: &Calls) -> Result<()> {
    let tenant = crate::tenants::new_tenant_on(database_url, &[])?;
    let key_of = |scope: &str| crate::keys::new_tenant_key_on(database_url, &tenant, &[scope, "tools:read"]);
    let (writer, viewer) = (key_of("calls:write")?, key_of("calls:read")?);
    let body = json!({"session_id": unique("dash-tenant"), "function_name": TOOL, "parameters": {"to": "t@t.example"}});
    let created = app.send_as(&writer, Method::POST, "/voice-tools/pending", Some(body), &[]).await?;
    ensure!(created.status == 201, "{}", created.body);
    let theirs = created.body["tool_call_id"].as_str().context("an id")?.to_owned();

    let page = app.runner.url("/dashboard/");
    browser.goto(&page).await?;
    browser.wait().at_most(SHOW).for_element(Locator::Css("#token")).await?;
    browser.find(Locator::Css("#token")).await?.send_keys(&viewer).await?;
    browser.find(Locator::Css("#sign-in-form button")).await?.click().await?;
    let who = wait_for_text(browser, "#whoami", "read-only").await?;
    ensure!(who.contains(&tenant) && who.contains(&viewer[..12]) && !who.contains(&viewer[13..]), "{who}");
    wait_for_text(browser, &format!("tr[data-call='{theirs}']"), "PENDING").await?;
    let rows = browser.find_all(Locator::Css("tr[data-call]")).await?.len();
    ensure!(rows == 1, "{rows} calls listed for a tenant with one");
    ensure!(browser.find_all(Locator::Css(&format!("tr[data-call='{}']", calls.corrected))).await?.is_empty());

    browser.goto(&format!("{page}#/call/{theirs}")).await?;
    wait_for_text(browser, "#timeline", &format!("with {}", &writer[..12])).await?;
    let disabled =
        script(browser, "const b = document.getElementById('cancel-call'); return b ? b.disabled : null;").await?;
    ensure!(disabled == json!(true), "the cancel button of a read-only key: {disabled}");
    screenshot(browser, "read-only").await?;
    let refused = app.send_as(&viewer, Method::DELETE, &format!("/voice-tools/cancel/{theirs}"), None, &[]).await?;
    ensure!(refused.status == 403 && refused.body["required_scope"] == "calls:write", "{}", refused.body);
    browser.find(Locator::Css("#sign-out")).await?.click().await?;
    Ok(())
}

/// The files: HTML, CSS and JavaScript of their own types, under a policy with no inline script
/// and no framing; `/dashboard` leads to `/dashboard/`; anything else is the API's JSON 404.
#[tokio::test]
async fn the_dashboard_files_carry_strict_headers() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await?;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    for (path, media) in [
        ("/dashboard/", "text/html"),
        ("/dashboard/index.html", "text/html"),
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/app.css", "text/css"),
    ] {
        let answer = http.get(app.runner.url(path)).send().await?;
        ensure!(answer.status() == 200, "{path}: {}", answer.status());
        let header =
            |name: &str| answer.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        ensure!(header("content-type").starts_with(media), "{path}: {}", header("content-type"));
        let policy = header("content-security-policy");
        ensure!(
            policy.contains("script-src 'self'")
                && policy.contains("frame-ancestors 'none'")
                && !policy.contains("unsafe"),
            "{path}: {policy}"
        );
        ensure!(header("x-content-type-options") == "nosniff", "{path}");
        ensure!(header("referrer-policy") == "no-referrer", "{path}");
        let body = answer.text().await?;
        if media == "text/html" {
            // Scripts only by src, no inline handlers or styles: the policy would block them.
            ensure!(!body.contains("<script>") && !body.contains(" onclick=") && !body.contains(" style="), "{path}");
        }
    }
    let bare = http.get(app.runner.url("/dashboard")).send().await?;
    ensure!(bare.status() == 308, "/dashboard: {}", bare.status());
    ensure!(bare.headers().get("location").and_then(|v| v.to_str().ok()) == Some("/dashboard/"), "/dashboard");
    let missing = http.get(app.runner.url("/dashboard/secret.txt")).send().await?;
    ensure!(missing.status() == 404, "{}", missing.status());
    let body: Value = missing.json().await?;
    ensure!(body["code"] == "not_found", "{body}");
    let post = http.post(app.runner.url("/dashboard/")).send().await?;
    ensure!(post.status() == 405, "{}", post.status());
    Ok(())
}

async fn get(app: &App, path: &str) -> Result<(u16, Value)> {
    let answer = app.send(Method::GET, path, None).await?;
    Ok((answer.status, answer.body))
}

/// `GET /voice-tools/calls`: newest first, filtered, page by page without a repeat or a gap;
/// `GET /voice-tools/calls/:id/callbacks`: each attempt with its answer; both refuse bad input.
#[tokio::test]
async fn the_calls_and_callbacks_routes_page_filter_and_refuse_bad_input() -> Result<()> {
    let scratch = ScratchDatabase::create("calls-api").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &["--sweep-interval", "0"]))).await?;
    let relay = Relay::start().await?;
    let session = unique("calls-api");
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(app.create_id(&session, json!({"to": format!("p{i}@example.com")}), Some(&relay.url)).await?);
    }
    ensure!(app.cancel(&made[1]).await?.status == 200, "cancel");
    let other = app.create_id(&unique("calls-api-other"), json!({"to": "o@example.com"}), None).await?;

    // Page by page, newest first: each call once, in the reverse order of creation.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let path = match &cursor {
            Some(c) => format!("/voice-tools/calls?session_id={session}&limit=3&cursor={c}"),
            None => format!("/voice-tools/calls?session_id={session}&limit=3"),
        };
        let (status, page) = get(&app, &path).await?;
        ensure!(status == 200, "{path}: {page}");
        let ids: Vec<String> = page["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["tool_call_id"].as_str().map(str::to_owned))
            .collect();
        ensure!(ids.len() <= 3, "{page}");
        seen.extend(ids);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    ensure!(seen == newest_first, "pages gave {seen:?}, expected {newest_first:?}");
    // Without a session filter the other session's call is there too.
    let (_, all) = get(&app, "/voice-tools/calls?limit=100").await?;
    let all: BTreeSet<&str> =
        all["calls"].as_array().into_iter().flatten().filter_map(|c| c["tool_call_id"].as_str()).collect();
    ensure!(all.contains(other.as_str()) && made.iter().all(|id| all.contains(id.as_str())), "{all:?}");

    // Filters: status, function name (as sent), and together.
    let (_, cancelled) = get(&app, &format!("/voice-tools/calls?session_id={session}&status=CANCELLED")).await?;
    ensure!(
        cancelled["calls"].as_array().map(Vec::len) == Some(1)
            && cancelled["calls"][0]["tool_call_id"] == made[1].as_str(),
        "{cancelled}"
    );
    ensure!(cancelled["next_cursor"].is_null(), "{cancelled}");
    let (_, by_function) =
        get(&app, &format!("/voice-tools/calls?session_id={session}&function_name={TOOL}&limit=100")).await?;
    ensure!(by_function["calls"].as_array().map(Vec::len) == Some(made.len()), "{by_function}");
    let (_, none) = get(&app, &format!("/voice-tools/calls?session_id={session}&function_name=send_email")).await?;
    ensure!(none == json!({"calls": [], "next_cursor": null}), "{none}");
    let (_, unknown_session) = get(&app, "/voice-tools/calls?session_id=nobody-here").await?;
    ensure!(unknown_session == json!({"calls": [], "next_cursor": null}), "{unknown_session}");

    // Bad input: 400 invalid_input naming the parameter.
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("status=pending", "status"),
        ("status=MODIFIED", "status"),
        ("cursor=yesterday", "cursor"),
        ("cursor=1_tc_nothex", "cursor"),
        ("session_id=", "session_id"),
        ("function_name=", "function_name"),
        ("session_id=%zz", "session_id"),
    ] {
        let (status, body) = get(&app, &format!("/voice-tools/calls?{query}")).await?;
        ensure!(status == 400 && body["code"] == "invalid_input", "{query}: {status} {body}");
        ensure!(body["fields"][0]["field"] == field, "{query}: {body}");
    }
    // A body on a read, the wrong method, no token.
    for body in ["[]", "[{}]", "\"x\"", "{\"status\": \"PENDING\"}"] {
        let answer = app
            .http
            .get(app.runner.url("/voice-tools/calls"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        ensure!(answer.status() == 400, "body {body}: {}", answer.status());
        let answer: Value = answer.json().await?;
        ensure!(answer["code"] == "invalid_input", "{answer}");
    }
    ensure!(app.send(Method::POST, "/voice-tools/calls", None).await?.status == 405, "POST");
    let anonymous = app.http.get(app.runner.url("/voice-tools/calls")).send().await?;
    ensure!(anonymous.status() == 401, "no token: {}", anonymous.status());
    let wrong = app.http.get(app.runner.url("/voice-tools/calls")).bearer_auth("wrong").send().await?;
    ensure!(wrong.status() == 401, "a wrong token: {}", wrong.status());

    // Callbacks: a cancelled call was reported once; a call with no callback has none; an
    // unknown or malformed id is a 404.
    relay.wait_for(&made[1], "completion", SETTLE).await?;
    let attempts = app.callback_attempts(&made[1], 1, SETTLE).await?;
    ensure!(attempts["tool_call_id"] == made[1].as_str(), "{attempts}");
    let first = &attempts["callbacks"][0];
    ensure!(
        first["kind"] == "completion"
            && first["status_code"] == 200
            && first["attempt"] == 1
            && first["url"] == relay.url.as_str(),
        "{attempts}"
    );
    let (status, quiet) = get(&app, &format!("/voice-tools/calls/{other}/callbacks")).await?;
    ensure!(status == 200 && quiet["callbacks"] == json!([]), "{quiet}");
    for id in ["tc_000000000000", "nope"] {
        let (status, body) = get(&app, &format!("/voice-tools/calls/{id}/callbacks")).await?;
        ensure!(status == 404 && body["code"] == "not_found", "{id}: {body}");
    }
    if app.send(Method::DELETE, &format!("/voice-tools/calls/{}/callbacks", made[0]), None).await?.status != 405 {
        bail!("DELETE on the callbacks route was not a 405");
    }
    Ok(())
}

//! Several hosts behind a real proxy, with chaos: two edge hosts balanced round-robin by
//! HAProxy (health-checked on Spin's readiness route), one executor host and one tools host,
//! one PostgreSQL and a fake Gmail that outlives them all (tests/support/cluster.rs).
//!
//! Run 1 drives 200 seed conversations of `send_email` through the proxy. Run 2 drives 200
//! more while the tools host and then the executor host are killed with SIGKILL and started
//! again on their ports, one edge is drained with SIGTERM and started again, and several
//! sweepers hit the executor host at once. After each run: every confirmed call is final
//! within `FINAL_BOUND` (60 s) and COMPLETED, exactly one email went out per COMPLETED call and
//! none for any other call, every callback is signed, no client request failed while the edge
//! drained, and in run 2 the kills hit calls in flight (some took more than one attempt).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use gatehouse_tests::cluster::Cluster;
use gatehouse_tests::lifecycle::Relay;
use gatehouse_tests::{TOKEN, unique};
use reqwest::Method;
use serde_json::{Value, json};

const CONVERSATIONS: usize = 200;
const CONCURRENCY: usize = 16;
/// How long a conversation waits for its checkpoint or completion callback.
const CALLBACK_WAIT: Duration = Duration::from_secs(90);
/// After a run, how long every confirmed call has to be final.
const FINAL_BOUND: Duration = Duration::from_secs(60);
/// How many times a client sends a request that failed (connection error or 5xx) again.
const TRIES: usize = 10;
/// Sweepers besides the executor host's own, hitting its sweep route at once.
const SWEEPERS: usize = 4;
const WRONG: &str = "jon.smiht@gmail.com";
const RIGHT: &str = "john.smith@gmail.com";

/// One request a client sent, as the client saw it.
#[derive(Clone, Debug)]
struct Attempt {
    started: Instant,
    ended: Instant,
    failed: bool,
    what: String,
}

/// A client of the public API through the proxy, recording every request it sends.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    attempts: Arc<Mutex<Vec<Attempt>>>,
}

impl Client {
    /// One request: its status and JSON body, or `None` if it failed (no answer or a 5xx).
    async fn once(&self, method: Method, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        let started = Instant::now();
        let mut request = self.http.request(method.clone(), format!("{}{path}", self.base)).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(body);
        }
        let answer = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let bytes = response.bytes().await;
                bytes.map(|b| (status, serde_json::from_slice(&b).unwrap_or(Value::Null))).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        let (failed, what) = match &answer {
            Ok((status, body)) if *status >= 500 => (true, format!("{method} {path}: {status} {body}")),
            Ok(_) => (false, String::new()),
            Err(e) => (true, format!("{method} {path}: {e}")),
        };
        if let Ok(mut attempts) = self.attempts.lock() {
            attempts.push(Attempt { started, ended: Instant::now(), failed, what });
        }
        answer.ok().filter(|(status, _)| *status < 500)
    }

    /// Sends until answered (a real client's retry policy), at most `TRIES` times.
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Result<(u16, Value, usize)> {
        for attempt in 1..=TRIES {
            if let Some((status, body)) = self.once(method.clone(), path, body.as_ref()).await {
                return Ok((status, body, attempt));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        bail!("{method} {path} failed {TRIES} times")
    }

    /// A state-changing step that answers `expected`. After a failed try the step may have
    /// happened, so a refusal on a later try is accepted if the call has moved past `before`.
    async fn step(&self, method: Method, path: &str, body: Option<Value>, expected: u16, id: &str) -> Result<()> {
        let (status, answer, tries) = self.send(method.clone(), path, body).await?;
        if status == expected {
            return Ok(());
        }
        if tries > 1 && status == 409 {
            return Ok(());
        }
        bail!("{method} {path} for {id} answered {status}: {answer}")
    }
}

/// Where the conversations of a run are.
#[derive(Default)]
struct Progress {
    created: AtomicUsize,
    resumed: AtomicUsize,
}

struct Conversation {
    id: String,
    confirmed: bool,
    elapsed: Duration,
    error: Option<String>,
}

async fn wait_for_callback(relay: &Relay, id: &str, kinds: &[&str]) -> Result<String> {
    let deadline = Instant::now() + CALLBACK_WAIT;
    loop {
        for kind in kinds {
            if relay.find(id, kind).is_some() {
                return Ok((*kind).to_owned());
            }
        }
        if Instant::now() > deadline {
            bail!("no {kinds:?} callback for {id} within {CALLBACK_WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The seed conversation: create with a wrong address, correct it, confirm, proceed at the
/// checkpoint, and wait for the completion callback.
async fn converse(client: &Client, relay: &Relay, progress: &Progress, n: usize) -> Conversation {
    let started = Instant::now();
    let mut conversation = Conversation { id: String::new(), confirmed: false, elapsed: Duration::ZERO, error: None };
    let result: Result<()> = async {
        let body = json!({"session_id": unique("scale"), "function_name": "send_email", "callback_url": relay.url,
            "parameters": {"to": WRONG, "subject": format!("Meeting {n}"), "body": "At 10, in the usual room."}});
        let (status, created, _) = client.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
        ensure!(status == 201, "create answered {status}: {created}");
        let id = created["tool_call_id"].as_str().context("no tool_call_id")?.to_owned();
        conversation.id = id.clone();
        progress.created.fetch_add(1, Ordering::Relaxed);
        let modify = json!({"parameters": {"to": RIGHT}, "reason": "the caller spelled the address"});
        client.step(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(modify), 200, &id).await?;
        client.step(Method::POST, &format!("/voice-tools/confirm/{id}"), None, 202, &id).await?;
        conversation.confirmed = true;
        if wait_for_callback(relay, &id, &["checkpoint", "completion"]).await? == "checkpoint" {
            let proceed = json!({"action": "proceed"});
            client.step(Method::POST, &format!("/resume-execution/{id}"), Some(proceed), 202, &id).await?;
            progress.resumed.fetch_add(1, Ordering::Relaxed);
            wait_for_callback(relay, &id, &["completion"]).await?;
        }
        Ok(())
    }
    .await;
    conversation.elapsed = started.elapsed();
    conversation.error = result.err().map(|e| format!("{e:#}"));
    conversation
}

/// Runs `CONVERSATIONS` conversations, `CONCURRENCY` at a time.
async fn run(client: &Client, relay: &Relay, progress: &Progress) -> Vec<Conversation> {
    futures::stream::iter(0..CONVERSATIONS)
        .map(|n| converse(client, relay, progress, n))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// What a run left behind.
struct Tally {
    /// Conversations that did not reach their end, and why.
    errors: Vec<String>,
    confirmed: usize,
    conversations: usize,
    completed: usize,
    failed: usize,
    emails: usize,
    duplicates: usize,
    lost: usize,
    /// Calls that took more than one attempt: their worker or their tool died under them.
    retried: usize,
    p50: Duration,
    p95: Duration,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Checks a run's calls once every confirmed call is final (or `FINAL_BOUND` has passed).
async fn check(cluster: &Cluster, client: &Client, relay: &Relay, conversations: &[Conversation]) -> Result<Tally> {
    let errors: Vec<String> = conversations.iter().filter_map(|c| c.error.clone()).collect();
    let confirmed: Vec<&str> = conversations.iter().filter(|c| c.confirmed).map(|c| c.id.as_str()).collect();

    // Every confirmed call final within the bound.
    let deadline = Instant::now() + FINAL_BOUND;
    let calls: Vec<Value> = loop {
        let calls: Vec<Result<Value>> = futures::stream::iter(confirmed.iter())
            .map(|id| async move {
                let (status, body, _) = client.send(Method::GET, &format!("/voice-tools/status/{id}"), None).await?;
                ensure!(status == 200, "status of {id}: {status} {body}");
                Ok(body)
            })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        let calls = calls.into_iter().collect::<Result<Vec<_>>>()?;
        let open = calls.iter().filter(|c| !matches!(c["status"].as_str(), Some("COMPLETED" | "FAILED"))).count();
        if open == 0 || Instant::now() > deadline {
            break calls;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let lost: Vec<&Value> =
        calls.iter().filter(|c| !matches!(c["status"].as_str(), Some("COMPLETED" | "FAILED"))).collect();
    for call in &lost {
        eprintln!("not final: {call}");
    }
    let failed: Vec<&Value> = calls.iter().filter(|c| c["status"] == "FAILED").collect();
    for call in &failed {
        // The fake Gmail refuses nothing, so no call has a reason to fail: each is reported.
        eprintln!("FAILED {}: {}", call["tool_call_id"], call["error_message"]);
    }

    // Exactly one sent email per COMPLETED call, and none for any other call.
    let sent = cluster.fake.sent();
    let mut emails = 0;
    let mut duplicates = 0;
    for call in &calls {
        let id = call["tool_call_id"].as_str().context("status without tool_call_id")?;
        let header = format!("<gatehouse.{id}@example.com>");
        let messages: Vec<_> =
            sent.iter().filter(|m| m.message_id_header.as_deref() == Some(header.as_str())).collect();
        emails += messages.len();
        if call["status"] == "COMPLETED" {
            ensure!(!messages.is_empty(), "COMPLETED {id} sent no email: {call}");
            ensure!(call["result"]["message_id"] == messages[0].id.as_str(), "{call}");
            duplicates += messages.len() - 1;
        } else {
            duplicates += messages.len();
        }
    }
    // Every callback for these calls verifies.
    let ids: std::collections::HashSet<&str> = confirmed.iter().copied().collect();
    let unsigned = relay
        .received()
        .iter()
        .filter(|r| r.body["tool_call_id"].as_str().is_some_and(|id| ids.contains(id)) && !r.signature_valid)
        .count();
    ensure!(unsigned == 0, "{unsigned} callbacks without a valid signature");

    let mut times: Vec<Duration> = conversations.iter().map(|c| c.elapsed).collect();
    times.sort();
    Ok(Tally {
        errors,
        confirmed: confirmed.len(),
        conversations: conversations.len(),
        completed: calls.iter().filter(|c| c["status"] == "COMPLETED").count(),
        failed: failed.len(),
        emails,
        duplicates,
        lost: lost.len(),
        retried: calls.iter().filter(|c| c["attempts"].as_i64().is_some_and(|a| a > 1)).count(),
        p50: percentile(&times, 0.5),
        p95: percentile(&times, 0.95),
    })
}

/// Waits until `count` reaches `at_least`, or the run is over.
async fn reached(count: &AtomicUsize, at_least: usize, over: &AtomicBool) {
    while count.load(Ordering::Relaxed) < at_least && !over.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the chaos did, for the report and the drain check.
struct Chaos {
    drain_window: (Instant, Instant),
    drained_exit: std::process::ExitStatus,
    resumed_at: [usize; 3],
    /// How long the tools host and the executor host were down.
    down: [Duration; 2],
}

/// Kills the tools host while sends are in flight and starts it again, then the executor, then
/// drains one edge and starts it again. Nothing else is killed while the edge drains.
async fn chaos(cluster: &mut Cluster, progress: &Progress, over: &AtomicBool) -> Result<Chaos> {
    reached(&progress.resumed, 30, over).await;
    let tools_at = progress.resumed.load(Ordering::Relaxed);
    let tools_down = cluster.tools.kill_and_restart().await?;

    reached(&progress.resumed, 80, over).await;
    let executor_at = progress.resumed.load(Ordering::Relaxed);
    let executor_down = cluster.executor.kill_and_restart().await?;

    reached(&progress.resumed, 130, over).await;
    let drain_at = progress.resumed.load(Ordering::Relaxed);
    let start = Instant::now();
    let drained_exit = cluster.edges[0].terminate()?;
    cluster.edges[0].start()?;
    // Until the proxy has seen the edge back (rise 1, checks every 200 ms) and used it.
    cluster.wait_for_proxy(Duration::from_secs(10)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(Chaos {
        drain_window: (start, Instant::now()),
        drained_exit,
        resumed_at: [tools_at, executor_at, drain_at],
        down: [tools_down, executor_down],
    })
}

/// Several sweepers at once, besides the executor host's own: each posts to the public sweep
/// route of the executor host as fast as it is answered, until the run is over.
async fn sweepers(cluster_executor_url: String, over: Arc<AtomicBool>) -> usize {
    let answered = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..SWEEPERS)
        .map(|_| {
            let (url, over, answered) = (cluster_executor_url.clone(), over.clone(), answered.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
                while !over.load(Ordering::Relaxed) {
                    match http.post(&url).bearer_auth(TOKEN).send().await {
                        Ok(r) if r.status() == 200 => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        // The executor host is down for a moment during the chaos.
                        _ => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    answered.load(Ordering::Relaxed)
}

fn row(name: &str, tally: &Tally) -> String {
    format!(
        "| {name:<5} | {:>13} | {:>9} | {:>6} | {:>6} | {:>10} | {:>4} | {:>7} | {:>8.2?} | {:>8.2?} |",
        tally.conversations,
        tally.completed,
        tally.failed,
        tally.emails,
        tally.duplicates,
        tally.lost,
        tally.retried,
        tally.p50,
        tally.p95
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conversations_through_a_proxy_survive_killed_hosts_and_a_drained_edge() -> Result<()> {
    let began = Instant::now();
    let mut cluster = Cluster::start().await?;
    let relay = Relay::start().await?;
    let client = Client {
        http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?,
        base: cluster.proxy.url.clone(),
        attempts: Arc::new(Mutex::new(Vec::new())),
    };

    // Run 1: nothing goes wrong.
    let progress = Progress::default();
    let first = run(&client, &relay, &progress).await;
    let tally1 = check(&cluster, &client, &relay, &first).await?;
    eprintln!("run 1 checked after {:.1?}", began.elapsed());
    let failures1 = client.attempts.lock().map(|a| a.iter().filter(|a| a.failed).count()).unwrap_or(usize::MAX);
    ensure!(failures1 == 0, "{failures1} client requests failed with no chaos");

    // Run 2: chaos, and several sweepers.
    let progress = Progress::default();
    let over = Arc::new(AtomicBool::new(false));
    let sweeping = tokio::spawn(sweepers(cluster.executor.url("/voice-tools/sweep"), over.clone()));
    let run2_started = Instant::now();
    let conversations = async {
        let result = run(&client, &relay, &progress).await;
        over.store(true, Ordering::Relaxed);
        result
    };
    let (second, chaos) = tokio::join!(conversations, chaos(&mut cluster, &progress, &over));
    let run2_time = run2_started.elapsed();
    let sweeps = sweeping.await?;
    let chaos = chaos?;
    let tally2 = check(&cluster, &client, &relay, &second).await?;

    let attempts = client.attempts.lock().map(|a| a.clone()).unwrap_or_default();
    let (from, to) = chaos.drain_window;
    let in_window: Vec<&Attempt> = attempts.iter().filter(|a| a.started <= to && a.ended >= from).collect();
    let failed_in_window: Vec<&Attempt> = in_window.iter().copied().filter(|a| a.failed).collect();
    let failed_in_run2: Vec<&Attempt> = attempts.iter().filter(|a| a.started >= run2_started && a.failed).collect();

    println!(
        "| run   | conversations | completed | failed | emails | duplicates | lost | retried |      p50 |      p95 |\n\
         |-------|---------------|-----------|--------|--------|------------|------|---------|----------|----------|\n{}\n{}",
        row("1", &tally1),
        row("2", &tally2)
    );
    println!(
        "run 2: {:.1?}; tools killed at {} resumed (down {:.1?}), executor at {} (down {:.1?}), edge drained at {}; drain window {:.1?} with {} \
         client requests, {} failed; client requests failed in run 2 (kills): {}; sweeps answered by the extra \
         sweepers: {sweeps}; whole test {:.1?}",
        run2_time,
        chaos.resumed_at[0],
        chaos.down[0],
        chaos.resumed_at[1],
        chaos.down[1],
        chaos.resumed_at[2],
        to - from,
        in_window.len(),
        failed_in_window.len(),
        failed_in_run2.len(),
        began.elapsed()
    );
    for attempt in failed_in_run2.iter().take(10) {
        println!("  failed: {}", attempt.what);
    }

    for (run, tally) in [(1, &tally1), (2, &tally2)] {
        for error in &tally.errors {
            println!("run {run}: {error}");
        }
        ensure!(tally.lost == 0, "run {run}: {} confirmed calls not final {FINAL_BOUND:?} after the run", tally.lost);
        ensure!(tally.duplicates == 0, "run {run}: {} emails sent twice or for no completed call", tally.duplicates);
        ensure!(
            tally.emails == tally.completed,
            "run {run}: {} emails for {} completed calls",
            tally.emails,
            tally.completed
        );
    }
    for (run, tally) in [(1, &tally1), (2, &tally2)] {
        ensure!(tally.errors.is_empty(), "run {run}: {} conversations did not finish", tally.errors.len());
        ensure!(tally.confirmed == CONVERSATIONS, "run {run}: {} calls confirmed", tally.confirmed);
    }
    ensure!(tally1.completed == CONVERSATIONS, "run 1: every call COMPLETED");
    ensure!(tally2.completed == CONVERSATIONS, "run 2: every call COMPLETED ({} FAILED)", tally2.failed);
    ensure!(tally2.retried > 0, "run 2: the kills hit no call in flight, so they proved nothing");
    ensure!(chaos.drained_exit.success(), "the drained edge exited with {}", chaos.drained_exit);
    ensure!(!in_window.is_empty(), "no client request was in flight while the edge drained");
    ensure!(
        failed_in_window.is_empty(),
        "{} client requests failed while the edge drained; the first: {}",
        failed_in_window.len(),
        failed_in_window[0].what
    );
    ensure!(sweeps > 0, "the extra sweepers were never answered");
    ensure!(
        cluster.edges.iter().all(|e| e.is_running()) && cluster.executor.is_running() && cluster.tools.is_running()
    );
    Ok(())
}

//! The application itself (spin.toml) served by the runner: health, the context route, auth,
//! and `scripts/up` from a fresh data directory.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use gatehouse_tests::{Runner, RunnerOptions, TOKEN, app_manifest, db, http, unique, workspace_root};
use serde_json::{Value, json};

fn app() -> Runner {
    Runner::start(&app_manifest(), RunnerOptions::default()).expect("runner starts")
}

#[tokio::test]
async fn health_reports_the_database() {
    let runner = app();
    let response = http().get(runner.url("/health")).send().await.expect("request");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body, json!({"status": "ok", "database": "ok"}));
}

#[tokio::test]
async fn database_down_gives_503_with_retry_after() {
    // The components get an address where nothing listens; the runner itself still migrated
    // the real database, so only the components' view of it is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let options = RunnerOptions {
        variables: vec![
            ("db_url".into(), format!("postgres://postgres@127.0.0.1:{port}/gatehouse")),
            ("db_host".into(), format!("127.0.0.1:{port}")),
        ],
        ..Default::default()
    };
    let runner = Runner::start(&app_manifest(), options).expect("runner starts");

    let response = http().get(runner.url("/health")).send().await.expect("request");
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["database"], "unavailable");

    let response = http().get(runner.url("/voice-tools/context/any")).bearer_auth(TOKEN).send().await.expect("request");
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "database_unavailable");
    let text = body.to_string();
    assert!(!text.contains("postgres://"), "the database address must not leak: {text}");

    // Every route that needs the database answers the same way, before touching anything else.
    for (method, path, body) in lifecycle_routes() {
        let response = http()
            .request(method.clone(), runner.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 503, "{method} {path}");
        assert!(response.headers().contains_key("retry-after"), "{method} {path}");
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["code"], "database_unavailable", "{method} {path}");
    }
}

/// Every public lifecycle route, with a body it would accept.
fn lifecycle_routes() -> Vec<(reqwest::Method, &'static str, Value)> {
    use reqwest::Method;
    vec![
        (Method::POST, "/voice-tools/pending", json!({"session_id": "s", "function_name": "f", "parameters": {}})),
        (Method::PATCH, "/voice-tools/modify/tc_000000000000", json!({"parameters": {"to": "a@b.c"}})),
        (Method::DELETE, "/voice-tools/cancel/tc_000000000000", json!({})),
        (Method::POST, "/voice-tools/confirm/tc_000000000000", json!({})),
        (Method::GET, "/voice-tools/status/tc_000000000000", json!({})),
        (Method::POST, "/resume-execution/tc_000000000000", json!({"action": "proceed"})),
        (Method::POST, "/voice-tools/sweep", json!({})),
        (Method::GET, "/get-session-context?session_id=s&context_key=k", json!({})),
    ]
}

#[tokio::test]
async fn the_api_token_is_required() {
    let runner = app();
    let url = runner.url("/voice-tools/context/s");
    let cases = [
        None,
        Some("Bearer wrong-token".to_owned()),
        Some(format!("Basic {TOKEN}")),
        Some(format!("Bearer {TOKEN}x")),
        Some("Bearer".to_owned()),
    ];
    for header in cases {
        let mut request = http().get(&url);
        if let Some(value) = &header {
            request = request.header("authorization", value);
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), 401, "authorization {header:?}");
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["code"], "unauthorized");
        assert!(!body.to_string().contains(TOKEN));
    }
    let response = http().get(&url).bearer_auth(TOKEN).send().await.expect("request");
    assert_eq!(response.status(), 200);
    for (method, path, body) in lifecycle_routes() {
        let response = http().request(method.clone(), runner.url(path)).json(&body).send().await.expect("request");
        assert_eq!(response.status(), 401, "{method} {path} without a token");
    }
    let response = http().get(runner.url("/voice-tools/tools")).send().await.expect("request");
    assert_eq!(response.status(), 401);
    // /health is the one public route open without a token.
    let response = http().get(runner.url("/health")).send().await.expect("request");
    assert_eq!(response.status(), 200);
}

/// Inserts a call as the lifecycle would have left it.
async fn insert_call(
    client: &tokio_postgres::Client,
    session: &str,
    n: u32,
    status: &str,
    age_secs: f64,
    expires_in_secs: Option<f64>,
) -> String {
    let id = format!("tc_{:012x}", rand_id(session, n));
    client
        .execute(
            "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status,
                                     result, voice_response, expires_at, created_at)
             VALUES ($1, $2, 'send_email', 'gmail', $3, $4, $5, $6,
                     CASE WHEN $7::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $7::float8) END,
                     now() - make_interval(secs => $8::float8))",
            &[
                &id,
                &session,
                &json!({"to": format!("user{n}@example.com"), "subject": format!("Subject {n}")}),
                &status,
                &(status == "COMPLETED").then(|| json!({"message_id": format!("m{n}")})),
                &(status == "COMPLETED").then(|| format!("Email {n} sent.")),
                &expires_in_secs,
                &age_secs,
            ],
        )
        .await
        .expect("insert");
    id
}

fn rand_id(session: &str, n: u32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (session, n).hash(&mut h);
    h.finish() & 0xffff_ffff_ffff
}

#[tokio::test]
async fn context_lists_open_calls_and_the_last_ten_settled_newest_first() {
    let runner = app();
    let client = db().await.expect("db");
    let session = unique("ctx");
    let other = unique("ctx_other");

    let pending = insert_call(&client, &session, 1, "PENDING", 5.0, Some(600.0)).await;
    let executing = insert_call(&client, &session, 2, "EXECUTING", 4.0, None).await;
    let prepared = insert_call(&client, &session, 3, "PREPARED", 3.0, Some(300.0)).await;
    // Past its deadline but not yet swept: must read as EXPIRED, and not as actionable.
    let stale = insert_call(&client, &session, 4, "PENDING", 2.0, Some(-1.0)).await;
    let mut settled = Vec::new();
    for n in 0..12u32 {
        let status = ["COMPLETED", "FAILED", "CANCELLED"][n as usize % 3];
        settled.push(insert_call(&client, &session, 100 + n, status, 100.0 + f64::from(n), None).await);
    }
    insert_call(&client, &other, 1, "PENDING", 1.0, Some(600.0)).await;

    let response = http()
        .get(runner.url(&format!("/voice-tools/context/{session}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");

    let ids = |list: &Value| -> Vec<String> {
        list.as_array().expect("list").iter().map(|c| c["tool_call_id"].as_str().expect("id").to_owned()).collect()
    };
    let mut open = ids(&body["pending"]);
    open.sort();
    let mut expected_open = vec![pending.clone(), executing, prepared];
    expected_open.sort();
    assert_eq!(open, expected_open, "pending holds exactly the open, unexpired calls");

    let recent = &body["recent"];
    let recent_ids = ids(recent);
    assert_eq!(recent_ids.len(), 10, "at most 10 settled calls");
    // Newest first: the stale call (2 s old) leads, then the settled ones in age order.
    assert_eq!(recent_ids[0], stale);
    assert_eq!(recent[0]["status"], "EXPIRED");
    assert_eq!(&recent_ids[1..], &settled[..9]);
    for call in recent.as_array().expect("list") {
        for field in ["function_name", "parameters", "result", "status", "voice_response", "created_at"] {
            assert!(call.get(field).is_some(), "recent call lacks {field}: {call}");
        }
    }
    assert_eq!(recent[1]["status"], "COMPLETED");
    assert_eq!(recent[1]["result"]["message_id"], "m100");
    assert_eq!(recent[1]["voice_response"], "Email 100 sent.");
    let created = recent[1]["created_at"].as_str().expect("timestamp");
    assert!(created.ends_with('Z') && created.contains('T'), "RFC 3339 UTC: {created}");

    let pending_call = body["pending"]
        .as_array()
        .expect("list")
        .iter()
        .find(|c| c["tool_call_id"] == pending.as_str())
        .expect("pending call");
    assert_eq!(pending_call["parameters"]["to"], "user1@example.com");
    assert!(pending_call["expires_at"].is_string());
}

/// A relay that loops leaves a session with more calls than anyone should be read back: the
/// answer lists the newest of each kind and counts the rest, up to a cap.
#[tokio::test]
async fn context_lists_are_bounded_with_their_totals_beside_them() {
    let runner = app();
    let client = db().await.expect("db");
    let session = unique("ctx_big");
    // 130 open calls (newest first: n = 0 is the youngest), 3 stale, 115 settled, all older.
    let mut open = Vec::new();
    for n in 0..130u32 {
        open.push(insert_call(&client, &session, n, "PENDING", 10.0 + f64::from(n), Some(600.0)).await);
    }
    for n in 0..3u32 {
        insert_call(&client, &session, 500 + n, "PREPARED", 5.0 + f64::from(n), Some(-1.0)).await;
    }
    for n in 0..115u32 {
        insert_call(&client, &session, 1000 + n, "COMPLETED", 1000.0 + f64::from(n), None).await;
    }
    let context = |session: String| {
        let url = runner.url(&format!("/voice-tools/context/{session}"));
        async move {
            let response = http().get(url).bearer_auth(TOKEN).send().await.expect("request");
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.expect("json")
        }
    };
    let body = context(session.clone()).await;
    let listed: Vec<&str> =
        body["pending"].as_array().expect("list").iter().filter_map(|c| c["tool_call_id"].as_str()).collect();
    let newest: Vec<&str> = open[..20].iter().map(String::as_str).collect();
    assert_eq!(listed, newest, "the 20 newest open calls, newest first");
    assert_eq!(body["pending_total"], 100, "counted up to the cap");
    assert_eq!(body["recent"].as_array().map(Vec::len), Some(10));
    // The stale calls are the newest settled ones: they read as EXPIRED before the sweep.
    assert_eq!(body["recent"][0]["status"], "EXPIRED");
    assert_eq!(body["recent"][3]["status"], "COMPLETED");
    assert_eq!(body["recent_total"], 100);

    // Below the cap the counts are exact.
    let small = unique("ctx_small");
    for n in 0..23u32 {
        insert_call(&client, &small, n, "PENDING", f64::from(n), Some(600.0)).await;
    }
    insert_call(&client, &small, 100, "FAILED", 100.0, None).await;
    insert_call(&client, &small, 101, "PENDING", 101.0, Some(-5.0)).await;
    let body = context(small).await;
    assert_eq!(body["pending"].as_array().map(Vec::len), Some(20));
    assert_eq!(body["pending_total"], 23);
    assert_eq!(body["recent_total"], 2);
    assert_eq!(body["recent"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn context_of_an_unknown_session_is_empty_and_other_methods_are_refused() {
    let runner = app();
    let url = runner.url(&format!("/voice-tools/context/{}", unique("nobody")));
    let response = http().get(&url).bearer_auth(TOKEN).send().await.expect("request");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["pending"], json!([]));
    assert_eq!(body["recent"], json!([]));
    assert_eq!((&body["pending_total"], &body["recent_total"]), (&json!(0), &json!(0)));

    let response = http().post(&url).bearer_auth(TOKEN).send().await.expect("request");
    assert_eq!(response.status(), 405);
}

/// `scripts/up` is what a newcomer runs: on a fresh state folder it must install what is
/// missing, start the embedded database, migrate and serve; Ctrl-C stops everything. It runs in
/// a newcomer's environment: without the variables Cargo sets for a test (`CARGO_PKG_NAME`,
/// `CARGO_MANIFEST_DIR`, ...), which build scripts such as ring's watch, and without the lint
/// driver the tests are built through (`RUSTC_WORKSPACE_WRAPPER`, scripts/nextest), so its
/// `cargo build` finds the runner `scripts/test` built and compiles nothing (docs/development.md).
#[tokio::test]
async fn scripts_up_serves_from_a_fresh_state_folder_and_stops_cleanly() {
    let state = workspace_root().join("target").join(unique("fresh-state"));
    let mut up = Command::new(workspace_root().join("scripts/up"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let cargos_for_the_test =
            name.starts_with("CARGO_") && !matches!(name.as_ref(), "CARGO_HOME" | "CARGO_TARGET_DIR");
        if cargos_for_the_test || name == "RUSTC_WORKSPACE_WRAPPER" {
            up.env_remove(name.as_ref());
        }
    }
    let mut child = up
        .args(["--listen", "127.0.0.1:0"])
        .env("GATEHOUSE_STATE_DIR", &state)
        .env_remove("DATABASE_URL")
        .env_remove("SPIN_VARIABLE_DB_URL")
        .env_remove("SPIN_VARIABLE_API_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("scripts/up starts");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let err_lines =
        std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<_>>());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(600)) {
            Ok(line) => {
                if let Some(address) = line.strip_prefix("Gatehouse ready on ") {
                    break address.to_owned();
                }
            }
            Err(_) => panic!("scripts/up never printed its ready line"),
        }
    };
    assert!(state.join("pgdata/PG_VERSION").exists(), "a fresh embedded database was created");

    let response = http().get(format!("{ready}/health")).send().await.expect("health");
    assert_eq!(response.status(), 200);
    // Dev mode: the default token works.
    let response =
        http().get(format!("{ready}/voice-tools/context/s")).bearer_auth("dev-token").send().await.expect("context");
    assert_eq!(response.status(), 200);

    // Then it plays the demo conversation against it, through the local Gmail-compatible server.
    let mut demo = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(120)) {
        let finished = line.contains("Gatehouse keeps serving");
        demo.push(line);
        if finished {
            break;
        }
    }
    let demo = demo.join("\n");
    assert!(demo.contains("Email sent to john.smith@gmail.com successfully!"), "the demo did not send:\n{demo}");
    assert!(demo.contains("Gatehouse keeps serving"), "scripts/up did not finish its demo:\n{demo}");

    // SIGINT, as Ctrl-C in a terminal sends; `scripts/up` passes it to the runner.
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let exit = child.wait().expect("exit");
    assert!(exit.success(), "scripts/up exits cleanly on Ctrl-C: {exit}");
    let logs = err_lines.join().expect("stderr");
    assert!(logs.iter().any(|l| l.contains("dev-token")), "dev mode says which token it uses");
    assert!(logs.iter().any(|l| l.contains("local Gmail-compatible server")), "dev mode says where mail goes");
    assert!(!state.join("pgdata/postmaster.pid").exists(), "the embedded database was stopped");
    let _ = std::fs::remove_dir_all(&state);
}

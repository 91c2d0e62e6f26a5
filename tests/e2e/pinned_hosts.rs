//! The shipped `spin.toml` and components, unchanged, under hosts built on the wasmtime of the
//! Spin releases people deploy (`crates/pinned-hosts`): wasmtime 42 for Spin 3.6 (the Spin
//! inside SpinKube's containerd shim) and 44 for Spin 4.0. Each `wasmtime-wasi-http` release
//! has its own rules (42 refuses to drop a resource while a child of it is alive); a host that
//! is stricter than the runner's must fail here, not in a cluster. See docs/deploying.md.

use anyhow::{Context, Result, ensure};
use gatehouse_tests::gmail::{SENDER, gmail_variables, start_fake};
use gatehouse_tests::lifecycle::{App, CALLBACK_SECRET, Relay};
use gatehouse_tests::{TOKEN, gatehouse_bin, http, pinned_host_bin, unique, vector};
use reqwest::Method;
use serde_json::{Value, json};

/// Both shipped tools, as spin.toml's default registry has them.
const BOTH_TOOLS: &str = "send_email|send_gmail=gmail,query_vector_db=vector-query";

/// The seed's conversation (`gatehouse demo`) and a vector query, through the lifecycle and
/// through the gated direct flow, on the host `binary`, which must report `wasmtime`.
async fn serves_the_application(binary: &str, wasmtime: &str) -> Result<()> {
    let fake = start_fake().await?;
    let gmail = gmail_variables(&fake);
    let mut variables: Vec<(&str, &str)> =
        gmail.iter().filter(|(name, _)| name != "tool_registry").map(|(n, v)| (n.as_str(), v.as_str())).collect();
    variables.push(("tool_registry", BOTH_TOOLS));
    let (app, _) = vector::start_on(Some(pinned_host_bin(binary)), &variables).await?;
    let logs = |app: &App| app.runner.logs().join("\n");

    let info: Value = http().get(app.runner.url("/.well-known/spin/info")).send().await?.json().await?;
    let version = info["wasmtime"].as_str().unwrap_or_default();
    ensure!(version.starts_with(&format!("{wasmtime}.")), "{binary} runs on wasmtime {version}, not {wasmtime}");

    let health = app.send(Method::GET, "/health", None).await?;
    ensure!(health.status == 200, "/health answered {}: {}\n{}", health.status, health.body, logs(&app));

    let demo = tokio::process::Command::new(gatehouse_bin())
        .args(["demo", "--url", &app.runner.base_url, "--token", TOKEN, "--callback-secret", CALLBACK_SECRET])
        .args(["--relay-listen", &gatehouse_tests::free_relay_address()?.to_string()])
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&demo.stdout);
    ensure!(
        demo.status.success(),
        "the demo failed:\n{stdout}\n{}\n{}",
        String::from_utf8_lossy(&demo.stderr),
        logs(&app)
    );
    ensure!(
        stdout.contains("PENDING -> MODIFIED -> EXECUTING -> PREPARED -> EXECUTING -> COMPLETED"),
        "the seed conversation did not complete:\n{stdout}"
    );
    let sent = fake.sent();
    ensure!(sent.len() == 1, "{} emails sent, not one", sent.len());
    ensure!(String::from_utf8_lossy(&sent[0].raw).contains(SENDER), "sent from the configured sender");

    let session = unique("pinned");
    let parameters = json!({"user_query": "Q3 sales data northwest", "structured_query": {"top_k": 3}});
    let body = json!({"session_id": session, "function_name": "query_vector_db", "parameters": parameters});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create answered {}: {}\n{}", created.status, created.body, logs(&app));
    let id = created.body["tool_call_id"].as_str().context("no tool_call_id")?;
    let confirmed =
        app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=20")]).await?;
    ensure!(confirmed.body["status"] == "COMPLETED", "the search did not complete: {}\n{}", confirmed.body, logs(&app));
    let first = &confirmed.body["result"]["documents"][0]["id"];
    ensure!(first == "kb-sales-northwest-2024q3", "the search found {first} first");

    let relay = Relay::start().await?;
    let direct = json!({
        "intent_id": "intent_pinned", "session_id": session, "callback_url": relay.url,
        "user_query": "Q3 sales data northwest",
        "structured_query": {"filters": {"region": ["Northwest"]}},
    });
    let answer = app.send(Method::POST, "/query-vector-db", Some(direct)).await?;
    ensure!(
        answer.status == 200 && answer.body["status"] == "COMPLETED",
        "direct flow: {}\n{}",
        answer.body,
        logs(&app)
    );
    let id = answer.body["tool_call_id"].as_str().context("no tool_call_id")?;
    let kinds: Vec<String> = relay.for_call(id).iter().map(|c| c.kind.clone()).collect();
    ensure!(kinds == ["progress", "completion"], "the relay heard {kinds:?}");
    ensure!(relay.for_call(id).iter().all(|c| c.signature_valid), "every callback is signed");
    Ok(())
}

/// Spin 3.6 (SpinKube's shim): wasmtime 42 refused every request of the components that kept
/// a request's `headers` handle while taking its body ("resource has children").
#[tokio::test]
async fn wasmtime_42_of_spin_3_6_serves_the_application() -> Result<()> {
    serves_the_application("gatehouse-wasmtime42", "42").await
}

/// Spin 4.0.
#[tokio::test]
async fn wasmtime_44_of_spin_4_0_serves_the_application() -> Result<()> {
    serves_the_application("gatehouse-wasmtime44", "44").await
}

/// A pinned runner builds the runner's own sources, so it needs every crate they use: a
/// dependency added to the runner alone would break only the CI build of the pinned hosts,
/// which takes long enough that it is often not run before a commit. Checked from the
/// manifests (`cargo metadata`), in a second.
#[test]
fn each_pinned_runner_has_the_runners_dependencies() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(gatehouse_tests::workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    // Each dependency as the sources name it (its rename, if any), with the features it enables.
    let dependencies = |name: &str| -> std::collections::BTreeSet<String> {
        let package =
            packages.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name} is in the workspace"));
        package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|dependency| dependency["kind"].is_null())
            .map(|dependency| {
                let used_as = dependency["rename"].as_str().or(dependency["name"].as_str()).unwrap_or_default();
                format!("{used_as} {}", dependency["features"])
            })
            .collect()
    };
    let runner = dependencies("gatehouse");
    for pinned in ["gatehouse-wasmtime42", "gatehouse-wasmtime44"] {
        let has = dependencies(pinned);
        let missing: Vec<_> = runner.difference(&has).collect();
        assert!(missing.is_empty(), "{pinned} builds the runner's sources without {missing:?}");
    }
}

//! Tools written with the SDKs (docs/tools.md, "A tool in any language"): a team's own Python web
//! service serving a tool with the gatehouse-tool package, from a process and a port of its own,
//! signed; and a Python and a TypeScript component, each rendered from its template by
//! `gatehouse new tool` and built from source by sdk/test. Each keeps the contract by the conformance kit, completes a call with
//! a checkpoint through the lifecycle, and has its history recorded for it by the lifecycle.
//! And a newcomer's: `gatehouse new tool --backend` in an application's folder, the manifest used
//! as it wrote it, each tool placing its order with a backend on a port of its own.
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_tests::http_server::{Exchange, Reply, serve_on};
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase, tool_options};
use gatehouse_tests::python_service::PythonService;
use gatehouse_tests::{RunnerOptions, app_manifest, gatehouse_bin, pinned_host_bin, unique, workspace_root};
use reqwest::Method;
use serde_json::{Value, json};

const SECRET: &str = "tool-sdks-contract-secret";
const SETTLE: Duration = Duration::from_secs(20);

/// The conformance kit (`gatehouse tools check ...`) on the contract at `url`, or with
/// `--through APP COMPONENT` on a component through the application: every rule passes.
async fn passes_the_kit(target: &[&str]) -> Result<()> {
    let output = tokio::process::Command::new(gatehouse_bin())
        .args(["tools", "check"])
        .args(target)
        .env("GATEHOUSE_CONTRACT_SECRET", SECRET)
        .env("GATEHOUSE_TOKEN", gatehouse_tests::TOKEN)
        .output()
        .await?;
    let printed = String::from_utf8_lossy(&output.stdout);
    ensure!(output.status.success(), "{printed}{}", String::from_utf8_lossy(&output.stderr));
    ensure!(printed.lines().filter(|line| line.contains("  pass")).count() == 11, "every rule passes:\n{printed}");
    Ok(())
}

#[tokio::test]
async fn a_python_service_keeps_the_contract() -> Result<()> {
    let clinic = PythonService::start_clinic(SECRET).await?;
    passes_the_kit(&[&clinic.contract_url]).await?;
    let book = clinic.book().await?;
    ensure!(book["moves"].as_array().is_some_and(|moves| moves.len() == 1), "the kit's execute ran once: {book}");
    ensure!(book["holds"] == json!({}), "the kit's discarded hold was released: {book}");
    Ok(())
}

fn move_appointment(session: &str, relay: &Relay, new_time: &str) -> Value {
    json!({
        "session_id": session,
        "function_name": "reschedule_appointment",
        "parameters": {"appointment_id": "A-101", "new_time": new_time},
        "callback_url": relay.url,
    })
}

#[tokio::test]
async fn a_python_service_completes_a_call_with_a_checkpoint_and_its_history_is_recorded() -> Result<()> {
    let clinic = PythonService::start_clinic(SECRET).await?;
    let scratch = ScratchDatabase::create("tool-sdk").await?;
    let registry = format!("move_appointment|reschedule_appointment={}", clinic.contract_url);
    let app = App::start_on(&app_manifest(), scratch.serve(tool_options(SECRET, Some(registry)))).await?;
    let relay = Relay::start().await?;

    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(move_appointment(&unique("clinic"), &relay, "2026-12-03T11:30")),
        )
        .await?;
    ensure!(created.status == 201, "{}", created.body);
    ensure!(
        created.body["message"] == "I'll move appointment A-101 to 2026-12-03 at 11:30. Shall I?",
        "{}",
        created.body
    );
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(
        checkpoint.body["message"] == "I've held 2026-12-03 at 11:30. Shall I move the appointment?",
        "{}",
        checkpoint.body
    );
    ensure!(clinic.book().await?["holds"]["2026-12-03T11:30"] == id.as_str(), "the slot is held for the call");
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(completion.body["voice_response"] == "Done: A-101 is now at 2026-12-03 at 11:30.", "{}", completion.body);
    let book = clinic.book().await?;
    ensure!(book["moves"] == json!([["A-101", "2026-12-03T11:30"]]) && book["holds"] == json!({}), "{book}");

    // A cancel at the checkpoint has the tool release its hold.
    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(move_appointment(&unique("clinic"), &relay, "2026-12-04T08:00")),
        )
        .await?;
    let cancelled = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&cancelled).await?.status == 202);
    relay.wait_for(&cancelled, "checkpoint", SETTLE).await?;
    ensure!(!clinic.book().await?["holds"].as_object().context("holds")?.is_empty(), "held at the checkpoint");
    ensure!(app.cancel(&cancelled).await?.status == 200);
    let deadline = Instant::now() + SETTLE;
    while clinic.book().await?["holds"] != json!({}) {
        if Instant::now() > deadline {
            bail!("the hold was never released: {}", clinic.book().await?);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The service writes no history; the lifecycle wrote a row for each operation, with its
    // duration and outcome.
    let stats = app.stats_when("move_appointment", SETTLE, |stats| stats["by_operation"]["discard"]["ok"] == 1).await?;
    for (operation, count) in [("validate", 2), ("prepare", 2), ("execute", 1), ("discard", 1)] {
        let counted = &stats["by_operation"][operation];
        ensure!(counted["executions"] == count && counted["ok"] == count, "{operation}: {stats}");
    }
    let page = app.send(Method::GET, "/voice-tools/tools/move_appointment/executions", None).await?;
    let executions = page.body["executions"].as_array().context("executions")?;
    ensure!(executions.len() == 6, "{}", page.body);
    ensure!(
        executions.iter().all(|e| e["outcome"] == "ok" && e["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0)),
        "{}",
        page.body
    );
    ensure!(executions.iter().all(|e| e["component"] == clinic.contract_url.as_str()), "{}", page.body);
    Ok(())
}

/// A Python, a TypeScript and a Rust tool, each rendered from its template's example (an order
/// with a quote as its checkpoint) and built by sdk/test, in one application
/// (tests/fixtures/sdk-tools.toml; starting it compiles every component, so it is started once).
#[tokio::test]
async fn components_rendered_from_each_template_keep_the_contract_and_complete_a_call() -> Result<()> {
    each_template_tool_on(None).await
}

/// The same built files on the hosts pinned to the wasmtime of Spin 3.6 (SpinKube's shim) and
/// Spin 4.0 (crates/pinned-hosts): componentize-py's and componentize-js's components hold
/// wasi:http resources their own way, and wasmtime 42 traps on a resource dropped before its
/// children.
#[tokio::test]
async fn components_rendered_from_each_template_run_on_the_wasmtime_of_spin_3_6_and_4_0() -> Result<()> {
    for host in ["gatehouse-wasmtime42", "gatehouse-wasmtime44"] {
        each_template_tool_on(Some(host)).await.with_context(|| format!("on {host}"))?;
    }
    Ok(())
}

/// The three template tools in tests/fixtures/sdk-tools.toml, served by `host` (a pinned
/// runner) or the runner, each completing a call and passing the kit.
async fn each_template_tool_on(host: Option<&str>) -> Result<()> {
    // A database of its own, so the tools' stats are this run's alone.
    let scratch = ScratchDatabase::create(&format!("sdk-{}", host.unwrap_or("components"))).await?;
    let manifest = workspace_root().join("tests/fixtures/sdk-tools.toml");
    let options = RunnerOptions { binary: host.map(pinned_host_bin), ..tool_options(SECRET, None) };
    let app = App::start_on(&manifest, scratch.serve(options)).await?;
    let db = scratch.connect().await?;
    // (tool, its template, whether the kit checks it through the application)
    let tools = [
        ("order_supplies", "tool-python", false),
        ("order_stationery", "tool-typescript", false),
        ("order_parts", "tool-rust", true),
    ];
    for (tool, template, through) in tools {
        a_component_completes_a_call(&app, &db, tool, through).await.with_context(|| format!("{tool} ({template})"))?;
    }
    Ok(())
}

/// `tool` completes a call, keeps its own table in its own schema, has its history recorded
/// (by the lifecycle for an SDK's tool, by crates/tool for the Rust one), and passes the kit.
async fn a_component_completes_a_call(
    app: &App,
    db: &tokio_postgres::Client,
    tool: &str,
    through_the_application: bool,
) -> Result<()> {
    let component = tool.replace('_', "-");
    let relay = Relay::start().await?;
    let order = json!({
        "session_id": unique("order"),
        "function_name": tool,
        "parameters": {"item": "printer paper", "quantity": 3},
        "callback_url": relay.url,
    });
    let created = app.send(Method::POST, "/voice-tools/pending", Some(order)).await?;
    ensure!(created.status == 201, "{}", created.body);
    ensure!(created.body["message"] == "I'll order 3 of printer paper. Shall I?", "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(
        checkpoint.body["message"] == "I've got a quote for 3 of printer paper. Shall I place the order?",
        "{}",
        checkpoint.body
    );
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    let order_number = completion.body["result"]["order"].as_str().context("an order number")?;
    ensure!(
        completion.body["voice_response"] == format!("Ordered. The order number is {order_number}.").as_str(),
        "{}",
        completion.body
    );

    // The tool's own table, in its own schema, migrated with its own numbering beside the core's.
    let quote =
        db.query_one(&format!("SELECT ordered FROM tool_{tool}.quotes WHERE tool_call_id = $1"), &[&id]).await?;
    ensure!(quote.get::<_, bool>(0), "the quote was ordered");
    let own = db.query_one(&format!("SELECT max(version) FROM tool_{tool}.refinery_schema_history"), &[]).await?;
    ensure!(own.get::<_, Option<i32>>(0) == Some(1), "the tool's history has its one migration");
    let core = db.query_one("SELECT count(*) FROM public.refinery_schema_history WHERE name = 'quotes'", &[]).await?;
    ensure!(core.get::<_, i64>(0) == 0, "the core's history does not know the tool's migration");

    // The call's three operations, each once, in the tool's history.
    let stats = app.stats_when(tool, SETTLE, |stats| stats["by_operation"]["execute"]["ok"] == 1).await?;
    for operation in ["validate", "prepare", "execute"] {
        let counted = &stats["by_operation"][operation];
        ensure!(counted["executions"] == 1 && counted["ok"] == 1, "{operation}: {stats}");
        ensure!(counted["p50_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{operation}: {stats}");
    }

    // Last, as the kit's own calls add to the history. A Rust tool checks each call against
    // Gatehouse's record of it, so the kit makes real calls through the application.
    if through_the_application {
        passes_the_kit(&["--through", &app.runner.base_url, &component]).await
    } else {
        passes_the_kit(&[&format!("{}/internal/tools/{component}", app.runner.base_url)]).await
    }
}

/// A newcomer's Python and TypeScript tools, made by following docs/tools.md ("A tool in any
/// language"): `gatehouse new tool NAME --lang L --backend ORIGIN` run in the folder of a
/// Gatehouse application writes every manifest entry (routes, component, variables, migrations,
/// registry entry, the backend's origin), and the application serves them with its manifest as
/// written. Each tool's `execute` places its order with the backend, a stand-in on a port of its
/// own, once. The components are the ones sdk/test built from the same templates (copied where
/// `gatehouse build` would write them: building them again here would take minutes).
#[tokio::test]
async fn a_newcomers_tools_reach_their_backend_with_no_hand_edit_to_the_manifest() -> Result<()> {
    let orders: Arc<Mutex<Vec<Exchange>>> = Arc::default();
    let received = orders.clone();
    let backend = serve_on("127.0.0.1:0", move |exchange: Exchange| {
        let received = received.clone();
        async move {
            let Ok(mut orders) = received.lock() else { return Reply::json(500, json!({})) };
            orders.push(exchange);
            Reply::json(200, json!({"order": format!("B-{}", orders.len())}))
        }
    })
    .await?;

    let root = workspace_root();
    let folder = root.join("target/sdk").join(unique("newcomer"));
    std::fs::create_dir_all(&folder)?;
    // The newcomer's application: the repository's, as its own spin.toml (a manifest that extends
    // it, with the shipped registry).
    std::fs::write(
        folder.join("spin.toml"),
        format!(
            "spin_manifest_version = 2\nextends = {:?}\n\n[application]\nname = \"newcomer\"\n\n[variables]\n\
             tool_registry = {{ default = \"send_email|send_gmail=gmail,query_vector_db=vector-query\" }}\n",
            root.join("spin.toml").display().to_string()
        ),
    )?;
    for (tool, language) in [("order_supplies", "python"), ("order_stationery", "typescript")] {
        let output = std::process::Command::new(gatehouse_bin())
            .args(["new", "tool", tool, "--lang", language, "--backend", &backend])
            .current_dir(&folder)
            .env_remove("GATEHOUSE_MANIFEST")
            .output()?;
        ensure!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let component = tool.replace('_', "-");
        let built = root.join("target/sdk/tools").join(&component).join("app.wasm");
        std::fs::copy(&built, folder.join(&component).join("app.wasm"))
            .with_context(|| format!("{} (sdk/test builds it)", built.display()))?;
    }

    let result = newcomers_tools_complete_calls(&folder, &orders).await;
    let _ = std::fs::remove_dir_all(&folder);
    result
}

async fn newcomers_tools_complete_calls(folder: &Path, orders: &Mutex<Vec<Exchange>>) -> Result<()> {
    let manifest = std::fs::read_to_string(folder.join("spin.toml"))?;
    for written in
        ["order_supplies_backend_url", "order_supplies=order-supplies", "/internal/tools/order-stationery/..."]
    {
        ensure!(manifest.contains(written), "gatehouse new tool wrote {written}:\n{manifest}");
    }
    let scratch = ScratchDatabase::create("sdk-newcomer").await?;
    let app = App::start_on(&folder.join("spin.toml"), scratch.serve(tool_options(SECRET, None))).await?;
    for (placed, tool) in ["order_supplies", "order_stationery"].into_iter().enumerate() {
        let relay = Relay::start().await?;
        let order = json!({
            "session_id": unique("newcomer"),
            "function_name": tool,
            "parameters": {"item": "printer paper", "quantity": 3},
            "callback_url": relay.url,
        });
        let created = app.send(Method::POST, "/voice-tools/pending", Some(order)).await?;
        ensure!(created.status == 201, "{tool}: {}", created.body);
        let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
        ensure!(app.confirm(&id).await?.status == 202);
        relay.wait_for(&id, "checkpoint", SETTLE).await.with_context(|| tool.to_owned())?;
        ensure!(app.resume(&id, "proceed").await?.status == 202);
        let completion = relay.wait_for(&id, "completion", SETTLE).await?;
        let number = format!("B-{}", placed + 1);
        ensure!(completion.body["status"] == "COMPLETED", "{tool}: {}", completion.body);
        ensure!(
            completion.body["result"]["order"] == number.as_str(),
            "{tool}: the backend's number: {}",
            completion.body
        );
        let orders = orders.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
        ensure!(orders.len() == placed + 1, "{tool}: one order each: {orders:?}");
        let sent = &orders[placed];
        ensure!(sent.method == "POST" && sent.path == "/orders", "{tool}: {sent:?}");
        ensure!(sent.header("idempotency-key") == Some(format!("{id}-order").as_str()), "{tool}: {sent:?}");
        let body: Value = serde_json::from_slice(&sent.body)?;
        ensure!(body == json!({"item": "printer paper", "quantity": 3}), "{tool}: {body}");
    }
    Ok(())
}

/// The sweeper forgets an SDK tool's call records a week after their last change, oldest first,
/// and keeps younger ones (migrations/V16__tool_sdk_calls.sql; crates/lifecycle/src/sweep.rs).
#[tokio::test]
async fn the_sweeper_forgets_sdk_call_records_a_week_old() -> Result<()> {
    let scratch = ScratchDatabase::create("sdk-forget").await?;
    let app = App::start_on(&app_manifest(), scratch.serve(tool_options(SECRET, None))).await?;
    let db = scratch.connect().await?;
    db.execute(
        "INSERT INTO tool_sdk_calls (tool, tool_call_id, version, record, updated_at) VALUES \
         ('order_supplies', 'tc_old', 3, '{}', now() - interval '8 days'), \
         ('order_supplies', 'tc_young', 3, '{}', now() - interval '6 days')",
        &[],
    )
    .await?;
    ensure!(app.sweep().await?.status == 200);
    let deadline = Instant::now() + SETTLE;
    loop {
        let left: Vec<String> = db
            .query("SELECT tool_call_id FROM tool_sdk_calls ORDER BY 1", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if left == ["tc_young"] {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "after the sweep the records are {left:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! `query_vector_db` end to end (docs/architecture.md, "Vector search"): the `vector-query`
//! component served by the runner, embedding with the host's all-MiniLM-L6-v2 or an
//! OpenAI-compatible server, searching the sample knowledge base in a real PostgreSQL with
//! pgvector, through the lifecycle routes and through the gated `POST /query-vector-db`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{Answer, App, ProgressReply, Relay};
use gatehouse_tests::unique;
use gatehouse_tests::vector::{self, EmbeddingsServer};
use reqwest::Method;
use serde_json::{Map, Value, json};

const SETTLE: Duration = Duration::from_secs(20);
const CONTEXT_KEY: &str = "last_query_results";

/// Creates a `query_vector_db` call and confirms it, waiting for the outcome.
async fn query(app: &App, session: &str, parameters: Value, callback_url: Option<&str>) -> Result<Value> {
    let mut body = json!({"session_id": session, "function_name": "query_vector_db", "parameters": parameters});
    if let Some(url) = callback_url {
        body["callback_url"] = json!(url);
    }
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create answered {}: {}", created.status, created.body);
    let id = created.body["tool_call_id"].as_str().context("no tool_call_id")?;
    let confirmed =
        app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=20")]).await?;
    ensure!(confirmed.status == 200, "confirm answered {}: {}", confirmed.status, confirmed.body);
    ensure!(confirmed.body["status"] == "COMPLETED", "the search did not complete: {}", confirmed.body);
    Ok(confirmed.body)
}

fn ids(documents: &Value) -> Vec<String> {
    documents.as_array().into_iter().flatten().filter_map(|d| d["id"].as_str().map(str::to_owned)).collect()
}

/// The labelled queries find their document among the first three results.
#[tokio::test]
async fn labelled_queries_find_their_document_in_the_top_three() -> Result<()> {
    let (app, _) = vector::start(&[]).await?;
    let session = unique("labelled");
    let queries = vector::labelled_queries()?;
    ensure!(queries.len() >= 24, "only {} labelled queries", queries.len());
    let mut misses = Vec::new();
    for labelled in &queries {
        let mut structured = json!({"top_k": 3});
        if let Some(filters) = labelled.get("filters") {
            structured["filters"] = filters.clone();
        }
        let parameters = json!({"user_query": labelled["query"], "structured_query": structured});
        let call = query(&app, &session, parameters, None).await?;
        // A search without filters goes through the nearest-neighbour index; one whose filters
        // match a few of these documents sorts every match by distance.
        let filtered = labelled.get("filters").is_some_and(|f| f.as_object().is_some_and(|f| !f.is_empty()));
        ensure!(
            call["result"]["metrics"]["sorted_exactly"] == filtered,
            "{}: {}",
            labelled["query"],
            call["result"]["metrics"]
        );
        let found = ids(&call["result"]["documents"]);
        if !found.iter().any(|id| labelled["expected_id"] == id.as_str()) {
            misses.push(format!("{} → {found:?}, expected {}", labelled["query"], labelled["expected_id"]));
        }
    }
    let hit_rate = 1.0 - misses.len() as f64 / queries.len() as f64;
    println!(
        "retrieval: {} of {} labelled queries in the top 3 ({:.1}%)",
        queries.len() - misses.len(),
        queries.len(),
        hit_rate * 100.0
    );
    for miss in &misses {
        println!("  miss: {miss}");
    }
    ensure!(hit_rate >= 0.9, "hit rate {:.1}% is below 90%: {misses:#?}", hit_rate * 100.0);
    Ok(())
}

/// One filter combination: the filters as the agent writes them, and the same condition
/// written independently for the check.
struct Case {
    filters: Value,
    matches: fn(&Value) -> bool,
    sql: &'static str,
}

fn region(doc: &Value) -> &str {
    doc["metadata"]["region"].as_str().unwrap_or_default()
}

fn date(doc: &Value) -> &str {
    doc["doc_date"].as_str().unwrap_or_default()
}

fn category(doc: &Value) -> &str {
    doc["metadata"]["category"].as_str().unwrap_or_default()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            filters: json!({"date_start": "2024-07-01", "date_end": "2024-09-30"}),
            matches: |d| ("2024-07-01".."2024-10-01").contains(&date(d)),
            sql: "doc_date BETWEEN '2024-07-01' AND '2024-09-30'",
        },
        Case {
            filters: json!({"region": ["Northwest", "southeast"]}),
            matches: |d| ["Northwest", "Southeast"].contains(&region(d)),
            sql: "metadata->>'region' IN ('Northwest', 'Southeast')",
        },
        Case {
            filters: json!({"category": "shipping_incident", "severity": "high"}),
            matches: |d| category(d) == "shipping_incident" && d["metadata"]["severity"] == "high",
            sql: "metadata->>'category' = 'shipping_incident' AND metadata->>'severity' = 'high'",
        },
        Case {
            filters: json!({"year": 2025, "category": "sales_report"}),
            matches: |d| d["metadata"]["year"] == 2025 && category(d) == "sales_report",
            sql: "(metadata->>'year')::int = 2025 AND metadata->>'category' = 'sales_report'",
        },
        Case {
            filters: json!({"date_start": "2025-01-01", "region": "Midwest", "category": "inventory"}),
            matches: |d| date(d) >= "2025-01-01" && region(d) == "Midwest" && category(d) == "inventory",
            sql: "doc_date >= '2025-01-01' AND metadata->>'region' = 'Midwest' AND metadata->>'category' = 'inventory'",
        },
        Case {
            filters: json!({"date_start": "2024-01-01", "date_end": "2024-12-31", "region": ["Northwest", "Northeast"], "category": "sales_report"}),
            matches: |d| {
                date(d).starts_with("2024-")
                    && ["Northwest", "Northeast"].contains(&region(d))
                    && category(d) == "sales_report"
            },
            sql: "doc_date BETWEEN '2024-01-01' AND '2024-12-31' AND metadata->>'region' IN ('Northwest', 'Northeast') AND metadata->>'category' = 'sales_report'",
        },
    ]
}

/// Every filter combination returns only matching documents, nearest first; the counts and
/// totals equal what SQL written independently computes over the same documents.
#[tokio::test]
async fn filters_return_only_matching_documents_and_totals_match_sql() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let db = gatehouse_tests::connect(&url).await?;
    let session = unique("filters");
    let fields = ["revenue", "units", "incident_cost", "on_hand"];
    for case in cases() {
        let parameters = json!({
            "user_query": "sales and operations updates",
            "structured_query": {"filters": case.filters, "top_k": 50, "aggregate": fields},
        });
        let call = query(&app, &session, parameters, None).await?;
        let result = &call["result"];
        let documents = result["documents"].as_array().context("no documents")?;
        for doc in documents {
            ensure!((case.matches)(doc), "{} does not match {}: {doc}", doc["id"], case.filters);
        }
        let scores: Vec<f64> = documents.iter().filter_map(|d| d["score"].as_f64()).collect();
        ensure!(scores.windows(2).all(|w| w[0] >= w[1]), "not nearest first: {scores:?}");

        let expected = db
            .query_one(
                &format!(
                    // The first tenant's documents, the ones its search reads: another test may
                    // hold another tenant's in the same table meanwhile.
                    "SELECT count(*), {} FROM documents WHERE tenant_id = 'default' AND ({})",
                    fields
                        .iter()
                        .map(|f| format!("coalesce(sum((metadata->>'{f}')::float8), 0), count(metadata->>'{f}')"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    case.sql
                ),
                &[],
            )
            .await?;
        let matched: i64 = expected.get(0);
        ensure!(matched > 0, "the case {} matches nothing; it tests nothing", case.filters);
        ensure!(
            result["metrics"]["matched"] == matched,
            "matched {} != {matched} for {}",
            result["metrics"]["matched"],
            case.filters
        );
        ensure!(documents.len() as i64 == matched.min(50), "{} documents for {matched} matches", documents.len());
        // A few dozen matches: the planner expects few, so they are all sorted by distance.
        ensure!(result["metrics"]["sorted_exactly"] == true, "{}: {}", case.filters, result["metrics"]);
        for (i, field) in fields.iter().enumerate() {
            let sum: f64 = expected.get(1 + 2 * i);
            let counted: i64 = expected.get(2 + 2 * i);
            let total = result["metrics"]["totals"][field].as_f64().context("no total")?;
            ensure!((total - sum).abs() < 0.01, "{field}: total {total} != SQL {sum} for {}", case.filters);
            ensure!(result["metrics"]["counted"][field] == counted, "{field}: counted for {}", case.filters);
        }
    }
    Ok(())
}

/// The seed's question: totals over every matching report (not only those returned), said in
/// one sentence with the figures.
#[tokio::test]
async fn totals_cover_every_match_and_the_summary_says_them() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let db = gatehouse_tests::connect(&url).await?;
    let parameters = json!({
        "user_query": "Q3 sales data northwest",
        "structured_query": {
            "semantic_query": "quarterly sales",
            "filters": {"date_start": "2024-07-01", "date_end": "2024-12-31", "region": ["Northwest", "Southwest"], "category": "sales_report"},
            "top_k": 1,
            "aggregate": ["revenue"]
        }
    });
    let call = query(&app, &unique("totals"), parameters, None).await?;
    let row = db
        .query_one(
            "SELECT count(*), sum((metadata->>'revenue')::float8) FROM documents
              WHERE metadata->>'category' = 'sales_report' AND metadata->>'region' IN ('Northwest', 'Southwest')
                AND doc_date BETWEEN '2024-07-01' AND '2024-12-31'",
            &[],
        )
        .await?;
    let (count, revenue): (i64, f64) = (row.get(0), row.get(1));
    assert_eq!(count, 4);
    assert_eq!(call["result"]["metrics"]["returned"], 1);
    assert_eq!(call["result"]["metrics"]["matched"], 4);
    assert_eq!(call["result"]["metrics"]["totals"]["revenue"].as_f64(), Some(revenue));
    let millions = format!("${:.1}M", revenue / 1e6).replace(".0M", "M");
    let summary = call["result"]["summary"].as_str().unwrap_or_default();
    assert_eq!(
        summary,
        format!(
            "I found 4 documents about quarterly sales in Northwest and Southwest between July 1 and December 31, 2024 where category is sales_report; revenue totals {millions} across all 4 of them."
        )
    );
    assert_eq!(call["voice_response"], summary);
    Ok(())
}

/// Through the lifecycle: the completion says the results are available, the agent can read
/// them back, and they expire after `context_ttl_seconds`.
#[tokio::test]
async fn results_become_session_context_until_they_expire() -> Result<()> {
    let (app, url) = vector::start(&[("context_ttl_seconds", "3")]).await?;
    let relay = Relay::start().await?;
    let session = unique("context");
    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(json!({
                "session_id": session,
                "function_name": "query_vector_db",
                "callback_url": relay.url,
                "parameters": {
                    "user_query": "Q3 sales data northwest",
                    "structured_query": {
                        "semantic_query": "quarterly sales northwest",
                        "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": "northwest"},
                        "aggregate": ["revenue"]
                    }
                }
            })),
        )
        .await?;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.body["message"],
        "I'll search for quarterly sales northwest in Northwest between July 1 and September 30, 2024, and total the revenue. Is that right?"
    );
    assert_eq!(created.body["parameters"]["structured_query"]["filters"]["region"], json!(["Northwest"]));
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    let confirmed =
        app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=20")]).await?;
    assert_eq!(confirmed.body["status"], "COMPLETED", "{}", confirmed.body);
    assert_eq!(confirmed.body["result"]["context_key"], CONTEXT_KEY);
    assert!(ids(&confirmed.body["result"]["documents"]).contains(&"kb-sales-northwest-2024q3".to_owned()));

    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert!(completion.signature_valid);
    assert_eq!(completion.body["status"], "COMPLETED");
    assert_eq!(completion.body["context_available"], true);
    assert_eq!(completion.body["context_key"], CONTEXT_KEY);
    assert_eq!(completion.body["voice_response"], confirmed.body["voice_response"]);

    let path = format!("/get-session-context?session_id={session}&context_key={CONTEXT_KEY}");
    let stored = app.send(Method::GET, &path, None).await?;
    assert_eq!(stored.status, 200, "{}", stored.body);
    let context = &stored.body["context"];
    assert_eq!(context["tool_call_id"], id.as_str());
    assert_eq!(context["summary"], confirmed.body["voice_response"]);
    assert_eq!(context["documents"], confirmed.body["result"]["documents"]);
    assert_eq!(context["metrics"]["totals"], confirmed.body["result"]["metrics"]["totals"]);
    assert_eq!(context["parameters"], created.body["parameters"]);

    let db = gatehouse_tests::connect(&url).await?;
    let ttl: f64 = db
        .query_one(
            "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM session_context
              WHERE session_id = $1 AND context_key = $2",
            &[&session, &CONTEXT_KEY],
        )
        .await?
        .get(0);
    assert!((ttl - 3.0).abs() < 0.01, "{ttl}");
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let expired = app.send(Method::GET, &path, None).await?;
    assert_eq!(expired.status, 404, "{}", expired.body);
    assert_eq!(expired.body["error"], "Not found or expired");
    Ok(())
}

async fn direct(app: &App, body: Value) -> Result<Answer> {
    app.send(Method::POST, "/query-vector-db", Some(body)).await
}

/// Documents are a tenant's own: the same file ingested for a tenant is found by its keys'
/// searches, and another tenant's search over the same words finds nothing of it.
#[tokio::test]
async fn each_tenant_searches_only_its_own_documents() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let relay = Relay::start().await?;
    // Both tenants' direct flows report to the test's relay, which each names as its own.
    let hosts = crate::tenants::host_of(&relay)?;
    let tenant = || crate::tenants::new_tenant_on(&url, &["--callback-hosts", &hosts]);
    let (owner, stranger) = (tenant()?, tenant()?);
    let key_of = |tenant: &str| crate::keys::new_tenant_key_on(&url, tenant, &["calls:write"]);
    let (owner_key, stranger_key) = (key_of(&owner)?, key_of(&stranger)?);
    vector::gatehouse(&["ingest", &vector::knowledge_base_file().to_string_lossy(), "--tenant", &owner], &url)?;

    let search = |key: String| {
        let (app, body) = (&app, seed_request(&unique("tenant-docs"), &relay.url));
        async move { app.send_as(&key, Method::POST, "/query-vector-db", Some(body), &[]).await }
    };
    let found = search(owner_key).await?;
    let theirs = search(stranger_key).await?;
    let mine = direct(&app, seed_request(&unique("tenant-docs"), &relay.url)).await?;
    let db = gatehouse_tests::connect(&url).await?;
    db.execute("DELETE FROM documents WHERE tenant_id = $1", &[&owner]).await?;

    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(ids(&found.body["documents"]).first().map(String::as_str), Some("kb-sales-northwest-2024q3"));
    assert_eq!(ids(&found.body["documents"]), ids(&mine.body["documents"]), "the same file, the same answer");
    assert_eq!(theirs.status, 200, "{}", theirs.body);
    assert!(ids(&theirs.body["documents"]).is_empty(), "another tenant's search: {}", theirs.body);
    let said = theirs.body["summary"].as_str().unwrap_or_default();
    assert!(said.starts_with("I found no documents"), "{said}");
    Ok(())
}

fn seed_request(session: &str, callback_url: &str) -> Value {
    json!({
        "intent_id": "intent_q3",
        "session_id": session,
        "callback_url": callback_url,
        "user_query": "Q3 sales data northwest",
        "structured_query": {
            "semantic_query": "quarterly sales northwest",
            "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": ["Northwest"]},
            "aggregate": ["revenue", "units"]
        }
    })
}

async fn stored_context(url: &str, session: &str) -> Result<i64> {
    let db = gatehouse_tests::connect(url).await?;
    Ok(db.query_one("SELECT count(*) FROM session_context WHERE session_id = $1", &[&session]).await?.get(0))
}

/// A call's history rows, `operation:outcome` (written as the flow works, before it answers).
async fn executions(url: &str, id: &str) -> Result<Vec<String>> {
    let db = gatehouse_tests::connect(url).await?;
    let rows = db
        .query(
            "SELECT operation || ':' || outcome, component FROM tool_executions
              WHERE tool_call_id = $1 ORDER BY started_at, execution_id",
            &[&id],
        )
        .await?;
    assert!(rows.iter().all(|row| row.get::<_, String>(1) == "vector-query"));
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// A call's history rows once there are `expected` of them: through the lifecycle each row is
/// written by the tool after it answers, so it may land just after the call's own answer.
async fn executions_reaching(url: &str, id: &str, expected: usize) -> Result<Vec<String>> {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let rows = executions(url, id).await?;
        if rows.len() >= expected || std::time::Instant::now() > deadline {
            return Ok(rows);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn call_status(url: &str, session: &str) -> Result<Vec<(String, Value)>> {
    let db = gatehouse_tests::connect(url).await?;
    let rows = db
        .query("SELECT status, status_history FROM tool_calls WHERE session_id = $1 ORDER BY created_at", &[&session])
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// `POST /query-vector-db` with a relay that says continue: four gates, one answer with the
/// results, the completion callback and the stored context.
#[tokio::test]
async fn the_direct_flow_queries_stores_and_completes() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let relay = Relay::start().await?;
    let session = unique("direct");
    let answer = direct(&app, seed_request(&session, &relay.url)).await?;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["success"], true);
    assert_eq!(answer.body["status"], "COMPLETED");
    assert_eq!(answer.body["context_key"], CONTEXT_KEY);
    assert_eq!(ids(&answer.body["documents"]).first().map(String::as_str), Some("kb-sales-northwest-2024q3"));
    assert_eq!(answer.body["message"], answer.body["summary"]);
    let summary = answer.body["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("I found ")
            && summary.contains("Northwest from Q3 2024")
            && summary.contains("revenue totals $"),
        "{summary}"
    );
    let id = answer.body["tool_call_id"].as_str().context("no id")?.to_owned();

    let callbacks = relay.for_call(&id);
    let kinds: Vec<(&str, &str)> = callbacks
        .iter()
        .map(|c| (c.kind.as_str(), c.body["gate"].as_str().or(c.body["status"].as_str()).unwrap_or_default()))
        .collect();
    assert_eq!(kinds, [("progress", "QUERYING"), ("completion", "COMPLETED")]);
    assert!(callbacks.iter().all(|c| c.signature_valid));
    assert_eq!(callbacks[0].body["cancellable"], true);
    assert_eq!(callbacks[0].body["intent_id"], "intent_q3");
    assert_eq!(callbacks[1].body["context_available"], true);
    assert_eq!(callbacks[1].body["context_key"], CONTEXT_KEY);

    assert_eq!(stored_context(&url, &session).await?, 1);
    let db = gatehouse_tests::connect(&url).await?;
    let ttl: f64 = db
        .query_one(
            "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM session_context WHERE session_id = $1",
            &[&session],
        )
        .await?
        .get(0);
    assert!((ttl - 3600.0).abs() < 0.01, "the default lifetime is an hour, not {ttl} s");
    let calls = call_status(&url, &session).await?;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "COMPLETED");
    let history: Vec<&str> = calls[0].1.as_array().into_iter().flatten().filter_map(|e| e["status"].as_str()).collect();
    assert_eq!(history, ["PENDING", "EXECUTING", "COMPLETED"]);
    assert_eq!(executions(&url, &id).await?, ["execute:ok"], "the in-process search is in the tool's history");
    // Its `validate` row was written with the call, in the trace the call carries.
    let validated: Vec<(String, String)> = db
        .query(
            "SELECT e.outcome, e.component FROM tool_executions e JOIN tool_calls c ON c.trace_id = e.trace_id
              WHERE c.tool_call_id = $1 AND e.operation = 'validate'",
            &[&id],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(validated, [("ok".to_owned(), "vector-query".to_owned())]);
    Ok(())
}

/// Through the lifecycle, a search has no checkpoint: the executor goes from EXECUTING to the
/// search without asking the tool to prepare (no `prepare` row in its history), and still
/// records the point of no return first. A relay that cancels at the progress callback stops
/// it before the search: CANCELLED, nothing stored, and the search it stopped is recorded as
/// cancelled.
#[tokio::test]
async fn the_lifecycle_searches_without_a_prepare_step_and_a_cancel_before_it_holds() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let relay = Relay::start().await?;
    let parameters = json!({"user_query": "late deliveries of routers", "structured_query": {"top_k": 3}});

    let session = unique("no-prepare");
    let completed = query(&app, &session, parameters.clone(), Some(&relay.url)).await?;
    let id = completed["tool_call_id"].as_str().context("no id")?.to_owned();
    assert_eq!(completed["prepared_at"], Value::Null, "{completed}");
    assert!(completed["side_effect_started_at"].is_string(), "the point of no return is recorded: {completed}");
    assert_eq!(executions_reaching(&url, &id, 1).await?, ["execute:ok"]);
    let callbacks = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(callbacks.body["status"], "COMPLETED");
    let cancel = app.send(Method::DELETE, &format!("/voice-tools/cancel/{id}"), None).await?;
    assert_eq!(cancel.status, 409, "a completed search cannot be cancelled: {}", cancel.body);

    relay.set_progress_reply(ProgressReply::Cancel);
    let session = unique("cancelled-before-search");
    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(json!({"session_id": session, "function_name": "query_vector_db", "parameters": parameters,
                        "callback_url": relay.url})),
        )
        .await?;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    let confirmed =
        app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=20")]).await?;
    assert_eq!(confirmed.body["status"], "CANCELLED", "{}", confirmed.body);
    assert_eq!(confirmed.body["result"], Value::Null);
    assert_eq!(confirmed.body["side_effect_started_at"], Value::Null);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "CANCELLED");
    assert_ne!(completion.body["context_available"], true);
    assert_eq!(stored_context(&url, &session).await?, 0);
    assert_eq!(executions_reaching(&url, &id, 1).await?, ["execute:cancelled"]);
    Ok(())
}

/// A cancel at QUERYING, or a relay that never answers, stops the flow before anything is
/// searched or stored (fail closed).
#[tokio::test]
async fn the_direct_flow_fails_closed_at_querying() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let relay = Relay::start().await?;
    relay.set_progress_reply(ProgressReply::CancelAtGate("QUERYING"));
    let session = unique("cancelled");
    let answer = direct(&app, seed_request(&session, &relay.url)).await?;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["success"], false);
    assert_eq!(answer.body["status"], "CANCELLED");
    assert!(answer.body["message"].is_string(), "{}", answer.body);
    assert!(answer.body.get("documents").is_none());
    let id = answer.body["tool_call_id"].as_str().context("no id")?.to_owned();
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "CANCELLED");
    assert_ne!(completion.body["context_available"], true);
    assert!(completion.body.get("context_key").is_none(), "{}", completion.body);
    assert_eq!(stored_context(&url, &session).await?, 0);
    assert_eq!(call_status(&url, &session).await?[0].0, "CANCELLED");
    assert_eq!(executions(&url, &id).await?, ["execute:cancelled"]);

    // Nobody listens at an address the test runners' allowlist admits.
    let session = unique("unreachable");
    let answer = direct(&app, seed_request(&session, &gatehouse_tests::unreachable_callback_url()?)).await?;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["status"], "CANCELLED", "{}", answer.body);
    assert_eq!(answer.body["success"], false);
    assert_eq!(stored_context(&url, &session).await?, 0);
    let calls = call_status(&url, &session).await?;
    assert_eq!(calls[0].0, "CANCELLED");
    let reason = calls[0].1.as_array().and_then(|h| h.last()).map(|e| e["reason"].clone()).unwrap_or(Value::Null);
    assert!(reason.as_str().is_some_and(|r| r.contains("QUERYING")), "{reason}");
    Ok(())
}

/// The same search through `gatehouse embeddings serve` (the OpenAI-compatible provider) finds
/// the same documents with the same scores; a wrong key fails the call with a sentence, and the
/// key appears nowhere.
#[tokio::test]
async fn the_openai_compatible_provider_finds_the_same_documents() -> Result<()> {
    const KEY: &str = "sk-test-7f3a9c";
    let server = EmbeddingsServer::start(KEY).await?;
    let remote_vars = |key: &'static str| {
        vec![
            ("embeddings_provider", "openai"),
            ("embeddings_url", server.url.as_str()),
            ("embeddings_host", server.host.as_str()),
            ("embeddings_model", "all-minilm-l6-v2"),
            ("embeddings_api_key", key),
        ]
    };
    let (remote, url) = vector::start(&remote_vars(KEY)).await?;
    let (local, _) = vector::start(&[]).await?;
    let parameters = json!({
        "user_query": "what went wrong with battery shipments",
        "structured_query": {"semantic_query": "damaged or delayed battery shipments", "top_k": 5}
    });
    let through_remote = query(&remote, &unique("remote"), parameters.clone(), None).await?;
    let through_host = query(&local, &unique("host"), parameters, None).await?;
    let documents = |call: &Value| -> Vec<(String, f64)> {
        call["result"]["documents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| (d["id"].as_str().unwrap_or_default().to_owned(), d["score"].as_f64().unwrap_or_default()))
            .collect()
    };
    let (a, b) = (documents(&through_remote), documents(&through_host));
    assert_eq!(a.len(), 5);
    assert_eq!(a.iter().map(|d| &d.0).collect::<Vec<_>>(), b.iter().map(|d| &d.0).collect::<Vec<_>>());
    assert!(a.iter().zip(&b).all(|(x, y)| (x.1 - y.1).abs() < 1e-3), "{a:?} vs {b:?}");

    drop(remote);
    let (wrong_key, _) = vector::start(&remote_vars("sk-wrong-key-0000")).await?;
    let session = unique("wrong-key");
    let created = wrong_key
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(json!({"session_id": session, "function_name": "query_vector_db", "parameters": {"user_query": "late trucks"}})),
        )
        .await?;
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    let failed = wrong_key
        .send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=20")])
        .await?;
    assert_eq!(failed.body["status"], "FAILED", "{}", failed.body);
    assert_eq!(
        failed.body["voice_response"],
        "I couldn't run the search: the service that reads the query is not answering."
    );
    assert!(!failed.body.to_string().contains("sk-wrong"));
    assert!(!wrong_key.runner.logs().iter().any(|line| line.contains("sk-wrong")));
    let db = gatehouse_tests::connect(&url).await?;
    let leaked: i64 = db
        .query_one("SELECT count(*) FROM tool_executions WHERE tool_call_id = $1 AND error LIKE '%sk-wrong%'", &[&id])
        .await?
        .get(0);
    assert_eq!(leaked, 0);
    Ok(())
}

/// Bad parameters are refused with a field for each problem, on both routes, and nothing is
/// written.
#[tokio::test]
async fn bad_input_is_refused_with_fields_and_nothing_is_written() -> Result<()> {
    let (app, url) = vector::start(&[]).await?;
    let relay = Relay::start().await?;
    let session = unique("bad");
    let bad = json!({
        "user_query": "",
        "structured_query": {
            "filters": {"date_start": "2024-09-30", "date_end": "2024-07-01", "tags": ["a", "b"]},
            "top_k": 500,
            "aggregate": ["revenue; DROP TABLE documents"]
        }
    });
    let expected: BTreeSet<&str> = [
        "user_query",
        "structured_query.filters.date_end",
        "structured_query.filters.tags",
        "structured_query.top_k",
        "structured_query.aggregate",
    ]
    .into();
    let fields = |answer: &Answer| -> BTreeSet<String> {
        answer.body["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["field"].as_str().map(str::to_owned))
            .collect()
    };

    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(json!({"session_id": session, "function_name": "query_vector_db", "parameters": bad})),
        )
        .await?;
    assert_eq!(created.status, 422, "{}", created.body);
    assert_eq!(created.body["code"], "validation_failed");
    assert_eq!(fields(&created).iter().map(String::as_str).collect::<BTreeSet<_>>(), expected);

    let mut request = bad.as_object().cloned().unwrap_or_else(Map::new);
    request.insert("session_id".into(), json!(session));
    request.insert("callback_url".into(), json!(relay.url));
    let flow = direct(&app, Value::Object(request)).await?;
    assert_eq!(flow.status, 422, "{}", flow.body);
    assert_eq!(fields(&flow).iter().map(String::as_str).collect::<BTreeSet<_>>(), expected);
    let problem = flow.body["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["field"] == "structured_query.filters.date_end")
        .map(|f| f["problem"].clone());
    assert_eq!(problem, Some(json!("must not be before date_start (2024-09-30)")));

    let elsewhere = direct(&app, {
        let mut request = seed_request(&session, "http://relay.example.com/callbacks");
        request["structured_query"]["filters"]["date_start"] = json!("2024-13-01");
        request
    })
    .await?;
    assert_eq!(elsewhere.status, 422, "{}", elsewhere.body);

    assert!(call_status(&url, &session).await?.is_empty());
    assert_eq!(stored_context(&url, &session).await?, 0);
    assert!(relay.received().is_empty());
    Ok(())
}

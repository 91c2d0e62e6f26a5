//! Traces over OTLP (docs/architecture.md, "Traces"): the seed conversation across two hosts
//! (an edge host with the public routes, and one with the executor and the Gmail tool), each
//! exporting to a real OTLP receiver that decodes the protocol with its official types. The
//! spans form one tree across both hosts, carry the tool, the call and the outcome, and hold no
//! secret.
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::cluster::{EDGE_COMPONENTS, free_port};
use gatehouse_tests::gmail::{gmail_variables, start_fake};
use gatehouse_tests::lifecycle::{App, CALLBACK_SECRET, Relay};
use gatehouse_tests::otlp::{CLIENT, Collector, ReceivedSpan, SERVER, waterfall_svg};
use gatehouse_tests::{RunnerOptions, STATE_SECRET, TOKEN, app_manifest, nonce, select_components, unique};
use reqwest::Method;
use serde_json::json;

const CONTRACT_SECRET: &str = "traces-contract-secret";
const SETTLE: Duration = Duration::from_secs(30);

/// A host's options: its components, its service name, exporting to `collector`.
fn host(
    components: &[&str],
    service: &str,
    address: &str,
    variables: Vec<(String, String)>,
    collector: &Collector,
) -> RunnerOptions {
    let mut extra_args = select_components(components);
    extra_args.extend(["--sweep-interval".to_owned(), "0".to_owned()]);
    RunnerOptions {
        variables,
        env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), collector.url.clone()),
            ("OTEL_SERVICE_NAME".to_owned(), service.to_owned()),
            // Batches leave every 100 ms, so the test waits for spans, not for the default 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
        ],
        extra_args,
        listen: Some(address.to_owned()),
        ..Default::default()
    }
}

/// `http://host:port` of a URL.
fn origin(url: &str) -> &str {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..].find('/').map_or(url, |end| &url[..start + end])
}

/// The password of a `postgres://user:password@host/db` URL.
fn password(url: &str) -> Option<String> {
    let credentials = url.split_once("://")?.1.split_once('@')?.0;
    credentials.split_once(':').map(|(_, password)| password.to_owned()).filter(|p| !p.is_empty())
}

fn find(trace: &[ReceivedSpan], what: impl Fn(&ReceivedSpan) -> bool) -> Vec<&ReceivedSpan> {
    trace.iter().filter(|span| what(span)).collect()
}

fn parent_of<'a>(trace: &'a [ReceivedSpan], span: &ReceivedSpan) -> Option<&'a ReceivedSpan> {
    trace.iter().find(|candidate| candidate.span_id == span.parent_span_id)
}

/// The executor's `execute` of the tool, on the executor's host, for call `id`.
fn is_execute(span: &ReceivedSpan, id: &str) -> bool {
    span.kind == SERVER
        && span.attribute("gatehouse.tool.operation") == Some("execute")
        && span.attribute("gatehouse.call.id") == Some(id)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_conversation_is_one_trace_across_two_hosts_with_no_secret_in_it() -> Result<()> {
    let collector = Collector::start().await?;
    let fake = start_fake().await?;
    let relay = Relay::start().await?;
    let executor_address = format!("127.0.0.1:{}", free_port()?);
    let executor_origin = format!("http://{executor_address}");
    let mut common = gmail_variables(&fake);
    common.retain(|(name, _)| name != "tool_registry");
    common.extend([
        ("tool_registry".to_owned(), format!("send_email|send_gmail={executor_origin}/internal/tools/gmail")),
        ("tools_origin".to_owned(), executor_origin.clone()),
        ("contract_secret".to_owned(), CONTRACT_SECRET.to_owned()),
        ("callback_secret".to_owned(), CALLBACK_SECRET.to_owned()),
    ]);
    let executor_components = ["async-executor", "sweeper", "gmail", "health", "fallback"];
    let executor = App::start_on(
        &app_manifest(),
        host(&executor_components, "gatehouse-executor", &executor_address, common.clone(), &collector),
    )
    .await?;
    let mut edge_variables = common.clone();
    edge_variables.push(("executor_origin".to_owned(), executor_origin.clone()));
    let edge_address = format!("127.0.0.1:{}", free_port()?);
    let edge = App::start_on(
        &app_manifest(),
        host(&EDGE_COMPONENTS, "gatehouse-edge", &edge_address, edge_variables, &collector),
    )
    .await?;

    // The relay's own span: every request of the conversation is its child.
    // 32 lowercase hex digits, unique to this run.
    let trace_id = nonce();
    let relay_span = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{relay_span}-01");
    let traced = [("traceparent", traceparent.as_str())];

    let session = unique("traces-seed");
    let body = json!({"session_id": session, "function_name": "send_email", "callback_url": relay.url,
        "parameters": {"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "Q3 numbers at 10."}});
    let created = edge.send_with(Method::POST, "/voice-tools/pending", Some(body), &traced).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(created.headers.get("gatehouse-call-id").and_then(|v| v.to_str().ok()) == Some(id.as_str()));
    let correction = json!({"parameters": {"to": "john.smith@gmail.com"}, "reason": "the caller spelled it"});
    let modified =
        edge.send_with(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(correction), &traced).await?;
    ensure!(modified.status == 200, "{}", modified.body);
    let confirmed =
        edge.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), Some(json!({})), &traced).await?;
    ensure!(confirmed.status == 202, "{}", confirmed.body);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    let resumed = edge
        .send_with(Method::POST, &format!("/resume-execution/{id}"), Some(json!({"action": "proceed"})), &traced)
        .await?;
    ensure!(resumed.status == 202, "{}", resumed.body);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);

    // Done when the send's span has its Gmail request under it and every span has its parent.
    let trace = collector
        .wait_for_trace(&trace_id, SETTLE, |trace| {
            let sent = trace.iter().filter(|s| is_execute(s, &id)).any(|execute| {
                trace.iter().any(|s| s.kind == CLIENT && s.parent_span_id == execute.span_id && s.name == "POST")
            });
            let whole = trace.iter().all(|s| s.parent_span_id == relay_span || parent_of(trace, s).is_some());
            sent && whole
        })
        .await?;
    ensure!(collector.refused().is_empty(), "every export was the protocol's: {:?}", collector.refused());

    // Both hosts took part in the one trace.
    for service in ["gatehouse-edge", "gatehouse-executor"] {
        ensure!(trace.iter().any(|s| s.service == service), "{service} exported spans of the trace");
    }
    // Each of the relay's requests is a server span on the edge, a child of the relay's span.
    for (name, status) in [
        ("POST /voice-tools/pending", "201"),
        ("PATCH /voice-tools/modify/:id", "200"),
        ("POST /voice-tools/confirm/:id", "202"),
        ("POST /resume-execution/:id", "202"),
    ] {
        let spans = find(&trace, |s| s.name == name);
        ensure!(spans.len() == 1, "one span named {name}: {spans:#?}");
        let span = spans[0];
        ensure!(
            span.service == "gatehouse-edge" && span.kind == SERVER && span.parent_span_id == relay_span,
            "{span:#?}"
        );
        ensure!(span.attribute("http.response.status_code") == Some(status), "{span:#?}");
        ensure!(span.attribute("gatehouse.call.id") == Some(id.as_str()), "{span:#?}");
    }
    // Each of those requests' log line names the span the edge exported for it, and the relay's
    // span as its parent: a line leads to its span.
    let deadline = std::time::Instant::now() + SETTLE;
    let logged = loop {
        let lines: Vec<serde_json::Value> =
            edge.runner.logs().iter().filter_map(|line| serde_json::from_str(line).ok()).collect();
        let requests: Vec<serde_json::Value> = lines
            .into_iter()
            .filter(|line| line["msg"] == "request" && line["trace_id"] == trace_id.as_str())
            .collect();
        if requests.len() >= 4 || std::time::Instant::now() > deadline {
            break requests;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    for (component, name) in [
        ("pending", "POST /voice-tools/pending"),
        ("modify", "PATCH /voice-tools/modify/:id"),
        ("confirm", "POST /voice-tools/confirm/:id"),
        ("resume", "POST /resume-execution/:id"),
    ] {
        let span = find(&trace, |s| s.name == name)[0];
        let line = logged
            .iter()
            .find(|line| line["component"] == component)
            .with_context(|| format!("no request line from {component}: {logged:#?}"))?;
        ensure!(line["span_id"] == span.span_id.as_str(), "{component}'s line names another span: {line} {span:#?}");
        ensure!(line["parent_span_id"] == relay_span, "{line}");
    }
    // The confirm hands the call to the executor's host: edge server span, its client span,
    // the executor's server span.
    let confirm = find(&trace, |s| s.name == "POST /voice-tools/confirm/:id")[0];
    let hand_offs = find(&trace, |s| {
        s.service == "gatehouse-executor"
            && s.kind == SERVER
            && s.attribute("http.route") == Some("/internal/executor/...")
    });
    ensure!(
        hand_offs.iter().any(|drive| parent_of(&trace, drive)
            .is_some_and(|client| client.kind == CLIENT && client.parent_span_id == confirm.span_id)),
        "the confirm's hand-off continues on the executor's host: {hand_offs:#?}"
    );
    // The tool's operations carry the tool, the operation, the call and the outcome.
    for operation in ["validate", "prepare", "execute"] {
        let spans = find(&trace, |s| s.kind == SERVER && s.attribute("gatehouse.tool.operation") == Some(operation));
        ensure!(!spans.is_empty(), "a span for the tool's {operation}");
        for span in spans {
            ensure!(span.service == "gatehouse-executor", "{span:#?}");
            ensure!(span.attribute("gatehouse.tool.name") == Some("send_email"), "{span:#?}");
            ensure!(span.attribute("gatehouse.tool.outcome") == Some("ok"), "{span:#?}");
        }
    }
    // The send: the executor's execute, its Gmail request under it, and its statements.
    let execute = find(&trace, |s| is_execute(s, &id));
    ensure!(execute.len() == 1, "one execute: {execute:#?}");
    let gmail = find(&trace, |s| s.parent_span_id == execute[0].span_id && s.kind == CLIENT && s.name == "POST");
    let gmail_origin = format!("http://{}/", fake.local_addr());
    ensure!(
        gmail.iter().any(|s| s.attribute("url.full").is_some_and(|url| url.starts_with(&gmail_origin))
            && s.attribute("http.response.status_code") == Some("200")),
        "the execute's request to Gmail: {gmail:#?}"
    );
    let statements = find(&trace, |s| s.attribute("db.system.name") == Some("postgresql"));
    ensure!(!statements.is_empty(), "statements are spans");
    for statement in &statements {
        let parent = parent_of(&trace, statement).context("a statement's parent")?;
        ensure!(parent.kind == SERVER, "a statement is a child of its component's span: {statement:#?}");
        ensure!(statement.attribute("db.query.text").is_some_and(|text| !text.is_empty()), "{statement:#?}");
    }
    ensure!(
        statements.iter().any(|s| s.service == "gatehouse-executor")
            && statements.iter().any(|s| s.service == "gatehouse-edge"),
        "both hosts' statements"
    );
    // The completion callback to the relay is a request of the executor's host.
    let relay_origin = origin(&relay.url);
    ensure!(
        trace.iter().any(|s| s.service == "gatehouse-executor"
            && s.kind == CLIENT
            && s.attribute("url.full").is_some_and(|url| origin(url) == relay_origin)),
        "the callbacks are spans"
    );

    // Nothing secret in any attribute of any span either host exported.
    let credentials = gatehouse_fake_gmail::FakeGmailConfig::default().credentials;
    let secrets = [
        TOKEN,
        CALLBACK_SECRET,
        CONTRACT_SECRET,
        STATE_SECRET,
        credentials.client_secret.as_str(),
        credentials.refresh_token.as_str(),
        "Bearer",
    ];
    let database_password = password(&edge.database_url);
    for span in collector.spans() {
        for (key, value) in &span.attributes {
            ensure!(!key.contains("authorization") && !key.contains("signature"), "{key} in {span:#?}");
            for secret in secrets.iter().copied().chain(database_password.as_deref()) {
                ensure!(!value.contains(secret), "a secret in {key} of {span:#?}");
            }
        }
    }
    // The picture in docs/observability.md is this trace.
    let pictures = gatehouse_tests::workspace_root().join("target/trace-pictures");
    std::fs::create_dir_all(&pictures)?;
    std::fs::write(pictures.join("seed-conversation.svg"), waterfall_svg(&trace))?;
    drop(executor);
    Ok(())
}

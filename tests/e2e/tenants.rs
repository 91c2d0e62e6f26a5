//! Tenants (docs/keys.md; docs/architecture.md, "Tenants"): every row belongs to one, and a key
//! sees only its own. Checked on the real runner, components and fixture tool against the test
//! database: every route and method, tried by a key of each scope of one tenant against the
//! calls of another, answers exactly what it answers for a call that does not exist, lists and
//! counts none of them, and changes nothing (the other tenant's rows compared before and
//! after); each transition names the key that made it; and each tenant's limits hold without
//! touching the others.

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{Answer, App, CALLBACK_SECRET, Relay, lifecycle_options};
use gatehouse_tests::{TOKEN, unique};
use reqwest::Method;
use serde_json::{Value, json};

use crate::keys::{admin_cli, admin_cli_on, new_tenant_key};

const SCOPES: [&str; 4] = ["calls:write", "calls:read", "tools:read", "admin"];

/// A new tenant, with these `gatehouse tenants create` options; its id.
fn new_tenant(options: &[&str]) -> Result<String> {
    new_tenant_on(&gatehouse_tests::database_url(), options)
}

/// A new tenant in the database at `url`, with these `gatehouse tenants create` options; its id.
pub(crate) fn new_tenant_on(url: &str, options: &[&str]) -> Result<String> {
    let id = unique("tenant").replace('_', "-");
    let mut args = vec!["create", id.as_str(), "--name", "a test tenant"];
    args.extend_from_slice(options);
    admin_cli_on(url, "tenants", &args)?;
    Ok(id)
}

/// Everything of `tenant` the database holds, as one value: its calls (every column), its
/// executions, its callback attempts and its session context.
async fn rows_of(app: &App, tenant: &str) -> Result<Value> {
    let db = app.db().await?;
    let row = db
        .query_one(
            "SELECT jsonb_build_object(
                 'calls', (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.tool_call_id) FROM tool_calls c WHERE c.tenant_id = $1),
                 'executions', (SELECT jsonb_agg(to_jsonb(e) ORDER BY e.execution_id) FROM tool_executions e
                                 WHERE e.tenant_id = $1),
                 'callbacks', (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.attempt_id) FROM callback_attempts a
                                WHERE a.tenant_id = $1),
                 'context', (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.session_id, s.context_key) FROM session_context s
                              WHERE s.tenant_id = $1))",
            &[&tenant],
        )
        .await?;
    Ok(row.get(0))
}

/// One request of the sweep over the routes: who sends it is the loop's business.
struct Probe {
    method: Method,
    path: String,
    body: Option<Value>,
    headers: Vec<(&'static str, String)>,
}

impl Probe {
    fn new(method: Method, path: String, body: Option<Value>) -> Probe {
        Probe { method, path, body, headers: Vec::new() }
    }

    fn header(mut self, name: &'static str, value: &str) -> Probe {
        self.headers.push((name, value.to_owned()));
        self
    }

    async fn send(&self, app: &App, key: &str) -> Result<Answer> {
        let headers: Vec<(&str, &str)> = self.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        app.send_as(key, self.method.clone(), &self.path, self.body.clone(), &headers).await
    }

    /// The same request naming `stranger` wherever it names `id`.
    fn with_id(&self, id: &str, stranger: &str) -> Probe {
        Probe {
            method: self.method.clone(),
            path: self.path.replace(id, stranger),
            body: self.body.as_ref().and_then(|b| serde_json::from_str(&b.to_string().replace(id, stranger)).ok()),
            headers: self.headers.clone(),
        }
    }
}

/// A 2026-07-28 MCP `tools/call`, as a probe.
fn mcp_call(name: &str, arguments: Value) -> Probe {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "tenants-test", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": name, "arguments": arguments, "_meta": meta}});
    Probe::new(Method::POST, "/mcp".into(), Some(body))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
}

/// Every route that names one call, with every method, for `id`.
fn call_probes(id: &str) -> Vec<Probe> {
    let mut probes = Vec::new();
    let paths = [
        (format!("/voice-tools/status/{id}"), None),
        (format!("/voice-tools/calls/{id}/callbacks"), None),
        (format!("/voice-tools/modify/{id}"), Some(json!({"parameters": {"to": "mallory@example.com"}}))),
        (format!("/voice-tools/confirm/{id}"), Some(json!({}))),
        (format!("/voice-tools/cancel/{id}"), Some(json!({"reason": "not yours"}))),
        (format!("/resume-execution/{id}"), Some(json!({"action": "proceed"}))),
    ];
    for (path, body) in paths {
        for method in [Method::GET, Method::POST, Method::PATCH, Method::DELETE, Method::PUT] {
            let body = if method == Method::GET { None } else { body.clone() };
            probes.push(Probe::new(method, path.clone(), body));
        }
    }
    probes.push(Probe::new(Method::POST, format!("/resume-execution/{id}"), Some(json!({"action": "cancel"}))));
    probes.push(Probe::new(Method::GET, format!("/voice-tools/status/{id}"), None).header("prefer", "wait=1"));
    for (name, arguments) in [
        ("get_status", json!({"tool_call_id": id})),
        ("modify_tool", json!({"tool_call_id": id, "parameters": {"to": "mallory@example.com"}})),
        ("confirm_tool", json!({"tool_call_id": id})),
        ("cancel_tool", json!({"tool_call_id": id})),
        ("resume_tool", json!({"tool_call_id": id, "action": "proceed"})),
    ] {
        probes.push(mcp_call(name, arguments));
    }
    probes
}

/// The reads that list or count: of the shared session, of the tenant, of the tool.
fn list_probes(session: &str) -> Vec<Probe> {
    vec![
        Probe::new(Method::GET, format!("/voice-tools/calls?session_id={session}"), None),
        Probe::new(Method::GET, "/voice-tools/calls?limit=200".into(), None),
        Probe::new(Method::GET, "/voice-tools/calls?status=PENDING&limit=200".into(), None),
        Probe::new(Method::GET, format!("/voice-tools/context/{session}"), None),
        Probe::new(
            Method::GET,
            format!("/get-session-context?session_id={session}&context_key=last_query_results"),
            None,
        ),
        Probe::new(Method::GET, "/voice-tools/tools/fixture_action/executions?limit=200".into(), None),
        Probe::new(Method::GET, "/voice-tools/tools/fixture_action/stats?window=1h".into(), None),
        mcp_call("get_context", json!({"session_id": session})),
    ]
}

/// A well-formed call id that no call has.
fn stranger_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(1);
    format!("tc_{:012x}", (nanos as u64) & 0xffff_ffff_ffff)
}

#[tokio::test]
async fn no_key_of_one_tenant_reads_lists_counts_or_changes_anything_of_another() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await?;
    let (ours, theirs) = (new_tenant(&[])?, new_tenant(&[])?);
    let their_key = new_tenant_key(&theirs, &["calls:write"])?;
    let our_keys: Vec<(&str, String)> =
        SCOPES.iter().map(|scope| Ok((*scope, new_tenant_key(&ours, &[scope])?))).collect::<Result<_>>()?;
    // Both tenants use the same session id and the same Idempotency-Key: they are still two.
    let session = unique("shared-session");
    let secret = "only-theirs@tenant-b.example";

    // Their calls, in every kind of state: waiting, at the checkpoint, done, cancelled.
    let create = |to: String, idempotency: Option<&'static str>| {
        let body = json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": to}});
        let headers: Vec<(&str, &str)> = idempotency.map(|k| ("idempotency-key", k)).into_iter().collect();
        let (app, key) = (&app, &their_key);
        async move { app.send_as(key, Method::POST, "/voice-tools/pending", Some(body), &headers).await }
    };
    let mut theirs_ids = Vec::new();
    for (n, idempotency) in [(0, Some("same-key")), (1, None), (2, None), (3, None)] {
        let answer = create(format!("{n}-{secret}"), idempotency).await?;
        ensure!(answer.status == 201, "their create: {} {}", answer.status, answer.body);
        theirs_ids.push(answer.body["tool_call_id"].as_str().context("an id")?.to_owned());
    }
    let act = |method: Method, path: String, body: Value, headers: Vec<(&'static str, &'static str)>| {
        let (app, key) = (&app, &their_key);
        async move { app.send_as(key, method, &path, Some(body), &headers).await }
    };
    let wait = vec![("prefer", "wait=10")];
    let prepared =
        act(Method::POST, format!("/voice-tools/confirm/{}", theirs_ids[1]), json!({}), wait.clone()).await?;
    ensure!(prepared.body["status"] == "PREPARED", "their confirm: {}", prepared.body);
    act(Method::POST, format!("/voice-tools/confirm/{}", theirs_ids[2]), json!({}), wait.clone()).await?;
    let done =
        act(Method::POST, format!("/resume-execution/{}", theirs_ids[2]), json!({"action": "proceed"}), wait).await?;
    ensure!(done.body["status"] == "COMPLETED", "their resume: {}", done.body);
    let cancelled = act(Method::DELETE, format!("/voice-tools/cancel/{}", theirs_ids[3]), json!({}), vec![]).await?;
    ensure!(cancelled.status == 200, "their cancel: {}", cancelled.body);
    let before = rows_of(&app, &theirs).await?;
    ensure!(before["calls"].as_array().map(Vec::len) == Some(4) && before["executions"].is_array(), "{before}");

    // Each transition names the key that made it, as the timeline shows.
    let their_prefix = &their_key[..12];
    let history = &done.body["status_history"];
    let keys: Vec<&str> = history.as_array().into_iter().flatten().filter_map(|e| e["key"].as_str()).collect();
    ensure!(keys.first() == Some(&their_prefix), "the create names its key: {history}");
    ensure!(keys.iter().filter(|k| **k == their_prefix).count() == 3, "create, confirm and resume: {history}");

    for (scope, key) in &our_keys {
        // Every route naming one of their calls answers as for a call that does not exist.
        for id in &theirs_ids {
            let stranger = stranger_id();
            for probe in call_probes(id) {
                let answer = probe.send(&app, key).await?;
                let missing = probe.with_id(id, &stranger).send(&app, key).await?;
                let text = answer.body.to_string();
                ensure!(!text.contains(secret), "{scope} {} {} read their call: {text}", probe.method, probe.path);
                ensure!(
                    answer.status == missing.status
                        && serde_json::from_str::<Value>(&text.replace(id.as_str(), &stranger)).ok()
                            == Some(missing.body.clone()),
                    "{scope} {} {} {}: their call answered {} {text}, a missing one {} {}",
                    probe.method,
                    probe.path,
                    probe.body.as_ref().map(Value::to_string).unwrap_or_default(),
                    answer.status,
                    missing.status,
                    missing.body
                );
            }
        }
        // The lists and counts hold none of theirs: a new tenant has nothing yet.
        for probe in list_probes(&session) {
            let answer = probe.send(&app, key).await?;
            let text = answer.body.to_string();
            ensure!(
                !text.contains(secret) && theirs_ids.iter().all(|id| !text.contains(id.as_str())),
                "{scope} {} {} listed their calls: {text}",
                probe.method,
                probe.path
            );
            if answer.status == 200 {
                for (field, zero) in [
                    ("pending_total", json!(0)),
                    ("recent_total", json!(0)),
                    ("executions", json!(0)),
                    ("calls", json!([])),
                ] {
                    if let Some(value) = answer.body.get(field) {
                        ensure!(
                            *value == zero || field == "executions" && value.is_array(),
                            "{} {field}: {text}",
                            probe.path
                        );
                    }
                }
                if let Some(executions) = answer.body.get("executions").and_then(Value::as_array) {
                    ensure!(executions.is_empty(), "{scope} saw executions: {text}");
                }
            }
        }
        // Nobody but the operator sweeps every tenant's calls.
        let sweep = Probe::new(Method::POST, "/voice-tools/sweep".into(), None).send(&app, key).await?;
        ensure!(sweep.status == 403, "{scope} swept: {} {}", sweep.status, sweep.body);
    }

    // Our own create in the same session with the same Idempotency-Key is our own new call.
    let writer = &our_keys[0].1;
    let body =
        json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "ours@a.example"}});
    let ours_created = app
        .send_as(writer, Method::POST, "/voice-tools/pending", Some(body), &[("idempotency-key", "same-key")])
        .await?;
    ensure!(ours_created.status == 201, "our create: {} {}", ours_created.status, ours_created.body);
    let our_id = ours_created.body["tool_call_id"].as_str().context("our id")?;
    ensure!(!theirs_ids.iter().any(|id| id == our_id), "the Idempotency-Key found their call");
    let context = app.send_as(writer, Method::GET, &format!("/voice-tools/context/{session}"), None, &[]).await?;
    ensure!(
        context.body["pending_total"] == 1 && context.body["pending"][0]["tool_call_id"] == our_id,
        "{}",
        context.body
    );
    let me = app.send_as(writer, Method::GET, "/voice-tools/key", None, &[]).await?;
    ensure!(
        me.body == json!({"tenant": ours, "key": &writer[..12], "scopes": ["calls:write"]}),
        "who am I: {}",
        me.body
    );
    let operator = app.send_as(TOKEN, Method::GET, "/voice-tools/key", None, &[]).await?;
    ensure!(operator.body == json!({"tenant": "default", "key": null, "scopes": ["admin"]}), "{}", operator.body);

    // Nothing of theirs changed, row for row.
    let after = rows_of(&app, &theirs).await?;
    ensure!(before == after, "their rows changed:\nbefore {before}\nafter  {after}");
    Ok(())
}

#[tokio::test]
async fn a_tenant_at_its_limits_is_told_to_wait_and_the_others_are_not() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await?;
    let hurried = new_tenant(&["--creates-per-second", "3"])?;
    let crowded = new_tenant(&["--max-pending-calls", "2"])?;
    let (hurried_key, crowded_key) =
        (new_tenant_key(&hurried, &["calls:write"])?, new_tenant_key(&crowded, &["calls:write"])?);
    let create = |key: String| {
        let app = &app;
        async move {
            let body = json!({"session_id": unique("limits"), "function_name": "fixture_action",
                              "parameters": {"to": "a@b.example"}});
            app.send_as(&key, Method::POST, "/voice-tools/pending", Some(body), &[]).await
        }
    };

    // Creates per second: at most three a second, the rest told to come back in a second.
    let answers = futures::future::join_all((0..12).map(|_| create(hurried_key.clone()))).await;
    let answers: Vec<Answer> = answers.into_iter().collect::<Result<_>>()?;
    let made = answers.iter().filter(|a| a.status == 201).count();
    let limited: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
    ensure!(made >= 1 && made + limited.len() == 12, "{:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
    // Concurrent creates count before the others commit, so a burst may pass by a few.
    ensure!(made <= 3 + 2, "{made} creates in one burst against a limit of 3");
    for answer in &limited {
        ensure!(answer.body["code"] == "rate_limited", "{}", answer.body);
        let retry = answer.headers.get("retry-after").and_then(|v| v.to_str().ok());
        ensure!(retry == Some("1"), "Retry-After {retry:?}");
    }
    // Meanwhile the others create as usual.
    let other = create(TOKEN.to_owned()).await?;
    ensure!(other.status == 201, "the first tenant: {} {}", other.status, other.body);
    // A second later the hurried tenant creates again.
    let mut again = None;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let answer = create(hurried_key.clone()).await?;
        if answer.status == 201 {
            again = Some(answer);
            break;
        }
    }
    ensure!(again.is_some(), "the hurried tenant never created again");

    // Waiting calls: two at a time over all its sessions; a third waits for one to settle.
    let first = create(crowded_key.clone()).await?;
    let second = create(crowded_key.clone()).await?;
    ensure!(first.status == 201 && second.status == 201, "{} {}", first.body, second.body);
    let third = create(crowded_key.clone()).await?;
    ensure!(third.status == 429 && third.body["code"] == "too_many_open_calls", "{} {}", third.status, third.body);
    let retry = third.headers.get("retry-after").and_then(|v| v.to_str().ok());
    ensure!(retry == Some("5"), "Retry-After {retry:?}");
    let id = first.body["tool_call_id"].as_str().context("an id")?;
    let cancel = app.send_as(&crowded_key, Method::DELETE, &format!("/voice-tools/cancel/{id}"), None, &[]).await?;
    ensure!(cancel.status == 200, "{}", cancel.body);
    let fourth = create(crowded_key.clone()).await?;
    ensure!(fourth.status == 201, "after a cancel: {} {}", fourth.status, fourth.body);
    Ok(())
}

#[tokio::test]
async fn tenants_are_added_listed_and_limited_from_the_cli() -> Result<()> {
    let id = new_tenant(&["--max-pending-calls", "7"])?;
    let (list, _) = admin_cli("tenants", &["list"])?;
    let line = list.lines().find(|l| l.starts_with(&id)).context("the new tenant is listed")?.to_owned();
    ensure!(line.split_whitespace().skip(1).take(3).collect::<Vec<_>>() == ["7", "none", "0"], "{line}");
    admin_cli("tenants", &["limit", &id, "--max-pending-calls", "none", "--creates-per-second", "50"])?;
    new_tenant_key(&id, &["calls:read"])?;
    let (list, _) = admin_cli("tenants", &["list"])?;
    let line = list.lines().find(|l| l.starts_with(&id)).context("still listed")?.to_owned();
    ensure!(line.split_whitespace().skip(1).take(3).collect::<Vec<_>>() == ["none", "50", "1"], "{line}");
    let refused = std::process::Command::new(gatehouse_tests::gatehouse_bin())
        .args(["tenants", "create", &id])
        .env("DATABASE_URL", gatehouse_tests::database_url())
        .output()?;
    ensure!(!refused.status.success(), "a tenant is added once");
    let bad = std::process::Command::new(gatehouse_tests::gatehouse_bin())
        .args(["tenants", "create", "Not_An_Id"])
        .env("DATABASE_URL", gatehouse_tests::database_url())
        .output()?;
    ensure!(!bad.status.success(), "an id is lowercase letters, digits and dashes");
    Ok(())
}

/// The host:port of a test relay's URL, as `callback_allowed_hosts` names it.
pub(crate) fn host_of(relay: &Relay) -> Result<String> {
    let rest = relay.url.strip_prefix("http://").context("an http relay")?;
    Ok(rest.split('/').next().unwrap_or_default().to_owned())
}

/// The tenant's callback secrets as `gatehouse tenants callbacks ID --show-secret` prints them
/// for its relays: derived from the deployment's `callback_secret`, newest first.
fn secrets_of(tenant: &str) -> Result<Vec<String>> {
    let output = std::process::Command::new(gatehouse_tests::gatehouse_bin())
        .args(["tenants", "callbacks", tenant, "--show-secret"])
        .env("DATABASE_URL", gatehouse_tests::database_url())
        .env("SPIN_VARIABLE_CALLBACK_SECRET", CALLBACK_SECRET)
        .output()?;
    ensure!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8(output.stdout)?.lines().map(str::to_owned).collect())
}

/// Issue 49: one tenant could have its calls' callbacks sent to another tenant's relay, signed
/// with the one secret every relay trusted. Now each tenant names its own relays' hosts and its
/// callbacks are signed with its own secret: A's key cannot point a callback at B's relay, and a
/// callback signed for A does not verify with B's secret (nor with the deployment's).
#[tokio::test]
async fn a_tenants_callbacks_reach_only_its_own_relays_signed_with_its_own_secret() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await?;
    let (relay_a, relay_b) = (Relay::start().await?, Relay::start().await?);
    let a = new_tenant(&["--callback-hosts", &host_of(&relay_a)?])?;
    let b = new_tenant(&["--callback-hosts", &host_of(&relay_b)?])?;
    let key_a = new_tenant_key(&a, &["calls:write"])?;
    let silent = new_tenant(&[])?;
    let key_silent = new_tenant_key(&silent, &["calls:write"])?;
    let create = |key: &str, relay: &Relay| {
        let body = json!({"session_id": unique("cb"), "function_name": "fixture_action",
                          "parameters": {"to": "x@example.com"}, "callback_url": relay.url});
        let (app, key) = (&app, key.to_owned());
        async move { app.send_as(&key, Method::POST, "/voice-tools/pending", Some(body), &[]).await }
    };

    // Neither B's relay, nor the deployment's hosts (the first tenant's), nor any host for a
    // tenant that named none: the create is refused and names the field.
    for (key, relay) in [(&key_a, &relay_b), (&key_silent, &relay_a)] {
        let refused = create(key, relay).await?;
        ensure!(refused.status == 422 && refused.body["code"] == "callback_not_allowed", "{}", refused.body);
        ensure!(refused.body["fields"][0]["field"] == "callback_url", "{}", refused.body);
    }
    let without =
        json!({"session_id": unique("cb"), "function_name": "fixture_action", "parameters": {"to": "y@example.com"}});
    let without = app.send_as(&key_a, Method::POST, "/voice-tools/pending", Some(without), &[]).await?;
    let id = without.body["tool_call_id"].as_str().context("an id")?.to_owned();
    let moved = app
        .send_as(
            &key_a,
            Method::POST,
            &format!("/voice-tools/confirm/{id}"),
            Some(json!({"callback_url": relay_b.url})),
            &[],
        )
        .await?;
    ensure!(moved.status == 422 && moved.body["code"] == "callback_not_allowed", "nor on the confirm: {}", moved.body);

    // A's own call reports to A's relay, naming A, signed with A's secret only.
    let created = create(&key_a, &relay_a).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    let confirmed =
        app.send_as(&key_a, Method::POST, &format!("/voice-tools/confirm/{id}"), Some(json!({})), &[]).await?;
    ensure!(confirmed.status == 202, "{}", confirmed.body);
    let checkpoint = relay_a.wait_for(&id, "checkpoint", std::time::Duration::from_secs(20)).await?;
    ensure!(checkpoint.body["tenant"] == a.as_str(), "the callback names its tenant: {}", checkpoint.body);
    let (secrets_a, secrets_b) = (secrets_of(&a)?, secrets_of(&b)?);
    ensure!(secrets_a.len() == 1 && secrets_b.len() == 1 && secrets_a != secrets_b, "{secrets_a:?} {secrets_b:?}");
    let verifies = |secret: &str| checkpoint.verifies_with(secret);
    ensure!(verifies(&secrets_a[0]), "A's relay verifies with A's secret");
    ensure!(!verifies(&secrets_b[0]), "B's relay refuses a callback signed for A");
    ensure!(!verifies(CALLBACK_SECRET), "the deployment's own secret is the first tenant's, not A's");
    ensure!(relay_b.received().is_empty(), "nothing reached B's relay: {:?}", relay_b.received());
    Ok(())
}

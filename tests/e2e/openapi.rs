//! The OpenAPI description (openapi/gatehouse.yaml) against the running application.
//!
//! The tests drive every public route through its main answers and its error answers, one
//! group of routes per test, each group on a runner of its own against the shared database.
//! Each answer must be documented for its path template, method and status, its headers and
//! JSON body must match what the file says, and every operation in the file must have answered
//! with a success at least once (each group checks the operations it owns, and
//! `every_operation_and_callback_belongs_to_a_group` checks that the groups own them all), so
//! the file can neither drift from the code nor describe a route that does not exist. The
//! callbacks the relays receive are checked against the file too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_domain::{ErrorCode, Status};
use gatehouse_tests::lifecycle::{App, ProgressReply, Relay, lifecycle_options};
use gatehouse_tests::{TOKEN, db, unique, workspace_root};
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// The fixture tool's function (tests/fixtures/lifecycle.toml).
const FUNCTION: &str = "fixture_action";

/// Where the file describes the answers of the fallback route (`/...`), which OpenAPI's paths
/// cannot express.
const FALLBACK: &str = "x-fallback";

/// The parsed description, and the questions the test asks it.
struct OpenApi {
    doc: Value,
}

impl OpenApi {
    fn load() -> Result<OpenApi> {
        OpenApi::load_file("openapi/gatehouse.yaml")
    }

    /// A description in the repository, by its path from the root.
    fn load_file(relative: &str) -> Result<OpenApi> {
        let path = workspace_root().join(relative);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let doc: Value =
            serde_yaml::from_str(&text).with_context(|| format!("{relative} is not valid YAML for JSON"))?;
        ensure!(doc["openapi"] == "3.1.0", "not an OpenAPI 3.1.0 document: {}", doc["openapi"]);
        Ok(OpenApi { doc })
    }

    fn paths(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.doc["paths"].as_object().into_iter().flatten()
    }

    /// Every (path template, method) the file documents.
    fn operations(&self) -> Vec<(String, String)> {
        const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
        let mut operations = Vec::new();
        for (template, item) in self.paths() {
            for method in METHODS {
                if item.get(method).is_some() {
                    operations.push((template.clone(), method.to_owned()));
                }
            }
        }
        operations
    }

    /// The template `path` (no query) matches: a `{name}` segment matches one non-empty segment.
    fn template_for(&self, path: &str) -> Option<String> {
        let segments: Vec<&str> = path.split('/').collect();
        self.paths()
            .map(|(template, _)| template)
            .find(|template| {
                let parts: Vec<&str> = template.split('/').collect();
                parts.len() == segments.len()
                    && parts.iter().zip(&segments).all(|(part, segment)| {
                        if part.starts_with('{') && part.ends_with('}') { !segment.is_empty() } else { part == segment }
                    })
            })
            .cloned()
    }

    fn operation(&self, template: &str, method: &str) -> Option<&Value> {
        self.doc["paths"].get(template)?.get(method)
    }

    /// Follows a local `$ref` (responses, headers, parameters, callbacks) to what it names.
    fn resolve<'a>(&'a self, value: &'a Value) -> Result<&'a Value> {
        let mut value = value;
        for _ in 0..8 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return Ok(value);
            };
            let pointer = reference.strip_prefix('#').with_context(|| format!("non-local $ref {reference}"))?;
            value = self.doc.pointer(pointer).with_context(|| format!("$ref {reference} names nothing"))?;
        }
        bail!("a $ref chain is too long")
    }

    /// A validator for `schema` as it stands in the file: its `$ref`s into `components` resolve
    /// against a root that carries them.
    fn validator(&self, schema: &Value) -> Result<jsonschema::Validator> {
        let root = json!({"$schema": DRAFT_2020_12, "components": self.doc["components"], "allOf": [schema]});
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .map_err(|e| anyhow::anyhow!("the schema {schema} does not compile: {e}"))
    }

    /// Every way `instance` misses `schema`, one line each.
    fn problems(&self, schema: &Value, instance: &Value) -> Result<Vec<String>> {
        let validator = self.validator(schema)?;
        Ok(validator.iter_errors(instance).map(|e| format!("at '{}': {e}", e.instance_path())).collect())
    }
}

/// One exchange, as the checker saw it.
#[derive(Debug, Clone)]
struct Answer {
    method: Method,
    path: String,
    status: u16,
    headers: HeaderMap,
    text: String,
    body: Value,
}

impl Answer {
    fn expect(self, status: u16) -> Result<Answer> {
        ensure!(
            self.status == status,
            "{} {}: expected {status}, got {}: {}",
            self.method,
            self.path,
            self.status,
            self.text
        );
        Ok(self)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or_default()
    }

    fn id(&self) -> Result<String> {
        self.body["tool_call_id"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no tool_call_id in {}", self.text))
    }
}

/// Sends requests, checks each answer against the description, and remembers what it saw.
struct Checker {
    api: OpenApi,
    http: reqwest::Client,
    /// Where the described paths start on the server: empty for the application's API, a tool's
    /// base path for the tool contract.
    base_path: String,
    seen: Mutex<BTreeMap<(String, String), BTreeSet<u16>>>,
}

impl Checker {
    fn new(api: OpenApi) -> Checker {
        Checker { api, http: reqwest::Client::new(), base_path: String::new(), seen: Mutex::new(BTreeMap::new()) }
    }

    /// A request with the token.
    fn request(&self, app: &App, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, app.runner.url(path)).bearer_auth(TOKEN)
    }

    /// An authorized JSON request (no body when `body` is `None`) with extra headers. The request
    /// is built before the future, which borrows only the checker, so callers can pass
    /// temporaries.
    fn call<'s>(
        &'s self,
        app: &App,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> impl Future<Output = Result<Answer>> + use<'s> {
        let mut request = self.request(app, method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request)
    }

    fn get<'s>(&'s self, app: &App, path: &str) -> impl Future<Output = Result<Answer>> + use<'s> {
        self.call(app, Method::GET, path, None, &[])
    }

    /// Sends `request` and checks its answer.
    async fn send(&self, request: RequestBuilder) -> Result<Answer> {
        let request = request.build()?;
        let (method, path) = (request.method().clone(), request.url().path().to_owned());
        let response = self.http.execute(request).await.with_context(|| format!("{method} {path}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        let answer = Answer { method, path, status, headers, text, body };
        self.check(&answer)?;
        Ok(answer)
    }

    fn check(&self, answer: &Answer) -> Result<()> {
        let api = &self.api;
        let what = || {
            format!(
                "{} {} answered {}\nheaders: {:?}\nbody: {}",
                answer.method, answer.path, answer.status, answer.headers, answer.text
            )
        };
        // A path no operation matches is the fallback route's, described under `x-fallback`.
        let path = answer.path.strip_prefix(self.base_path.as_str()).unwrap_or(&answer.path);
        let template = api.template_for(path).unwrap_or_else(|| FALLBACK.to_owned());
        // A 405 answers a method the path does not have: it is documented on the operation
        // its Allow header names.
        let method = if answer.status == 405 {
            answer.header("allow").with_context(|| format!("a 405 without Allow: {}", what()))?.to_ascii_lowercase()
        } else {
            answer.method.as_str().to_ascii_lowercase()
        };
        let operation = if template == FALLBACK {
            api.doc.get(FALLBACK).with_context(|| format!("no path in the file matches: {}", what()))?
        } else {
            api.operation(&template, &method)
                .with_context(|| format!("{method} {template} is not documented: {}", what()))?
        };
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry((template.clone(), method.clone())).or_default().insert(answer.status);
        }
        let documented = operation["responses"].get(answer.status.to_string()).with_context(|| {
            format!("status {} is not documented for {method} {template}: {}", answer.status, what())
        })?;
        let response = api.resolve(documented)?;

        for (name, header) in response["headers"].as_object().into_iter().flatten() {
            let header = api.resolve(header)?;
            let Some(value) = answer.header(name) else {
                ensure!(header["required"] != true, "the required header {name} is missing: {}", what());
                continue;
            };
            let schema = &header["schema"];
            let value = match schema["type"].as_str() {
                Some("integer") => value.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(value)),
                _ => Value::from(value),
            };
            let problems = api.problems(schema, &value)?;
            ensure!(
                problems.is_empty(),
                "header {name} does not match the file:\n  {}\n{}",
                problems.join("\n  "),
                what()
            );
        }

        let content_type = answer.header("content-type").unwrap_or_default();
        let media_type = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        let Some(content) = response["content"].as_object() else {
            ensure!(answer.text.is_empty(), "a body where the file documents none: {}", what());
            return Ok(());
        };
        let media = content
            .get(&media_type)
            .with_context(|| format!("content type {content_type:?} is not documented for this answer: {}", what()))?;
        let instance = if media_type.ends_with("json") {
            serde_json::from_str(&answer.text).with_context(|| format!("the body is not JSON: {}", what()))?
        } else {
            Value::from(answer.text.clone())
        };
        let problems = api.problems(&media["schema"], &instance)?;
        ensure!(
            problems.is_empty(),
            "the body does not match the schema of {} {method} {template}:\n  {}\n{}",
            answer.status,
            problems.join("\n  "),
            what()
        );
        Ok(())
    }

    /// Checks a callback body the relay received against the file's callback of that kind.
    fn check_callback(&self, kind: &str, body: &Value) -> Result<()> {
        let api = &self.api;
        let confirm = api.operation("/voice-tools/confirm/{id}", "post").context("no confirm operation")?;
        let callback = api.resolve(&confirm["callbacks"][kind])?;
        let (_, item) =
            callback.as_object().and_then(|c| c.iter().next()).with_context(|| format!("no {kind} callback"))?;
        let schema = &api.resolve(&item["post"]["requestBody"])?["content"]["application/json"]["schema"];
        let problems = api.problems(schema, body)?;
        ensure!(
            problems.is_empty(),
            "{kind} callback does not match the file:\n  {}\nbody: {body}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// Every operation of `operations` (a group's) answered with a success at least once.
    fn assert_operations_were_exercised(&self, operations: &[(&str, &str)]) -> Result<()> {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        for ((template, method), statuses) in &seen {
            eprintln!("{:7} {template:32} {statuses:?}", method.to_uppercase());
        }
        for &(template, method) in operations {
            let operation = (template.to_owned(), method.to_owned());
            let statuses = seen.get(&operation).cloned().unwrap_or_default();
            ensure!(
                statuses.iter().any(|s| (200..300).contains(s)),
                "{} {} never answered with a success (saw {statuses:?}): does the route exist?",
                operation.1.to_uppercase(),
                operation.0
            );
        }
        Ok(())
    }
}

/// Polls the call (unchecked, through the support client) until `ready` holds.
async fn poll(app: &App, id: &str, ready: impl Fn(&Value) -> bool) -> Result<Value> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let call = app.status(id).await?.body;
        if ready(&call) {
            return Ok(call);
        }
        ensure!(Instant::now() < deadline, "{id} never got there: {call}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn create_body(session: &str, parameters: Value, relay: &Relay) -> Value {
    json!({"session_id": session, "function_name": FUNCTION, "parameters": parameters, "callback_url": relay.url})
}

/// What a group of routes is driven with: the checker, a runner with the fixture tool, a relay,
/// and a session of its own.
struct Fixture {
    api: Checker,
    app: App,
    relay: Relay,
    session: String,
}

impl Fixture {
    async fn start() -> Result<Fixture> {
        let api = Checker::new(OpenApi::load()?);
        let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await?;
        let relay = Relay::start().await?;
        let session = unique("openapi");
        Ok(Fixture { api, app, relay, session })
    }
}

/// The body of the vector-search tool's gated flow.
fn search_body(session: &str, relay: &Relay) -> Value {
    json!({
        "session_id": session,
        "callback_url": relay.url,
        "intent_id": "intent-search",
        "user_query": "late battery shipments",
        "structured_query": {"filters": {"region": "Northwest", "date_start": "2024-01-01"}, "aggregate": ["units_affected"]}
    })
}

/// The body of the Gmail tool's gated flow.
fn email_body(session: &str, relay: &Relay) -> Value {
    json!({"session_id": session, "callback_url": relay.url, "intent_id": "intent-email",
        "to": "john.smith@gmail.com", "subject": "Meeting Tomorrow", "body": "Let's discuss..."})
}

/// The callbacks `relay` received, against the file's callbacks: of the `expected` kinds, each
/// signed, each matching the file.
fn check_received(api: &Checker, relay: &Relay, expected: &[&str]) -> Result<()> {
    // The callbacks the relay received, against the file's callbacks.
    let received = relay.received();
    let kinds: BTreeSet<&str> = received.iter().map(|r| r.kind.as_str()).collect();
    ensure!(kinds == expected.iter().copied().collect(), "callback kinds received: {kinds:?}");
    for callback in &received {
        ensure!(callback.signature_valid, "a callback with a bad signature: {callback:?}");
        api.check_callback(&callback.kind, &callback.body)?;
    }
    Ok(())
}

/// The operations each group answers with a success, and the callback kinds its relay receives.
const HEALTH_OPERATIONS: &[(&str, &str)] =
    &[("/health", "get"), ("/voice-tools/tools", "get"), ("/voice-tools/sweep", "post"), ("/voice-tools/key", "get")];
const LIFECYCLE_OPERATIONS: &[(&str, &str)] = &[
    ("/voice-tools/pending", "post"),
    ("/voice-tools/modify/{id}", "patch"),
    ("/voice-tools/status/{id}", "get"),
    ("/voice-tools/confirm/{id}", "post"),
    ("/resume-execution/{id}", "post"),
    ("/voice-tools/cancel/{id}", "delete"),
    ("/voice-tools/context/{session}", "get"),
];
const LIFECYCLE_CALLBACKS: &[&str] = &["checkpoint", "completion", "progress"];
const STORED_CONTEXT_OPERATIONS: &[(&str, &str)] = &[("/get-session-context", "get")];
const FLOW_OPERATIONS: &[(&str, &str)] = &[("/query-vector-db", "post"), ("/execute-gmail", "post")];
const FLOW_CALLBACKS: &[&str] = &["completion", "progress"];
const HISTORY_OPERATIONS: &[(&str, &str)] =
    &[("/voice-tools/tools/{name}/executions", "get"), ("/voice-tools/tools/{name}/stats", "get")];
const MCP_OPERATIONS: &[(&str, &str)] = &[("/mcp", "post")];
const CALLS_OPERATIONS: &[(&str, &str)] = &[
    ("/voice-tools/calls", "get"),
    ("/voice-tools/calls/{id}/callbacks", "get"),
    ("/voice-tools/calls/{id}/outcome-told", "post"),
];
const EXPIRY_CALLBACKS: &[&str] = &["completion"];

/// Every operation in the file is some group's, so each answers with a success somewhere; and
/// the groups' relays together receive every kind of callback.
#[test]
fn every_operation_and_callback_belongs_to_a_group() -> Result<()> {
    let api = OpenApi::load()?;
    let groups = [
        HEALTH_OPERATIONS,
        LIFECYCLE_OPERATIONS,
        STORED_CONTEXT_OPERATIONS,
        FLOW_OPERATIONS,
        HISTORY_OPERATIONS,
        MCP_OPERATIONS,
        CALLS_OPERATIONS,
    ];
    let owned: BTreeSet<(String, String)> =
        groups.iter().flat_map(|group| group.iter()).map(|(t, m)| ((*t).to_owned(), (*m).to_owned())).collect();
    let documented: BTreeSet<(String, String)> = api.operations().into_iter().collect();
    ensure!(owned == documented, "the groups own {owned:?}, the file documents {documented:?}");
    let kinds: BTreeSet<&str> =
        [LIFECYCLE_CALLBACKS, FLOW_CALLBACKS, EXPIRY_CALLBACKS].iter().flat_map(|k| k.iter().copied()).collect();
    ensure!(kinds == BTreeSet::from(["checkpoint", "completion", "progress"]), "callback kinds received: {kinds:?}");
    Ok(())
}

/// Health, the registry, the sweeper, and paths no route serves.
#[tokio::test]
async fn health_the_registry_the_sweeper_and_the_fallback_match_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app) = (&fixture.api, &fixture.app);

    // Health, the registry and the sweeper.
    api.send(api.http.get(app.runner.url("/health"))).await?.expect(200)?;
    api.send(api.http.post(app.runner.url("/health"))).await?.expect(405)?;
    api.get(app, "/voice-tools/tools").await?.expect(200)?;
    api.call(app, Method::POST, "/voice-tools/tools", None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url("/voice-tools/tools"))).await?.expect(401)?;
    api.call(app, Method::POST, "/voice-tools/sweep", Some(json!({})), &[]).await?.expect(200)?;
    api.get(app, "/voice-tools/sweep").await?.expect(405)?;
    api.send(api.http.post(app.runner.url("/voice-tools/sweep"))).await?.expect(401)?;
    // Who the key is: the token is the first tenant's admin.
    let key = api.get(app, "/voice-tools/key").await?.expect(200)?;
    ensure!(key.text.contains("\"tenant\":\"default\""), "{}", key.text);
    api.call(app, Method::POST, "/voice-tools/key", None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url("/voice-tools/key"))).await?.expect(401)?;

    // Paths no route serves: the fallback's JSON 404, with or without a token, any method.
    for path in ["/nope", "/voice-tools/status/", "/voice-tools/tools/send_email/history", "/mcp/extra"] {
        let missing = api.get(app, path).await?.expect(404)?;
        ensure!(missing.code() == "not_found", "{path}: {}", missing.text);
    }
    api.send(api.http.delete(app.runner.url("/voice-tools"))).await?.expect(404)?;
    api.assert_operations_were_exercised(HEALTH_OPERATIONS)
}

/// A call through its lifecycle: create, modify, status, confirm, resume, cancel, and the
/// session's calls.
#[tokio::test]
async fn a_calls_lifecycle_matches_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app, relay) = (&fixture.api, &fixture.app, &fixture.relay);
    let session = fixture.session.as_str();
    let create = |parameters: Value| {
        api.call(app, Method::POST, "/voice-tools/pending", Some(create_body(session, parameters, relay)), &[])
    };

    // Create: the answer, an idempotent retry, and each way a create is refused.
    let key = unique("key");
    let mut body = create_body(session, json!({"to": "John@Example.com", "subject": "Meeting Tomorrow"}), relay);
    body["intent_id"] = json!("intent-1");
    body["connection_id"] = json!("conn-1");
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let headers = [("idempotency-key", key.as_str()), ("traceparent", traceparent)];
    let first = api.call(app, Method::POST, "/voice-tools/pending", Some(body.clone()), &headers).await?.expect(201)?;
    let again = api.call(app, Method::POST, "/voice-tools/pending", Some(body.clone()), &headers).await?.expect(201)?;
    ensure!(again.body == first.body, "a retried create answered differently: {} vs {}", again.text, first.text);
    let mut other = body.clone();
    other["parameters"]["subject"] = json!("Something else");
    let reused = api.call(app, Method::POST, "/voice-tools/pending", Some(other), &headers).await?.expect(422)?;
    ensure!(reused.code() == "idempotency_key_reused", "{}", reused.text);
    let a = first.id()?;

    let invalid = create(json!({"to": "not-an-address"})).await?.expect(422)?;
    ensure!(invalid.code() == "validation_failed" && invalid.body["fields"][0]["field"] == "to", "{}", invalid.text);
    let unknown = api
        .call(
            app,
            Method::POST,
            "/voice-tools/pending",
            Some(json!({"session_id": session, "function_name": "launch_rockets", "parameters": {}})),
            &[],
        )
        .await?
        .expect(422)?;
    ensure!(unknown.code() == "unknown_function", "{}", unknown.text);
    let mut outside = create_body(session, json!({"to": "a@example.com"}), relay);
    outside["callback_url"] = json!("https://evil.example.com/hook");
    let outside = api.call(app, Method::POST, "/voice-tools/pending", Some(outside), &[]).await?.expect(422)?;
    ensure!(outside.code() == "callback_not_allowed", "{}", outside.text);
    // The seed's spelling, with an alias: answered with the canonical name.
    let seed = api
        .call(
            app,
            Method::POST,
            "/voice-tools/pending",
            Some(json!({"session_id": session, "function": "fixture_alias", "parameters": {"to": "s@example.com"}})),
            &[],
        )
        .await?
        .expect(201)?;
    ensure!(seed.body["function_name"] == FUNCTION, "{}", seed.text);
    create(json!([1])).await?.expect(400)?;
    let mut unknown_field = create_body(session, json!({"to": "a@example.com"}), relay);
    unknown_field["colour"] = json!("red");
    api.call(app, Method::POST, "/voice-tools/pending", Some(unknown_field), &[]).await?.expect(400)?;
    let raw = |content_type: &str, bytes: Vec<u8>| {
        api.request(app, Method::POST, "/voice-tools/pending").header("content-type", content_type).body(bytes)
    };
    api.send(raw("application/json", b"{\"session_id\": ".to_vec())).await?.expect(400)?;
    api.send(raw("application/json", Vec::new())).await?.expect(400)?;
    api.send(raw("text/plain", b"{}".to_vec())).await?.expect(415)?;
    api.send(raw("application/json", vec![b' '; 70 * 1024])).await?.expect(413)?;
    api.send(api.http.post(app.runner.url("/voice-tools/pending")).json(&body)).await?.expect(401)?;
    api.get(app, "/voice-tools/pending").await?.expect(405)?;

    // Modify: one field, several, a removal, nothing, and the refusals.
    let modify = |id: &str, patch: Value| {
        api.call(
            app,
            Method::PATCH,
            &format!("/voice-tools/modify/{id}"),
            Some(json!({"parameters": patch, "reason": "caller corrected it"})),
            &[],
        )
    };
    let one = modify(&a, json!({"to": "john.smith@example.com"})).await?.expect(200)?;
    ensure!(one.body["modification_applied"]["field"] == "to", "{}", one.text);
    let several = modify(&a, json!({"subject": "Lunch", "cc": "x@example.com"})).await?.expect(200)?;
    ensure!(several.body["modifications_applied"].as_array().map(Vec::len) == Some(2), "{}", several.text);
    let removed = modify(&a, json!({"cc": null})).await?.expect(200)?;
    ensure!(removed.body["modification_applied"]["new"].is_null(), "{}", removed.text);
    let nothing = modify(&a, json!({})).await?.expect(200)?;
    ensure!(nothing.body["modification_applied"].is_null(), "{}", nothing.text);
    let merge_patch = api
        .request(app, Method::PATCH, &format!("/voice-tools/modify/{a}"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"parameters": {"subject": "Lunch tomorrow"}}).to_string());
    api.send(merge_patch).await?.expect(200)?;
    let refused = modify(&a, json!({"to": "nope"})).await?.expect(422)?;
    ensure!(refused.code() == "validation_failed" && refused.body["fields"].is_array(), "{}", refused.text);
    api.call(app, Method::PATCH, &format!("/voice-tools/modify/{a}"), Some(json!({"parameters": [1]})), &[])
        .await?
        .expect(400)?;
    modify("tc_000000000000", json!({"to": "a@example.com"})).await?.expect(404)?;
    modify("not-an-id", json!({"to": "a@example.com"})).await?.expect(404)?;
    let plain = api
        .request(app, Method::PATCH, &format!("/voice-tools/modify/{a}"))
        .header("content-type", "text/plain")
        .body("x");
    api.send(plain).await?.expect(415)?;
    api.send(api.http.patch(app.runner.url(&format!("/voice-tools/modify/{a}"))).json(&json!({"parameters": {}})))
        .await?
        .expect(401)?;
    api.get(app, &format!("/voice-tools/modify/{a}")).await?.expect(405)?;

    // Status, including a long-poll on a call that is not executing (answered at once).
    let status = |id: &str| api.get(app, &format!("/voice-tools/status/{id}"));
    let call = status(&a).await?.expect(200)?;
    ensure!(call.body["parameters_history"].as_array().map(Vec::len) == Some(5), "{}", call.text);
    let polled = api
        .call(app, Method::GET, &format!("/voice-tools/status/{a}"), None, &[("prefer", "wait=1")])
        .await?
        .expect(200)?;
    ensure!(polled.header("preference-applied") == Some("wait=1"), "{:?}", polled.headers);
    status("tc_000000000000").await?.expect(404)?;
    status("not-an-id").await?.expect(404)?;
    api.send(api.http.get(app.runner.url(&format!("/voice-tools/status/{a}")))).await?.expect(401)?;
    api.call(app, Method::POST, &format!("/voice-tools/status/{a}"), None, &[]).await?.expect(405)?;

    // Confirm: 202, then the checkpoint; 200 under Prefer: wait; and the refusals.
    let confirm = |id: &str, body: Option<Value>, headers: &[(&str, &str)]| {
        api.call(app, Method::POST, &format!("/voice-tools/confirm/{id}"), body, headers)
    };
    let accepted = confirm(&a, Some(json!({"callback_url": relay.url})), &[]).await?.expect(202)?;
    ensure!(accepted.body["status"] == "EXECUTING", "{}", accepted.text);
    poll(app, &a, |c| c["status"] == "PREPARED").await?;
    let prepared = status(&a).await?.expect(200)?;
    ensure!(prepared.body["checkpoint"]["message"].is_string(), "{}", prepared.text);
    let again = confirm(&a, None, &[]).await?.expect(409)?;
    ensure!(again.code() == "invalid_state" && again.body["status"] == "PREPARED", "{}", again.text);

    let b = create(json!({"to": "b@example.com"})).await?.expect(201)?.id()?;
    let waited = confirm(&b, None, &[("prefer", "wait=10")]).await?.expect(200)?;
    ensure!(waited.body["status"] == "PREPARED", "{}", waited.text);
    ensure!(waited.header("preference-applied") == Some("wait=10"), "{:?}", waited.headers);

    let c = create(json!({"to": "c@example.com"})).await?.expect(201)?.id()?;
    let bad_callback = confirm(&c, Some(json!({"callback_url": "http://10.0.0.1/hook"})), &[]).await?.expect(422)?;
    ensure!(bad_callback.code() == "callback_not_allowed", "{}", bad_callback.text);
    confirm(&c, Some(json!({"colour": "red"})), &[]).await?.expect(400)?;
    confirm("tc_000000000000", None, &[]).await?.expect(404)?;
    let plain = api
        .request(app, Method::POST, &format!("/voice-tools/confirm/{c}"))
        .header("content-type", "text/plain")
        .body("x");
    api.send(plain).await?.expect(415)?;
    api.send(api.http.post(app.runner.url(&format!("/voice-tools/confirm/{c}")))).await?.expect(401)?;
    api.get(app, &format!("/voice-tools/confirm/{c}")).await?.expect(405)?;

    // With no time to wait, the answer is the 202 body (or, rarely, the call if it already paused).
    let d = create(json!({"to": "d@example.com"})).await?.expect(201)?.id()?;
    let quick = confirm(&d, None, &[("prefer", "wait=0")]).await?;
    ensure!(matches!(quick.status, 200 | 202), "{}", quick.text);
    ensure!(quick.header("preference-applied") == Some("wait=0"), "{:?}", quick.headers);

    // Resume: proceed (202, or the settled call under Prefer: wait), cancel, and the refusals.
    let resume = |id: &str, body: Option<Value>, headers: &[(&str, &str)]| {
        api.call(app, Method::POST, &format!("/resume-execution/{id}"), body, headers)
    };
    resume(&a, Some(json!({"action": "proceed"})), &[]).await?.expect(202)?;
    relay.wait_for(&a, "completion", SETTLE).await?;
    let completed = status(&a).await?.expect(200)?;
    ensure!(completed.body["status"] == "COMPLETED", "{}", completed.text);
    let settled = resume(&b, Some(json!({"action": "proceed"})), &[("prefer", "wait=10")]).await?.expect(200)?;
    ensure!(settled.body["status"] == "COMPLETED", "{}", settled.text);
    ensure!(settled.header("preference-applied") == Some("wait=10"), "{:?}", settled.headers);
    poll(app, &d, |c| c["status"] == "PREPARED").await?;
    let cancelled =
        resume(&d, Some(json!({"action": "cancel", "reason": "caller said no"})), &[]).await?.expect(200)?;
    ensure!(cancelled.body["status"] == "CANCELLED", "{}", cancelled.text);
    let done = resume(&a, Some(json!({"action": "proceed"})), &[]).await?.expect(409)?;
    ensure!(done.body["status"] == "COMPLETED", "{}", done.text);
    let settled_modify = modify(&a, json!({"to": "late@example.com"})).await?.expect(409)?;
    ensure!(settled_modify.code() == "invalid_state", "{}", settled_modify.text);
    resume(&c, Some(json!({"action": "proceed"})), &[]).await?.expect(409)?;
    resume(&c, Some(json!({"action": "maybe"})), &[]).await?.expect(400)?;
    resume(&c, None, &[]).await?.expect(400)?;
    resume("tc_000000000000", Some(json!({"action": "proceed"})), &[]).await?.expect(404)?;
    let plain = api
        .request(app, Method::POST, &format!("/resume-execution/{c}"))
        .header("content-type", "text/plain")
        .body("x");
    api.send(plain).await?.expect(415)?;
    api.send(api.http.post(app.runner.url(&format!("/resume-execution/{c}"))).json(&json!({"action": "proceed"})))
        .await?
        .expect(401)?;
    api.get(app, &format!("/resume-execution/{c}")).await?.expect(405)?;

    // Cancel: from PENDING, from EXECUTING before the side effect, too late, and the refusals.
    let cancel =
        |id: &str, body: Option<Value>| api.call(app, Method::DELETE, &format!("/voice-tools/cancel/{id}"), body, &[]);
    cancel(&c, Some(json!({"reason": "caller changed their mind"}))).await?.expect(200)?;
    let twice = cancel(&c, None).await?.expect(409)?;
    ensure!(twice.code() == "invalid_state" && twice.body["status"] == "CANCELLED", "{}", twice.text);
    cancel("tc_000000000000", None).await?.expect(404)?;
    let plain = api
        .request(app, Method::DELETE, &format!("/voice-tools/cancel/{c}"))
        .header("content-type", "text/plain")
        .body("x");
    api.send(plain).await?.expect(415)?;
    let malformed = api
        .request(app, Method::DELETE, &format!("/voice-tools/cancel/{c}"))
        .header("content-type", "application/json")
        .body("{");
    api.send(malformed).await?.expect(400)?;
    api.send(api.http.delete(app.runner.url(&format!("/voice-tools/cancel/{c}")))).await?.expect(401)?;
    api.get(app, &format!("/voice-tools/cancel/{c}")).await?.expect(405)?;

    let slow = create(json!({"to": "e@example.com", "delay_ms": {"prepare": 1000}})).await?.expect(201)?.id()?;
    confirm(&slow, None, &[]).await?.expect(202)?;
    let stopped = cancel(&slow, None).await?.expect(200)?;
    ensure!(stopped.body["status"] == "CANCELLED", "{}", stopped.text);

    let late = create(json!({"to": "f@example.com", "checkpoint": false, "delay_ms": {"execute": 1500}}))
        .await?
        .expect(201)?
        .id()?;
    confirm(&late, None, &[]).await?.expect(202)?;
    poll(app, &late, |c| c["side_effect_started_at"].is_string()).await?;
    let too_late = cancel(&late, None).await?.expect(409)?;
    ensure!(too_late.code() == "side_effect_started" && too_late.body["status"] == "EXECUTING", "{}", too_late.text);
    let finished = api
        .call(app, Method::GET, &format!("/voice-tools/status/{late}"), None, &[("prefer", "wait=10")])
        .await?
        .expect(200)?;
    ensure!(finished.body["status"] == "COMPLETED", "{}", finished.text);

    let failing =
        create(json!({"to": "g@example.com", "checkpoint": false, "fail_in": "execute"})).await?.expect(201)?.id()?;
    let failed = confirm(&failing, None, &[("prefer", "wait=10")]).await?.expect(200)?;
    ensure!(failed.body["status"] == "FAILED" && failed.body["error_message"].is_string(), "{}", failed.text);

    // The session's calls: something open and something settled.
    create(json!({"to": "h@example.com"})).await?.expect(201)?;
    let context = api.get(app, &format!("/voice-tools/context/{session}")).await?.expect(200)?;
    ensure!(context.body["pending"].as_array().is_some_and(|p| !p.is_empty()), "{}", context.text);
    ensure!(context.body["recent"].as_array().is_some_and(|r| !r.is_empty()), "{}", context.text);
    api.get(app, &format!("/voice-tools/context/{}", "s".repeat(201))).await?.expect(400)?;
    api.send(api.http.get(app.runner.url(&format!("/voice-tools/context/{session}")))).await?.expect(401)?;
    api.call(app, Method::POST, &format!("/voice-tools/context/{session}"), None, &[]).await?.expect(405)?;

    check_received(api, relay, LIFECYCLE_CALLBACKS)?;
    api.assert_operations_were_exercised(LIFECYCLE_OPERATIONS)
}

/// Stored session context.
#[tokio::test]
async fn stored_session_context_matches_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app) = (&fixture.api, &fixture.app);
    let session = fixture.session.as_str();

    // Stored session context: found, absent, expired, and a question without a key.
    let client = db().await?;
    client
        .execute(
            "INSERT INTO session_context (session_id, context_key, context_value)
             VALUES ($1, 'last_query_results', $2)",
            &[&session, &json!({"documents": [{"id": 1}]})],
        )
        .await?;
    client
        .execute(
            "INSERT INTO session_context (session_id, context_key, context_value, expires_at)
             VALUES ($1, 'old', '{}', now() - interval '1 second')",
            &[&session],
        )
        .await?;
    let stored = |query: String| api.get(app, &format!("/get-session-context?{query}"));
    let found = stored(format!("session_id={session}&context_key=last_query_results")).await?.expect(200)?;
    ensure!(found.body == json!({"context": {"documents": [{"id": 1}]}}), "{}", found.text);
    stored(format!("session_id={session}&context_key=missing")).await?.expect(404)?;
    stored(format!("session_id={session}&context_key=old")).await?.expect(404)?;
    stored(format!("session_id={session}")).await?.expect(400)?;
    api.send(api.http.get(app.runner.url(&format!("/get-session-context?session_id={session}&context_key=old"))))
        .await?
        .expect(401)?;
    api.call(app, Method::POST, "/get-session-context", None, &[]).await?.expect(405)?;
    api.assert_operations_were_exercised(STORED_CONTEXT_OPERATIONS)
}

/// The vector-search and Gmail tools' gated flows.
#[tokio::test]
async fn the_tools_gated_flows_match_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app, relay) = (&fixture.api, &fixture.app, &fixture.relay);
    let session = fixture.session.as_str();

    // The vector-search tool's gated flow: completed, cancelled at its gate, and refused.
    let search = search_body(session, relay);
    let query_vector_db = |body: Value| api.call(app, Method::POST, "/query-vector-db", Some(body), &[]);
    let searched = query_vector_db(search.clone()).await?.expect(200)?;
    ensure!(
        searched.body["status"] == "COMPLETED" && searched.body["context_key"] == "last_query_results",
        "{}",
        searched.text
    );
    let refusing = Relay::start().await?;
    refusing.set_progress_reply(ProgressReply::CancelAtGate("QUERYING"));
    let mut stopped = search.clone();
    stopped["callback_url"] = json!(refusing.url);
    let stopped = query_vector_db(stopped).await?.expect(200)?;
    ensure!(stopped.body["status"] == "CANCELLED" && stopped.body["success"] == false, "{}", stopped.text);
    for callback in refusing.received() {
        api.check_callback(&callback.kind, &callback.body)?;
    }
    let mut invalid = search.clone();
    invalid["structured_query"]["filters"]["date_start"] = json!("last July");
    let invalid = query_vector_db(invalid).await?.expect(422)?;
    ensure!(invalid.body["fields"][0]["field"] == "structured_query.filters.date_start", "{}", invalid.text);
    let mut elsewhere = search.clone();
    elsewhere["callback_url"] = json!("https://evil.example.com/hook");
    let elsewhere = query_vector_db(elsewhere).await?.expect(422)?;
    ensure!(elsewhere.code() == "callback_not_allowed", "{}", elsewhere.text);
    let mut unknown_field = search.clone();
    unknown_field["colour"] = json!("red");
    query_vector_db(unknown_field).await?.expect(400)?;
    let plain = api.request(app, Method::POST, "/query-vector-db").header("content-type", "text/plain").body("x");
    api.send(plain).await?.expect(415)?;
    api.send(api.http.post(app.runner.url("/query-vector-db")).json(&search)).await?.expect(401)?;
    api.get(app, "/query-vector-db").await?.expect(405)?;

    // The Gmail tool's gated flow (to the local Gmail-compatible server of dev mode): sent,
    // cancelled at its second gate, and refused.
    let email = email_body(session, relay);
    let execute_gmail = |body: Value| api.call(app, Method::POST, "/execute-gmail", Some(body), &[]);
    let sent = execute_gmail(email.clone()).await?.expect(200)?;
    ensure!(sent.body["status"] == "COMPLETED" && sent.body["success"] == true, "{}", sent.text);
    let declining = Relay::start().await?;
    declining.set_progress_reply(ProgressReply::CancelAtGate("READY_TO_SEND"));
    let mut declined = email.clone();
    declined["callback_url"] = json!(declining.url);
    let declined = execute_gmail(declined).await?.expect(200)?;
    ensure!(declined.body["status"] == "CANCELLED" && declined.body["success"] == false, "{}", declined.text);
    for callback in declining.received() {
        api.check_callback(&callback.kind, &callback.body)?;
    }
    let mut injected = email.clone();
    injected["subject"] = json!("Hi\r\nBcc: everyone@example.com");
    let injected = execute_gmail(injected).await?.expect(422)?;
    ensure!(injected.body["fields"][0]["field"] == "subject", "{}", injected.text);
    let mut elsewhere = email.clone();
    elsewhere["callback_url"] = json!("https://evil.example.com/hook");
    ensure!(execute_gmail(elsewhere).await?.expect(422)?.code() == "callback_not_allowed");
    let mut unknown_field = email.clone();
    unknown_field["colour"] = json!("red");
    execute_gmail(unknown_field).await?.expect(400)?;
    let plain = api.request(app, Method::POST, "/execute-gmail").header("content-type", "text/plain").body("x");
    api.send(plain).await?.expect(415)?;
    api.send(api.http.post(app.runner.url("/execute-gmail")).json(&email)).await?.expect(401)?;
    api.get(app, "/execute-gmail").await?.expect(405)?;

    check_received(api, relay, FLOW_CALLBACKS)?;
    api.assert_operations_were_exercised(FLOW_OPERATIONS)
}

/// Each tool's history: its executions and its stats.
#[tokio::test]
async fn each_tools_history_matches_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app, relay) = (&fixture.api, &fixture.app, &fixture.relay);
    let session = fixture.session.as_str();
    let create = |parameters: Value| {
        api.call(app, Method::POST, "/voice-tools/pending", Some(create_body(session, parameters, relay)), &[])
    };

    // Executions for the fixture tool's history: one completed, one failed (the requests the
    // lifecycle group makes for them).
    let confirm = |id: &str, body: Option<Value>, headers: &[(&str, &str)]| {
        api.call(app, Method::POST, &format!("/voice-tools/confirm/{id}"), body, headers)
    };
    let done = create(json!({"to": "f@example.com", "checkpoint": false})).await?.expect(201)?.id()?;
    let completed = confirm(&done, None, &[("prefer", "wait=10")]).await?.expect(200)?;
    ensure!(completed.body["status"] == "COMPLETED", "{}", completed.text);
    let failing =
        create(json!({"to": "g@example.com", "checkpoint": false, "fail_in": "execute"})).await?.expect(201)?.id()?;
    let failed = confirm(&failing, None, &[("prefer", "wait=10")]).await?.expect(200)?;
    ensure!(failed.body["status"] == "FAILED" && failed.body["error_message"].is_string(), "{}", failed.text);

    // Each tool's history: its executions newest first, page by page and under an alias too, and
    // its stats. The calls above have left rows for the fixture tool.
    let history = |query: &str| api.get(app, &format!("/voice-tools/tools/{FUNCTION}/{query}"));
    let page = history("executions").await?.expect(200)?;
    let rows = page.body["executions"].as_array().cloned().unwrap_or_default();
    ensure!(page.body["tool"] == FUNCTION && !rows.is_empty(), "{}", page.text);
    let started: Vec<&str> = rows.iter().filter_map(|row| row["started_at"].as_str()).collect();
    ensure!(started.windows(2).all(|pair| pair[0] >= pair[1]), "not newest first: {}", page.text);
    let first = history("executions?limit=1").await?.expect(200)?;
    ensure!(first.body["executions"].as_array().map(Vec::len) == Some(1), "{}", first.text);
    if let Some(cursor) = first.body["next_cursor"].as_str() {
        let next = history(&format!("executions?limit=1&cursor={cursor}")).await?.expect(200)?;
        let (before, after) = (&first.body["executions"][0], &next.body["executions"][0]);
        ensure!(
            after["execution_id"] != before["execution_id"]
                && after["started_at"].as_str() <= before["started_at"].as_str(),
            "the next page does not follow the first: {} then {}",
            first.text,
            next.text
        );
    }
    let oks = api.get(app, "/voice-tools/tools/fixture_alias/executions?outcome=ok&limit=5").await?.expect(200)?;
    ensure!(oks.body["tool"] == FUNCTION, "{}", oks.text);
    ensure!(oks.body["executions"].as_array().into_iter().flatten().all(|row| row["outcome"] == "ok"), "{}", oks.text);
    let bad_limit = history("executions?limit=0").await?.expect(400)?;
    ensure!(
        bad_limit.code() == "invalid_input" && bad_limit.body["fields"][0]["field"] == "limit",
        "{}",
        bad_limit.text
    );
    let no_tool = api.get(app, "/voice-tools/tools/no_such_tool/executions").await?.expect(404)?;
    ensure!(no_tool.code() == "not_found", "{}", no_tool.text);
    let executions_path = format!("/voice-tools/tools/{FUNCTION}/executions");
    api.call(app, Method::POST, &executions_path, None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url(&executions_path))).await?.expect(401)?;

    let stats = history("stats?window=1h").await?.expect(200)?;
    ensure!(stats.body["tool"] == FUNCTION && stats.body["window"] == "1h", "{}", stats.text);
    let outcomes = &stats.body["outcomes"];
    let total: i64 = ["ok", "rejected", "failed", "crashed", "cancelled"]
        .iter()
        .filter_map(|outcome| outcomes[*outcome].as_i64())
        .sum();
    ensure!(stats.body["executions"].as_i64().is_some_and(|n| n > 0 && n == total), "{}", stats.text);
    let by_default = history("stats").await?.expect(200)?;
    ensure!(by_default.body["window"] == "24h", "{}", by_default.text);
    let bad_window = history("stats?window=1w").await?.expect(400)?;
    ensure!(bad_window.body["fields"][0]["field"] == "window", "{}", bad_window.text);
    api.get(app, "/voice-tools/tools/no_such_tool/stats").await?.expect(404)?;
    let stats_path = format!("/voice-tools/tools/{FUNCTION}/stats");
    api.call(app, Method::POST, &stats_path, None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url(&stats_path))).await?.expect(401)?;
    api.assert_operations_were_exercised(HISTORY_OPERATIONS)
}

/// The calls list and a call's callback attempts (the dashboard's reads).
#[tokio::test]
async fn the_calls_list_and_callbacks_match_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app, relay) = (&fixture.api, &fixture.app, &fixture.relay);
    let session = fixture.session.as_str();
    let create = |parameters: Value| {
        api.call(app, Method::POST, "/voice-tools/pending", Some(create_body(session, parameters, relay)), &[])
    };
    let done = create(json!({"to": "k@example.com", "checkpoint": false})).await?.expect(201)?.id()?;
    let completed =
        api.call(app, Method::POST, &format!("/voice-tools/confirm/{done}"), None, &[("prefer", "wait=10")]).await?;
    ensure!(completed.expect(200)?.body["status"] == "COMPLETED", "{done} did not complete");
    let open = create(json!({"to": "l@example.com"})).await?.expect(201)?.id()?;

    let page = api.get(app, &format!("/voice-tools/calls?session_id={session}&limit=1")).await?.expect(200)?;
    ensure!(page.body["calls"][0]["tool_call_id"] == open.as_str(), "{}", page.text);
    let cursor = page.body["next_cursor"].as_str().context("a next page")?.to_owned();
    let next = api.get(app, &format!("/voice-tools/calls?session_id={session}&limit=1&cursor={cursor}")).await?;
    ensure!(next.expect(200)?.body["calls"][0]["tool_call_id"] == done.as_str(), "the second page");
    api.get(app, &format!("/voice-tools/calls?status=PENDING&function_name={FUNCTION}")).await?.expect(200)?;
    for bad in ["limit=0", "status=DONE", "cursor=x", "session_id="] {
        let refused = api.get(app, &format!("/voice-tools/calls?{bad}")).await?.expect(400)?;
        ensure!(refused.code() == "invalid_input", "{bad}: {}", refused.text);
    }
    api.call(app, Method::POST, "/voice-tools/calls", None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url("/voice-tools/calls"))).await?.expect(401)?;
    api.call(app, Method::GET, "/voice-tools/calls", Some(json!([])), &[]).await?.expect(400)?;

    relay.wait_for(&done, "completion", SETTLE).await?;
    // The attempt's row is written after the delivery: wait for it before checking its shape.
    app.callback_attempts(&done, 1, SETTLE).await?;
    let attempts = api.get(app, &format!("/voice-tools/calls/{done}/callbacks")).await?.expect(200)?;
    ensure!(attempts.body["callbacks"].as_array().is_some_and(|a| !a.is_empty()), "{}", attempts.text);
    api.get(app, "/voice-tools/calls/tc_000000000000/callbacks").await?.expect(404)?;
    api.call(app, Method::DELETE, &format!("/voice-tools/calls/{done}/callbacks"), None, &[]).await?.expect(405)?;
    api.send(api.http.get(app.runner.url(&format!("/voice-tools/calls/{done}/callbacks")))).await?.expect(401)?;

    // A relay's mark that the caller heard the outcome: once per call, and the same key's retry
    // learns that the mark is its own; an open call has none to tell.
    let told = format!("/voice-tools/calls/{done}/outcome-told");
    let mark = |key: &'static str| api.call(app, Method::POST, &told, None, &[("idempotency-key", key)]);
    let first = mark("relay-a").await?.expect(200)?;
    ensure!(first.body["first"] == true && first.body["status"] == "COMPLETED", "{}", first.text);
    ensure!(mark("relay-a").await?.expect(200)?.body["first"] == true, "the same key's retry");
    ensure!(mark("relay-b").await?.expect(200)?.body["first"] == false, "another relay");
    let still_open = api.call(app, Method::POST, &format!("/voice-tools/calls/{open}/outcome-told"), None, &[]).await?;
    ensure!(still_open.expect(409)?.code() == "invalid_state", "an open call");
    api.call(app, Method::POST, "/voice-tools/calls/tc_000000000000/outcome-told", None, &[]).await?.expect(404)?;
    api.call(app, Method::GET, &told, None, &[]).await?.expect(405)?;
    api.call(app, Method::POST, &told, Some(json!({"first": true})), &[]).await?.expect(400)?;
    api.call(app, Method::POST, &told, None, &[("idempotency-key", "")]).await?.expect(400)?;
    api.send(api.http.post(app.runner.url(&told))).await?.expect(401)?;
    api.assert_operations_were_exercised(CALLS_OPERATIONS)
}

/// MCP over Streamable HTTP.
#[tokio::test]
async fn mcp_matches_the_description() -> Result<()> {
    let fixture = Fixture::start().await?;
    let (api, app) = (&fixture.api, &fixture.app);
    let session = fixture.session.as_str();

    // MCP over Streamable HTTP, without sessions: the handshake, the tools, tool calls, and each
    // refusal. JSON-RPC bodies are answered as JSON-RPC, the HTTP refusals in the flat shape.
    let accept = ("accept", "application/json, text/event-stream");
    let version = ("mcp-protocol-version", "2025-06-18");
    let mcp = |message: Value, headers: &[(&str, &str)]| api.call(app, Method::POST, "/mcp", Some(message), headers);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "openapi-test", "version": "1"}}});
    let initialized = mcp(initialize, &[accept]).await?.expect(200)?;
    ensure!(
        initialized.body["id"] == 1 && initialized.body["result"]["protocolVersion"] == "2025-06-18",
        "{}",
        initialized.text
    );
    ensure!(
        initialized.header("mcp-session-id").is_none(),
        "a session id from a stateless server: {:?}",
        initialized.headers
    );
    mcp(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &[accept, version]).await?.expect(202)?;
    let ping = json!({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"});
    let pong = mcp(ping.clone(), &[accept, version]).await?.expect(200)?;
    ensure!(pong.body["id"] == "ping-1" && pong.body["result"] == json!({}), "{}", pong.text);
    let listed =
        mcp(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), &[accept, version]).await?.expect(200)?;
    let names: Vec<&str> =
        listed.body["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    ensure!(names.contains(&"request_tool") && names.contains(&"get_context"), "{}", listed.text);
    // A tool call answers what the REST route answers, as structured content and as text.
    let get_context = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "get_context", "arguments": {"session_id": session}}});
    let called = mcp(get_context, &[accept, version]).await?.expect(200)?;
    let result = &called.body["result"];
    for (schema, instance) in [("McpToolResult", result), ("ContextResponse", &result["structuredContent"])] {
        let problems = api.api.problems(&json!({"$ref": format!("#/components/schemas/{schema}")}), instance)?;
        ensure!(problems.is_empty(), "not a {schema}:\n  {}\n{}", problems.join("\n  "), called.text);
    }
    ensure!(result["isError"] == false && result["structuredContent"]["session_id"] == session, "{}", called.text);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap_or_default())?;
    ensure!(text == result["structuredContent"], "the text and the structured content differ: {}", called.text);
    let unknown_tool = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "launch_rockets", "arguments": {}}});
    let unknown_tool = mcp(unknown_tool, &[accept, version]).await?.expect(200)?;
    ensure!(unknown_tool.body["id"] == 4 && unknown_tool.body["error"]["code"] == -32602, "{}", unknown_tool.text);
    let mcp_raw = |content_type: &str, body: &'static str| {
        api.request(app, Method::POST, "/mcp")
            .header("content-type", content_type)
            .header(accept.0, accept.1)
            .body(body)
    };
    let not_json = api.send(mcp_raw("application/json", "{\"jsonrpc\": ")).await?.expect(400)?;
    ensure!(not_json.body["id"].is_null() && not_json.body["error"]["code"] == -32700, "{}", not_json.text);
    let batch = mcp(json!([{"jsonrpc": "2.0", "id": 5, "method": "ping"}]), &[accept, version]).await?.expect(400)?;
    ensure!(batch.body["id"].is_null() && batch.body["error"]["code"] == -32600, "{}", batch.text);
    let too_old = mcp(ping.clone(), &[accept, ("mcp-protocol-version", "1999-01-01")]).await?.expect(400)?;
    ensure!(too_old.body["error"]["code"] == -32022, "{}", too_old.text);
    // 2026-07-28: discovery, a modern tool call, a header mismatch and a method it does not have.
    let modern_meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let modern = [accept, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "server/discover")];
    let discover = json!({"jsonrpc": "2.0", "id": 6, "method": "server/discover", "params": {"_meta": modern_meta}});
    let discovered = mcp(discover.clone(), &modern).await?.expect(200)?;
    ensure!(discovered.body["result"]["resultType"] == "complete", "{}", discovered.text);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "get_context", "arguments": {"session_id": session}, "_meta": modern_meta}});
    let headers =
        [accept, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "get_context")];
    let called = mcp(call, &headers).await?.expect(200)?;
    let problems = api.api.problems(&json!({"$ref": "#/components/schemas/McpToolResult"}), &called.body["result"])?;
    ensure!(problems.is_empty(), "not a McpToolResult:\n  {}\n{}", problems.join("\n  "), called.text);
    let mismatch = [accept, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let mismatched = mcp(discover, &mismatch).await?.expect(400)?;
    ensure!(mismatched.body["error"]["code"] == -32020, "{}", mismatched.text);
    let ping_modern = json!({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"_meta": modern_meta}});
    let pinged = mcp(ping_modern, &[accept, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "ping")]).await?;
    ensure!(pinged.expect(404)?.body["error"]["code"] == -32601, "ping is not a 2026-07-28 method");
    api.send(mcp_raw("text/plain", "{}")).await?.expect(415)?;
    for method in [Method::GET, Method::DELETE] {
        let refused = api.call(app, method, "/mcp", None, &[accept]).await?.expect(405)?;
        ensure!(refused.header("allow") == Some("POST"), "{:?}", refused.headers);
    }
    api.send(api.http.post(app.runner.url("/mcp")).header(accept.0, accept.1).json(&ping)).await?.expect(401)?;
    let foreign = mcp(ping, &[accept, version, ("origin", "http://evil.example")]).await?.expect(403)?;
    ensure!(foreign.code() == "forbidden", "{}", foreign.text);
    api.assert_operations_were_exercised(MCP_OPERATIONS)
}

/// Expiry, on a runner of its own.
#[tokio::test]
async fn expired_calls_match_the_description() -> Result<()> {
    let api = &Checker::new(OpenApi::load()?);
    let relay = &Relay::start().await?;

    // Expiry: a runner whose PENDING calls live one second.
    let short = App::start(lifecycle_options(&[("pending_ttl_seconds", "1")], &["--sweep-interval", "0"])).await?;
    let expiring = unique("openapi_ttl");
    let x = api
        .call(
            &short,
            Method::POST,
            "/voice-tools/pending",
            Some(create_body(&expiring, json!({"to": "x@example.com"}), relay)),
            &[],
        )
        .await?
        .expect(201)?
        .id()?;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let expired = api.get(&short, &format!("/voice-tools/status/{x}")).await?.expect(200)?;
    ensure!(expired.body["status"] == "EXPIRED", "{}", expired.text);
    api.call(&short, Method::POST, &format!("/voice-tools/confirm/{x}"), None, &[]).await?.expect(410)?;
    api.call(
        &short,
        Method::PATCH,
        &format!("/voice-tools/modify/{x}"),
        Some(json!({"parameters": {"to": "y@example.com"}})),
        &[],
    )
    .await?
    .expect(410)?;
    api.call(&short, Method::POST, &format!("/resume-execution/{x}"), Some(json!({"action": "proceed"})), &[])
        .await?
        .expect(410)?;
    api.call(&short, Method::DELETE, &format!("/voice-tools/cancel/{x}"), None, &[]).await?.expect(410)?;
    let recent = api.get(&short, &format!("/voice-tools/context/{expiring}")).await?.expect(200)?;
    ensure!(recent.body["recent"][0]["status"] == "EXPIRED", "{}", recent.text);
    api.call(&short, Method::POST, "/voice-tools/sweep", None, &[]).await?.expect(200)?;
    let gone = relay.wait_for(&x, "completion", SETTLE).await?;
    ensure!(gone.body["status"] == "EXPIRED", "{}", gone.body);
    drop(short);

    check_received(api, relay, EXPIRY_CALLBACKS)?;
    Ok(())
}

/// The database down, on a runner of its own.
#[tokio::test]
async fn the_database_down_matches_the_description() -> Result<()> {
    let api = &Checker::new(OpenApi::load()?);
    let relay = &Relay::start().await?;
    let session = unique("openapi");
    let session = session.as_str();

    // The database down: every route that needs it answers 503 with Retry-After.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = closed.local_addr()?.port();
    drop(closed);
    let (db_url, db_host) = (format!("postgres://postgres@127.0.0.1:{port}/gatehouse"), format!("127.0.0.1:{port}"));
    let down = App::start(lifecycle_options(&[("db_url", &db_url), ("db_host", &db_host)], &["--sweep-interval", "0"]))
        .await?;
    api.send(api.http.get(down.runner.url("/health"))).await?.expect(503)?;
    let any = "tc_000000000000";
    let routes = [
        (
            Method::POST,
            "/voice-tools/pending".to_owned(),
            Some(create_body("s", json!({"to": "a@example.com"}), relay)),
        ),
        (Method::PATCH, format!("/voice-tools/modify/{any}"), Some(json!({"parameters": {"to": "a@example.com"}}))),
        (Method::DELETE, format!("/voice-tools/cancel/{any}"), None),
        (Method::POST, format!("/voice-tools/confirm/{any}"), None),
        (Method::GET, format!("/voice-tools/status/{any}"), None),
        (Method::POST, format!("/resume-execution/{any}"), Some(json!({"action": "proceed"}))),
        (Method::GET, "/voice-tools/context/s".to_owned(), None),
        (Method::GET, "/get-session-context?session_id=s&context_key=k".to_owned(), None),
        (Method::POST, "/voice-tools/sweep".to_owned(), None),
        (Method::GET, format!("/voice-tools/tools/{FUNCTION}/executions"), None),
        (Method::GET, format!("/voice-tools/tools/{FUNCTION}/stats"), None),
        (Method::GET, "/voice-tools/calls".to_owned(), None),
        (Method::GET, format!("/voice-tools/calls/{any}/callbacks"), None),
        (Method::POST, format!("/voice-tools/calls/{any}/outcome-told"), None),
        (Method::POST, "/query-vector-db".to_owned(), Some(search_body(session, relay))),
        (Method::POST, "/execute-gmail".to_owned(), Some(email_body(session, relay))),
    ];
    for (method, path, body) in routes {
        let answer = api.call(&down, method, &path, body, &[]).await?.expect(503)?;
        ensure!(answer.code() == "database_unavailable", "{}", answer.text);
    }
    drop(down);
    Ok(())
}

/// Every `$ref` in the file resolves, every schema is a valid 2020-12 schema that compiles,
/// and every operation is named once.
#[test]
fn the_description_is_well_formed() -> Result<()> {
    let api = OpenApi::load()?;
    let mut references = Vec::new();
    collect_refs(&api.doc, &mut references);
    for reference in &references {
        api.resolve(&json!({"$ref": reference}))?;
    }
    for (name, schema) in api.doc["components"]["schemas"].as_object().into_iter().flatten() {
        ensure!(
            jsonschema::draft202012::meta::is_valid(schema),
            "components/schemas/{name} is not a valid 2020-12 schema"
        );
        api.validator(&json!({"$ref": format!("#/components/schemas/{name}")}))?;
    }
    // The patterns and formats are enforced, not just written down.
    let cases = [
        ("ToolCallId", json!("tc_0123456789ab"), json!("tc_0123456789AB")),
        ("SessionId", json!("sess_1"), json!("a\u{0}b")),
        ("Timestamp", json!("2026-01-01T10:00:00.000Z"), json!("2026-01-01 10:00:00")),
        ("Timestamp", json!("2026-01-01T10:00:00.000Z"), json!("2026-13-01T10:00:00.000Z")),
    ];
    for (name, good, bad) in cases {
        let schema = json!({"$ref": format!("#/components/schemas/{name}")});
        ensure!(api.problems(&schema, &good)?.is_empty(), "{name} refuses {good}");
        ensure!(!api.problems(&schema, &bad)?.is_empty(), "{name} accepts {bad}");
    }
    let mut ids = BTreeSet::new();
    for (template, method) in api.operations() {
        let operation = api.operation(&template, &method).context("listed operation")?;
        let id =
            operation["operationId"].as_str().with_context(|| format!("{method} {template} has no operationId"))?;
        ensure!(ids.insert(id.to_owned()), "operationId {id} is used twice");
        // Each `{name}` of the template is a declared path parameter.
        let declared: BTreeSet<String> = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| api.resolve(p).ok())
            .filter(|p| p["in"] == "path")
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect();
        let in_template: BTreeSet<String> = template
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect();
        ensure!(declared == in_template, "{method} {template}: path parameters {declared:?}");
    }
    Ok(())
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                out.push(reference.clone());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// The file's statuses and error codes are the domain's, and each response that pins an error
/// code sits under the HTTP status the domain gives that code.
#[test]
fn statuses_and_error_codes_match_the_domain() -> Result<()> {
    let api = OpenApi::load()?;
    let schemas = &api.doc["components"]["schemas"];
    let listed = |name: &str| -> BTreeSet<String> {
        schemas[name]["enum"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
    };
    let statuses: BTreeSet<String> = Status::ALL.iter().map(|s| s.as_str().to_owned()).collect();
    ensure!(listed("Status") == statuses, "Status: {:?} vs the domain's {statuses:?}", listed("Status"));
    let codes: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect();
    ensure!(listed("ErrorCode") == codes, "ErrorCode: {:?} vs the domain's {codes:?}", listed("ErrorCode"));

    let by_name: BTreeMap<&str, ErrorCode> = ErrorCode::ALL.iter().map(|c| (c.as_str(), *c)).collect();
    let mut pinned_somewhere = BTreeSet::new();
    // The signature codes are answered on the signed hops, which the tool contract documents.
    let contract = OpenApi::load_file("openapi/tool-contract.yaml")?;
    for api in [&api, &contract] {
        for (template, method) in api.operations() {
            let operation = api.operation(&template, &method).context("listed operation")?;
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                let schema = &api.resolve(response)?["content"]["application/json"]["schema"];
                for code in pinned_codes(schema) {
                    let known = by_name.get(code.as_str()).with_context(|| format!("unknown code {code}"))?;
                    ensure!(
                        known.http_status().to_string() == *status,
                        "{method} {template}: {code} documented under {status}, but the domain answers it with {}",
                        known.http_status()
                    );
                    pinned_somewhere.insert(code);
                }
            }
        }
    }
    // A code no route documents is one a client cannot learn about.
    let missing: Vec<&String> = codes.iter().filter(|c| !pinned_somewhere.contains(*c)).collect();
    ensure!(missing.is_empty(), "error codes no route documents: {missing:?}");
    Ok(())
}

/// The codes an error response's schema allows: `allOf: [Error, {properties: {code: ...}}]`.
fn pinned_codes(schema: &Value) -> Vec<String> {
    schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| &part["properties"]["code"])
        .flat_map(|code| {
            let single = code["const"].as_str().map(str::to_owned);
            let several = code["enum"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned));
            single.into_iter().chain(several).collect::<Vec<_>>()
        })
        .collect()
}

/// The tool contract (openapi/tool-contract.yaml) against a tool as a tool host serves it: the
/// declared `book_table` on its `/internal/tools/book-table` route, with signed requests. Every
/// operation answers as the file says, `summarize` says the same twice, and the ordering rules
/// hold: a `prepare` or `execute` after the call's `discard` is refused, as is an `execute` of a
/// call that has not passed its checkpoint, and an `execute` repeated for a completed call
/// answers its outcome and books nothing more.
#[tokio::test]
async fn the_tool_contract_is_what_a_tool_answers() -> Result<()> {
    use gatehouse_domain::contract::RECORDED_HEADER;
    use gatehouse_domain::service_auth::SIGNATURE_HEADER;
    use gatehouse_tests::reservations::{HoldState, Reservations};
    use gatehouse_tests::{sign_contract, unix_now};

    use crate::declared_tools::{app_with, held_at_checkpoint};

    const SECRET: &str = "contract-description-secret";
    const BASE: &str = "/internal/tools/book-table";
    let reservations = Reservations::start().await?;
    let app = app_with(&reservations, &[("contract_secret", SECRET)], &[]).await?;
    let relay = Relay::start().await?;
    let api = OpenApi::load_file("openapi/tool-contract.yaml")?;
    ensure!(api.doc["info"]["x-replay-window-seconds"] == 300, "the replay window is stated as a number");
    let checker = Checker { base_path: BASE.to_owned(), ..Checker::new(api) };
    let signed = |method: Method, operation: &str, body: &Value| {
        let path = format!("{BASE}/tool/{operation}");
        let bytes = if method == Method::GET { Vec::new() } else { body.to_string().into_bytes() };
        let signature = sign_contract(SECRET.as_bytes(), unix_now(), method.as_str(), &path, &bytes);
        checker
            .http
            .request(method, app.runner.url(&path))
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(bytes)
    };
    let post = |operation: &str, body: &Value| checker.send(signed(Method::POST, operation, body));

    let described = checker.send(signed(Method::GET, "describe", &Value::Null)).await?.expect(200)?;
    ensure!(described.body["name"] == "book_table" && described.body["needs_checkpoint"] == true, "{}", described.text);
    let good = json!({"parameters": {"name": "Ada", "party_size": 4, "date": "2026-12-01", "time": "19:30"}});
    let validated = post("validate", &good).await?.expect(200)?;
    ensure!(validated.header(RECORDED_HEADER).is_some(), "a Gatehouse tool says it keeps its history");
    let refused = post("validate", &json!({"parameters": {"party_size": 40}})).await?.expect(422)?;
    ensure!(refused.body["fields"].as_array().is_some_and(|f| !f.is_empty()), "{}", refused.text);
    let first = post("summarize", &good).await?.expect(200)?;
    let second = post("summarize", &good).await?.expect(200)?;
    ensure!(first.body == second.body, "summarize is deterministic: {} then {}", first.text, second.text);
    let unsigned = checker.http.post(app.runner.url(&format!("{BASE}/tool/validate"))).json(&good);
    checker.send(unsigned).await?.expect(401)?;
    let once = signed(Method::POST, "validate", &good).build()?;
    let replay = once.try_clone().context("a body that can be sent twice")?;
    checker.send(RequestBuilder::from_parts(checker.http.clone(), once)).await?.expect(200)?;
    checker.send(RequestBuilder::from_parts(checker.http.clone(), replay)).await?.expect(401)?;

    // At the checkpoint: a repeated prepare answers the checkpoint made; execute and discard
    // are out of order while the call waits for the caller.
    let id = held_at_checkpoint(&app, &relay, "contract").await?;
    let on_call = json!({"tool_call_id": id, "attempt": 1, "parameters": {}});
    let again = post("prepare", &on_call).await?.expect(200)?;
    let recorded = app.status(&id).await?.body;
    ensure!(again.body["checkpoint"] == recorded["checkpoint"], "{} / {recorded}", again.text);
    post("execute", &on_call).await?.expect(409)?;
    post("discard", &on_call).await?.expect(409)?;
    ensure!(reservations.holds().len() == 1, "one hold: {:?}", reservations.holds());

    // Cancelled, the hold is discarded; then prepare and execute are refused, and a discard
    // sent again does nothing more.
    ensure!(app.cancel(&id).await?.status == 200);
    let deadline = Instant::now() + SETTLE;
    while reservations.holds().first().is_none_or(|hold| hold.state != HoldState::Released) {
        ensure!(Instant::now() < deadline, "the hold was never released: {:?}", reservations.holds());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    post("prepare", &on_call).await?.expect(409)?;
    post("execute", &on_call).await?.expect(409)?;
    post("discard", &on_call).await?.expect(200)?;
    ensure!(reservations.holds().len() == 1, "nothing was held again: {:?}", reservations.holds());

    // Completed: execute sent again answers the outcome and books nothing more.
    let id = held_at_checkpoint(&app, &relay, "contract").await?;
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completed = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    let repeated = post("execute", &json!({"tool_call_id": id, "attempt": 1, "parameters": {}})).await?.expect(200)?;
    ensure!(repeated.body["result"] == completed["result"], "{} / {completed}", repeated.text);
    let booked = reservations.holds().iter().filter(|hold| hold.state == HoldState::Booked).count();
    ensure!(booked == 1, "one booking: {:?}", reservations.holds());

    let documented = checker.api.operations();
    ensure!(documented.len() == 6, "the six operations: {documented:?}");
    let documented: Vec<(&str, &str)> = documented.iter().map(|(t, m)| (t.as_str(), m.as_str())).collect();
    checker.assert_operations_were_exercised(&documented)
}

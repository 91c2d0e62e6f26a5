//! The runner gives a component what Spin gives it.
//!
//! Every test starts `gatehouse up` on `tests/fixtures/spin.toml`, where one probe component
//! (tests/fixtures/probe) is mounted under several ids and routes and reports back, as JSON,
//! what it saw: the `spin-*` headers, its variables, the result of outbound HTTP and
//! PostgreSQL calls. The expected values are Spin's, so a failure here is a place where an
//! application would behave differently on the runner than on `spin up`.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse_tests::{
    Runner, RunnerOptions, TOKEN, database_url, fixture_manifest, http, start_expecting_failure, unique, workspace_root,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MUST_HAVE: &str = "present";

/// Starts the fixture with its one required variable set, unless the test sets it itself.
fn start_probe(mut options: RunnerOptions) -> Runner {
    let sets_must_have = options.variables.iter().any(|(k, _)| k == "must_have")
        || options.env.iter().any(|(k, _)| k == "SPIN_VARIABLE_MUST_HAVE");
    if !sets_must_have {
        options.env.push(("SPIN_VARIABLE_MUST_HAVE".into(), MUST_HAVE.into()));
    }
    Runner::start(&fixture_manifest(), options).expect("the runner starts on the fixture manifest")
}

async fn get(runner: &Runner, path: &str) -> (u16, Value) {
    send(runner, http().get(runner.url(path))).await
}

async fn send(runner: &Runner, request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("the runner answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a readable body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status >= 500 && status != 502 {
        eprintln!("runner log after a {status}:\n{}", runner.logs().join("\n"));
    }
    (status, value)
}

/// One `spin-*` header as the component saw it; fails if the runner sent it more than once.
fn header<'a>(echo: &'a Value, name: &str) -> Option<&'a str> {
    let values = echo["headers"][name].as_array()?;
    assert!(values.len() == 1, "{name} reached the component {} times: {values:?}", values.len());
    values[0].as_str()
}

// ---------------------------------------------------------------------------------------
// Routing and the spin-* headers

#[tokio::test]
async fn routing_follows_spin_precedence_and_sets_spin_headers() {
    let runner = start_probe(RunnerOptions::default());
    // (path, component, spin-path-info, route as written, spin-component-route). The route as
    // written is what Spin sends as both spin-matched-route and spin-raw-component-route.
    let cases = [
        ("/exact", "probe-exact", "", "/exact", "/exact"),
        ("/exact?x=1&y=two", "probe-exact", "", "/exact", "/exact"),
        ("/exact/more", "probe", "/exact/more", "/...", ""),
        ("/items/42", "probe-param", "", "/items/:id", "/items/:id"),
        ("/items/latest", "probe-literal", "", "/items/latest", "/items/latest"),
        ("/items/42/extra", "probe", "/items/42/extra", "/...", ""),
        ("/items", "probe", "/items", "/...", ""),
        ("/static", "probe-wild", "", "/static/...", "/static"),
        ("/static/css/site.css", "probe-wild", "/css/site.css", "/static/...", "/static"),
        // Spin keeps a trailing slash in the path info (routes.rs: trailing_wildcard_respects_trailing_slash).
        ("/static/css/", "probe-wild", "/css/", "/static/...", "/static"),
        ("/static/deep/x/y", "probe-deep", "/x/y", "/static/deep/...", "/static/deep"),
        ("/staticky", "probe", "/staticky", "/...", ""),
        ("/nowhere/at/all", "probe", "/nowhere/at/all", "/...", ""),
    ];
    let server_port = runner.base_url.rsplit(':').next().unwrap_or_default().to_owned();
    let mut mismatches = Vec::new();
    for &(path, component, path_info, route, component_route) in &cases {
        let (status, echo) = get(&runner, path).await;
        if status != 200 {
            mismatches.push(format!("{}: status {status}, body {echo}", path));
            continue;
        }
        let mut expect = |what: &str, got: Option<&str>, want: &str| {
            if got != Some(want) {
                mismatches.push(format!("{}: {what} is {got:?}, Spin gives {want:?}", path));
            }
        };
        expect("component", echo["component"].as_str(), component);
        expect("path", echo["path"].as_str(), path);
        expect("spin-path-info", header(&echo, "spin-path-info"), path_info);
        expect("spin-matched-route", header(&echo, "spin-matched-route"), route);
        expect("spin-raw-component-route", header(&echo, "spin-raw-component-route"), route);
        expect("spin-component-route", header(&echo, "spin-component-route"), component_route);
        expect("spin-base-path", header(&echo, "spin-base-path"), "/");
        expect("spin-full-url", header(&echo, "spin-full-url"), &runner.url(path));
        let client = header(&echo, "spin-client-addr").unwrap_or_default();
        let client_ok =
            client.parse::<SocketAddr>().is_ok_and(|a| a.ip().is_loopback() && a.port().to_string() != server_port);
        if !client_ok {
            mismatches.push(format!("{}: spin-client-addr is {client:?}, expected this client's 127.0.0.1:port", path));
        }
    }
    let (_, echo) = get(&runner, "/items/tc_0123456789ab").await;
    if header(&echo, "spin-path-match-id") != Some("tc_0123456789ab") {
        mismatches.push(format!("/items/tc_0123456789ab: spin-path-match-id missing or wrong in {echo}"));
    }
    let (_, echo) = send(&runner, http().post(runner.url("/exact")).body("four")).await;
    if echo["method"] != "POST" || echo["body_length"] != 4 {
        mismatches.push(format!("POST /exact: method or body lost: {echo}"));
    }
    assert!(mismatches.is_empty(), "routing differs from Spin:\n  {}", mismatches.join("\n  "));
}

#[tokio::test]
async fn client_sent_spin_headers_do_not_reach_the_component() {
    let runner = start_probe(RunnerOptions::default());
    let forged = [
        ("spin-path-info", "/forged"),
        ("spin-matched-route", "/forged/..."),
        ("spin-raw-component-route", "/forged/..."),
        ("spin-component-route", "/forged"),
        ("spin-base-path", "/forged"),
        ("spin-full-url", "http://forged.example/"),
        ("spin-client-addr", "203.0.113.9:6666"),
        ("spin-path-match-id", "forged"),
    ];
    let mut request = http().get(runner.url("/items/7"));
    for (name, value) in forged {
        request = request.header(name, value);
    }
    let (status, echo) = send(&runner, request).await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["component"], "probe-param", "{echo}");
    for (name, value) in forged {
        let got = header(&echo, name);
        assert_ne!(got, Some(value), "a client forged {name} and the component saw it: {echo}");
    }
    assert_eq!(header(&echo, "spin-path-match-id"), Some("7"), "{echo}");
    assert_eq!(header(&echo, "spin-path-info"), Some(""), "{echo}");
    assert_eq!(header(&echo, "spin-full-url"), Some(runner.url("/items/7").as_str()), "{echo}");
}

// ---------------------------------------------------------------------------------------
// Private routes and service chaining

/// The fixture with its catch-all moved under `/probe/...`, so unrouted paths really are
/// unrouted. Written under target/, with the component path made absolute.
fn manifest_without_catch_all() -> PathBuf {
    let text = std::fs::read_to_string(fixture_manifest()).expect("the fixture manifest is readable");
    let wasm = workspace_root().join("target/wasm32-wasip2/release/probe.wasm");
    let wasm = std::path::absolute(&wasm).expect("an absolute path");
    let text = text
        .replace("route = \"/...\"", "route = \"/probe/...\"")
        .replace("\"../../target/wasm32-wasip2/release/probe.wasm\"", &format!("{:?}", wasm.display().to_string()));
    assert!(text.contains("route = \"/probe/...\""), "the fixture's catch-all trigger moved; update this test");
    let dir = workspace_root().join("target/test-state/manifests");
    std::fs::create_dir_all(&dir).expect("a folder for derived manifests");
    let path = dir.join(format!("{}.toml", unique("no_catch_all")));
    std::fs::write(&path, text).expect("the derived manifest is written");
    path
}

#[tokio::test]
async fn private_component_is_reachable_only_by_service_chaining() {
    let manifest = manifest_without_catch_all();
    let options =
        RunnerOptions { env: vec![("SPIN_VARIABLE_MUST_HAVE".into(), MUST_HAVE.into())], ..Default::default() };
    let runner = Runner::start(&manifest, options).expect("the runner starts on the derived manifest");
    let _ = std::fs::remove_file(&manifest);

    for path in ["/hidden", "/hidden/p", "/", "/nowhere"] {
        let response = http().get(runner.url(path)).send().await.expect("the runner answers");
        assert_eq!(response.status().as_u16(), 404, "GET {path} from outside must find no route");
    }
    // Naming the private component's chaining host from outside must not reach it either.
    let response = http()
        .get(runner.url("/hidden"))
        .header("host", "hidden.spin.internal")
        .send()
        .await
        .expect("the runner answers");
    assert_eq!(response.status().as_u16(), 404, "Host: hidden.spin.internal from outside must not reach it");

    let (status, echo) =
        send(&runner, http().get(runner.url("/probe/chain")).query(&[("component", "hidden"), ("path", "/p/q?x=1")]))
            .await;
    assert_eq!(status, 200, "probe -> http://hidden.spin.internal/p/q must be served: {echo}");
    assert_eq!(echo["component"], "hidden", "{echo}");
    assert_eq!(echo["path"], "/p/q?x=1", "{echo}");
}

#[tokio::test]
async fn chained_requests_are_routed_as_spin_routes_them() {
    let runner = start_probe(RunnerOptions::default());
    // Spin serves every chained request as if the target had matched `/...` (its
    // RouteMatch::synthetic), whatever routes the target has, from client address 0.0.0.0:0.
    let mut mismatches = Vec::new();
    for (component, path, path_info) in [("hidden", "/p/q?x=1", "/p/q"), ("probe-param", "/items/9", "/items/9")] {
        let (status, echo) =
            send(&runner, http().get(runner.url("/chain")).query(&[("component", component), ("path", path)])).await;
        if status != 200 || echo["component"] != component {
            mismatches.push(format!("chain to {component}{path}: status {status}, body {echo}"));
            continue;
        }
        let mut expect = |what: &str, got: Option<&str>, want: Option<&str>| {
            if got != want {
                mismatches.push(format!("chain to {component}{path}: {what} is {got:?}, Spin gives {want:?}"));
            }
        };
        expect("spin-path-info", header(&echo, "spin-path-info"), Some(path_info));
        expect("spin-matched-route", header(&echo, "spin-matched-route"), Some("/..."));
        expect("spin-raw-component-route", header(&echo, "spin-raw-component-route"), Some("/..."));
        expect("spin-component-route", header(&echo, "spin-component-route"), Some(""));
        expect("spin-base-path", header(&echo, "spin-base-path"), Some("/"));
        expect("spin-client-addr", header(&echo, "spin-client-addr"), Some("0.0.0.0:0"));
        expect("spin-path-match-id", header(&echo, "spin-path-match-id"), None);
    }
    assert!(mismatches.is_empty(), "service chaining differs from Spin:\n  {}", mismatches.join("\n  "));
}

#[tokio::test]
async fn chaining_obeys_allowed_outbound_hosts_and_unrouted_paths_hit_the_catch_all() {
    let runner = start_probe(RunnerOptions::default());
    // probe-wild has no allowed_outbound_hosts: it may not chain to anyone.
    let (status, body) =
        send(&runner, http().get(runner.url("/static/chain")).query(&[("component", "hidden"), ("path", "/p")])).await;
    assert_eq!(status, 502, "chaining without http://hidden.spin.internal in allowed_outbound_hosts must fail: {body}");
    assert!(body["debug"].as_str().unwrap_or_default().contains("HttpRequestDenied"), "{body}");

    // probe may chain to a public component too, by id.
    let (status, echo) =
        send(&runner, http().get(runner.url("/chain")).query(&[("component", "probe-exact"), ("path", "/anything")]))
            .await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["component"], "probe-exact", "{echo}");

    // A chaining host that is not a component of the application.
    let (status, body) =
        send(&runner, http().get(runner.url("/chain")).query(&[("component", "no-such-component"), ("path", "/")]))
            .await;
    assert!(status >= 400 && status != 200, "chaining to an unknown component must fail: {status} {body}");

    // From outside, a private component is never the answer, whatever the Host header says.
    let (status, echo) = send(&runner, http().get(runner.url("/hidden")).header("host", "hidden.spin.internal")).await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["component"], "probe", "the catch-all answers, never the private component: {echo}");
}

// ---------------------------------------------------------------------------------------
// Outbound HTTP and PostgreSQL connections

/// A minimal HTTP/1.1 server on loopback that records the request line of each request.
struct TestServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

const TEST_SERVER_BODY: &str = "hello from the test server";

impl TestServer {
    async fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("a local address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_one(stream, seen.clone()));
            }
        });
        TestServer { addr, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

async fn serve_one(mut stream: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    if let Ok(mut seen) = seen.lock() {
        seen.push(head.lines().next().unwrap_or_default().to_owned());
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{TEST_SERVER_BODY}",
        TEST_SERVER_BODY.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[tokio::test]
async fn outbound_http_reaches_allowed_hosts_only() {
    let allowed = TestServer::start().await;
    let other = TestServer::start().await;
    let runner = start_probe(RunnerOptions {
        variables: vec![("allowed_http".into(), allowed.addr.to_string())],
        ..Default::default()
    });

    let url = format!("http://{}/hello/there?x=1", allowed.addr);
    let (status, body) = send(&runner, http().get(runner.url("/fetch")).query(&[("url", &url)])).await;
    assert_eq!(status, 200, "fetching an allowed host (http://{{{{ allowed_http }}}} expanded) failed: {body}");
    assert_eq!(body["status"], 200, "{body}");
    assert_eq!(body["body"], TEST_SERVER_BODY, "{body}");
    assert_eq!(allowed.requests(), vec!["GET /hello/there?x=1 HTTP/1.1".to_owned()]);

    let denied = [
        (format!("http://{}/", other.addr), "a port not in allowed_outbound_hosts"),
        (format!("http://localhost:{}/", allowed.addr.port()), "the allowed address under another host name"),
        (format!("https://{}/", allowed.addr), "the allowed address under another scheme"),
    ];
    for (url, what) in &denied {
        let (status, body) = send(&runner, http().get(runner.url("/fetch")).query(&[("url", url)])).await;
        assert_eq!(status, 502, "{what} ({url}) must be refused: {body}");
        assert!(
            body["debug"].as_str().unwrap_or_default().contains("HttpRequestDenied"),
            "{what} ({url}) must fail as Spin does, with ErrorCode::HttpRequestDenied: {body}"
        );
    }
    // A component without allowed_outbound_hosts reaches nothing, not even the allowed server.
    let (status, body) = send(
        &runner,
        http().get(runner.url("/static/fetch")).query(&[("url", &format!("http://{}/wild", allowed.addr))]),
    )
    .await;
    assert_eq!(status, 502, "{body}");
    assert!(other.requests().is_empty(), "a refused request reached the network: {:?}", other.requests());
    assert_eq!(allowed.requests().len(), 1, "a refused request reached the network: {:?}", allowed.requests());
}

/// DATABASE_URL with its host replaced: the same server, but an address the manifest does not name.
fn database_url_with_host(host: &str) -> String {
    let url = database_url();
    let mut parsed = reqwest::Url::parse(&url).expect("DATABASE_URL is a URL");
    parsed.set_host(Some(host)).expect("a valid host");
    parsed.to_string()
}

#[tokio::test]
async fn postgres_connections_obey_allowed_outbound_hosts() {
    let runner = start_probe(RunnerOptions::default());
    let (status, body) = get(&runner, "/pg/open").await;
    assert_eq!((status, &body), (200, &json!({"ok": true})), "postgres://{{{{ db_host }}}} is allowed for probe");

    let elsewhere = database_url_with_host("localhost");
    let (status, body) = send(&runner, http().get(runner.url("/pg/open")).query(&[("address", &elsewhere)])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["error"]["variant"], "connection-failed",
        "connecting to a postgres host not in allowed_outbound_hosts must be refused: {body}"
    );

    // probe-wild knows db_url but its manifest entry allows no outbound host at all.
    let (status, body) = get(&runner, "/static/pg/open").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["error"]["variant"], "connection-failed", "{body}");
}

// ---------------------------------------------------------------------------------------
// Variables

async fn variable(runner: &Runner, path: &str) -> Value {
    let (status, body) = get(runner, path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

#[tokio::test]
async fn variables_resolve_from_defaults_and_templates() {
    let runner = start_probe(RunnerOptions::default());
    assert_eq!(variable(&runner, "/var/greeting").await, json!({"value": "hello from the manifest"}));
    assert_eq!(
        variable(&runner, "/var/token").await,
        json!({"value": TOKEN}),
        "the secret api_token via SPIN_VARIABLE_API_TOKEN"
    );
    assert_eq!(variable(&runner, "/var/must_have").await, json!({"value": MUST_HAVE}));
    assert_eq!(
        variable(&runner, "/var/composed").await,
        json!({"value": format!("hello from the manifest / {MUST_HAVE}")}),
        "a component variable made of two templates"
    );
    assert_eq!(
        variable(&runner, "/var/db_url").await,
        json!({"value": database_url()}),
        "db_url is provided by the runner"
    );
    assert_eq!(variable(&runner, "/var/component_id").await, json!({"value": "probe"}), "a literal component variable");

    let undefined = variable(&runner, "/var/not_declared").await;
    assert_eq!(undefined["error"], "undefined", "{undefined}");
    // Application variables are not visible to a component that does not list them.
    let isolated = variable(&runner, "/static/var/greeting").await;
    assert_eq!(isolated["error"], "undefined", "probe-wild does not list greeting: {isolated}");
    let isolated = variable(&runner, "/var/allowed_http").await;
    assert_eq!(isolated["error"], "undefined", "an application variable not listed by the component: {isolated}");
    let invalid = variable(&runner, "/var/Not-A-Name").await;
    assert_eq!(invalid["error"], "invalid-name", "{invalid}");
}

#[tokio::test]
async fn variable_from_environment() {
    let runner = start_probe(RunnerOptions {
        env: vec![("SPIN_VARIABLE_GREETING".into(), "from the environment".into())],
        ..Default::default()
    });
    assert_eq!(variable(&runner, "/var/greeting").await, json!({"value": "from the environment"}));
    assert_eq!(
        variable(&runner, "/var/composed").await,
        json!({"value": format!("from the environment / {MUST_HAVE}")})
    );
}

#[tokio::test]
async fn variable_from_flag_and_flag_beats_environment() {
    let flag_only =
        start_probe(RunnerOptions { variables: vec![("greeting".into(), "from a flag".into())], ..Default::default() });
    assert_eq!(variable(&flag_only, "/var/greeting").await, json!({"value": "from a flag"}));
    drop(flag_only);

    let both = start_probe(RunnerOptions {
        variables: vec![("greeting".into(), "from a flag".into()), ("must_have".into(), "flagged".into())],
        env: vec![
            ("SPIN_VARIABLE_GREETING".into(), "from the environment".into()),
            ("SPIN_VARIABLE_MUST_HAVE".into(), "from the environment".into()),
        ],
        ..Default::default()
    });
    assert_eq!(
        variable(&both, "/var/greeting").await,
        json!({"value": "from a flag"}),
        "--variable beats SPIN_VARIABLE_"
    );
    assert_eq!(variable(&both, "/var/must_have").await, json!({"value": "flagged"}));
}

#[test]
fn missing_required_variable_stops_up_and_names_it() {
    let (status, stderr) =
        start_expecting_failure(&fixture_manifest(), RunnerOptions::default()).expect("gatehouse up runs");
    assert!(!status.success(), "up must fail without must_have; stderr:\n{stderr}");
    assert!(stderr.contains("SPIN_VARIABLE_MUST_HAVE"), "the error must say how to set it; stderr:\n{stderr}");
}

// ---------------------------------------------------------------------------------------
// spin:postgres/postgres@4.0.0

struct PgCase {
    sql_type: &'static str,
    param: Value,
    data_type: &'static str,
    /// The value expected back; the parameter itself when `None`.
    expect: Option<Value>,
}

fn case(sql_type: &'static str, param: Value, data_type: &'static str) -> PgCase {
    PgCase { sql_type, param, data_type, expect: None }
}

fn pg_cases() -> Vec<PgCase> {
    let mut cases = vec![
        case("boolean", json!({"boolean": true}), "boolean"),
        case("boolean", json!({"boolean": false}), "boolean"),
        // PostgreSQL's one-byte "char" is the type behind the interface's int8 (s8).
        case("\"char\"", json!({"int8": 65}), "int8"),
        case("\"char\"", json!({"int8": -5}), "int8"),
        case("int2", json!({"int16": -32768}), "int16"),
        case("int2", json!({"int16": 32767}), "int16"),
        case("int4", json!({"int32": i32::MIN}), "int32"),
        case("int4", json!({"int32": 2_000_000_001}), "int32"),
        case("int8", json!({"int64": i64::MIN}), "int64"),
        case("int8", json!({"int64": i64::MAX}), "int64"),
        case("float4", json!({"floating32": 1.5}), "floating32"),
        case("float4", json!({"floating32": -1024.25}), "floating32"),
        case("float8", json!({"floating64": -1234.5678}), "floating64"),
        case("float8", json!({"floating64": 1.0e300}), "floating64"),
        case("text", json!({"str": "héllo, wörld ✓ — \"quoted\" \\ back"}), "str"),
        case("text", json!({"str": ""}), "str"),
        case("varchar", json!({"str": "a varchar"}), "str"),
        case("bytea", json!({"binary": [0, 1, 2, 127, 128, 254, 255]}), "binary"),
        case("bytea", json!({"binary": []}), "binary"),
        case("date", json!({"date": [2024, 2, 29]}), "date"),
        case("date", json!({"date": [1, 1, 1]}), "date"),
        case("time", json!({"time": [23, 59, 58, 123_456_000]}), "time"),
        case("time", json!({"time": [0, 0, 0, 0]}), "time"),
        case("timestamp", json!({"datetime": [2024, 2, 29, 13, 14, 15, 123_456_000]}), "datetime"),
        case("timestamptz", json!({"datetime": [2024, 2, 29, 13, 14, 15, 123_456_000]}), "datetime"),
        case("timestamptz", json!({"datetime": [1969, 12, 31, 23, 59, 59, 0]}), "datetime"),
        PgCase {
            sql_type: "timestamptz",
            param: json!({"timestamp": 1_700_000_000}),
            data_type: "datetime",
            expect: Some(json!({"datetime": [2023, 11, 14, 22, 13, 20, 0]})),
        },
        PgCase {
            sql_type: "timestamptz",
            param: json!({"timestamp": 0}),
            data_type: "datetime",
            expect: Some(json!({"datetime": [1970, 1, 1, 0, 0, 0, 0]})),
        },
        case("uuid", json!({"uuid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}), "uuid"),
        case("jsonb", json!({"jsonb": {"a": 1, "b": [true, null, "x"], "nested": {"k": "v"}, "n": -1.5}}), "jsonb"),
        case("jsonb", json!({"jsonb": "just a string"}), "jsonb"),
        case("jsonb", json!({"jsonb": [1, 2, 3]}), "jsonb"),
        case("numeric", json!({"decimal": "123.4500"}), "decimal"),
        case("numeric", json!({"decimal": "-0.000001"}), "decimal"),
        case("numeric", json!({"decimal": "1234567890123456789.123456789"}), "decimal"),
        case("numeric", json!({"decimal": "0"}), "decimal"),
        // Discrete ranges come back in PostgreSQL's canonical [lower, upper) form, so use it.
        case("int4range", json!({"range-int32": [[1, "inclusive"], [10, "exclusive"]]}), "range-int32"),
        case("int4range", json!({"range-int32": [null, [5, "exclusive"]]}), "range-int32"),
        case("int4range", json!({"range-int32": [[-3, "inclusive"], null]}), "range-int32"),
        PgCase {
            sql_type: "int4range",
            param: json!({"range-int32": [[1, "exclusive"], [10, "inclusive"]]}),
            data_type: "range-int32",
            expect: Some(json!({"range-int32": [[2, "inclusive"], [11, "exclusive"]]})),
        },
        case(
            "int8range",
            json!({"range-int64": [[-9_000_000_000_i64, "inclusive"], [9_000_000_000_i64, "exclusive"]]}),
            "range-int64",
        ),
        case("int8range", json!({"range-int64": [null, null]}), "range-int64"),
        case("numrange", json!({"range-decimal": [["1.5", "inclusive"], ["2.25", "exclusive"]]}), "range-decimal"),
        case("numrange", json!({"range-decimal": [["-1.5", "exclusive"], ["2.250", "inclusive"]]}), "range-decimal"),
        case("numrange", json!({"range-decimal": [null, ["7", "inclusive"]]}), "range-decimal"),
        case("int4[]", json!({"array-int32": [1, null, -3]}), "array-int32"),
        case("int4[]", json!({"array-int32": []}), "array-int32"),
        case("int8[]", json!({"array-int64": [i64::MAX, null, i64::MIN]}), "array-int64"),
        case("numeric[]", json!({"array-decimal": ["1.10", null, "-2"]}), "array-decimal"),
        case("text[]", json!({"array-str": ["a", null, "c,d \"q\" {x}", ""]}), "array-str"),
        case("interval", json!({"interval": {"micros": 3_723_000_456_i64, "days": 5, "months": 14}}), "interval"),
        case("interval", json!({"interval": {"micros": -1, "days": -2, "months": -3}}), "interval"),
    ];
    for (sql_type, data_type) in [
        ("text", "str"),
        ("int4", "int32"),
        ("int8", "int64"),
        ("boolean", "boolean"),
        ("timestamptz", "datetime"),
        ("jsonb", "jsonb"),
        ("numeric", "decimal"),
        ("int4[]", "array-int32"),
        ("uuid", "uuid"),
    ] {
        cases.push(case(sql_type, json!({"db-null": null}), data_type));
    }
    cases
}

#[tokio::test]
async fn every_postgres_value_type_round_trips() {
    let runner = start_probe(RunnerOptions::default());
    let cases = pg_cases();
    let request: Vec<Value> = cases.iter().map(|c| json!({"sql_type": c.sql_type, "param": c.param})).collect();
    let (status, body) = send(&runner, http().post(runner.url("/pg/roundtrip")).json(&request)).await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().expect("a result per case");
    assert_eq!(results.len(), cases.len(), "{body}");

    let mut failures = Vec::new();
    for (case, result) in cases.iter().zip(results) {
        let expected = case.expect.as_ref().unwrap_or(&case.param);
        let label = format!("SELECT $1::{} with {}", case.sql_type, case.param);
        if let Some(error) = result.get("error") {
            failures.push(format!("{label}: failed: {error}"));
            continue;
        }
        if result["data_type"] != case.data_type {
            failures.push(format!("{label}: column type {}, expected {:?}", result["data_type"], case.data_type));
        }
        if result["rows"] != 1 {
            failures.push(format!("{label}: {} rows", result["rows"]));
        }
        if &result["value"] != expected {
            failures.push(format!("{label}: came back as {}, expected {expected}", result["value"]));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} postgres cases differ:\n  {}",
        failures.len(),
        cases.len(),
        failures.join("\n  ")
    );
}

#[tokio::test]
async fn postgres_errors_are_structured_and_leave_the_connection_usable() {
    let runner = start_probe(RunnerOptions::default());
    let expected_codes = [
        ("SELEC 1", "42601"),
        ("SELECT 1/0", "22012"),
        ("SELECT * FROM gatehouse_no_such_table", "42P01"),
        ("SELECT 'x'::int4", "22P02"),
    ];
    for (sql, code) in expected_codes {
        let (status, body) = send(&runner, http().get(runner.url("/pg/error")).query(&[("sql", sql)])).await;
        assert_eq!(status, 200, "{body}");
        let error = &body["error"];
        assert_eq!(error["variant"], "query-failed", "{sql}: {body}");
        assert_eq!(error["kind"], "db-error", "{sql}: a server error must come as query-failed(db-error(..)): {body}");
        assert_eq!(error["code"], code, "{sql}: SQLSTATE: {body}");
        assert_eq!(error["severity"], "ERROR", "{sql}: {body}");
        assert!(!error["message"].as_str().unwrap_or_default().is_empty(), "{sql}: {body}");
        assert!(!error["as_text"].as_str().unwrap_or_default().is_empty(), "{sql}: {body}");
    }

    // A parameter of the wrong type fails that query only; the same connection then works.
    let table = unique("fidelity");
    let cases = json!([
        {"sql_type": "int4", "param": {"str": "not a number"}},
        {"sql_type": "int4", "param": {"int32": 7}},
        {"sql": format!("SELECT $1::text AS {table}"), "param": {"str": "after"}},
    ]);
    let (status, body) = send(&runner, http().post(runner.url("/pg/roundtrip")).json(&cases)).await;
    assert_eq!(status, 200, "{body}");
    let results = &body["results"];
    assert!(results[0].get("error").is_some(), "a str bound to int4 must be refused: {body}");
    assert_eq!(results[1]["value"], json!({"int32": 7}), "the connection must survive a failed bind: {body}");
    assert_eq!(results[2]["value"], json!({"str": "after"}), "{body}");
}

/// A statement that begins with `-- planned each time` is prepared afresh on every run, as
/// Spin's host prepares every statement, so PostgreSQL plans it for its values each time; any
/// other statement is prepared once per pooled connection and kept, which saves a round trip
/// (docs/architecture.md, "Vector search"). Seen from the connection: after seven runs of
/// each, only the kept one is among its prepared statements.
#[tokio::test]
async fn a_statement_planned_each_time_is_prepared_afresh_and_others_are_kept() {
    let runner = start_probe(RunnerOptions::default());
    let tag = unique("plan").replace('-', "_");
    let marked = format!("{}SELECT $1::text AS {tag}_marked", gatehouse_domain::sql::PLANNED_EACH_TIME);
    let kept = format!("SELECT $1::text AS {tag}_kept");
    let mut cases = Vec::new();
    for _ in 0..7 {
        cases.push(json!({"sql": marked, "param": {"str": "marked"}}));
        cases.push(json!({"sql": kept, "param": {"str": "kept"}}));
    }
    cases.push(json!({
        "sql": "SELECT count(*) FILTER (WHERE statement LIKE '%' || $1 || '_marked%') || '/' ||
                       count(*) FILTER (WHERE statement LIKE '%' || $1 || '_kept%')
                  FROM pg_prepared_statements",
        "param": {"str": tag},
    }));
    let (status, body) = send(&runner, http().post(runner.url("/pg/roundtrip")).json(&cases)).await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 15, "{body}");
    for (i, result) in results[..14].iter().enumerate() {
        let expected = if i % 2 == 0 { "marked" } else { "kept" };
        assert_eq!(result["value"], json!({"str": expected}), "{body}");
    }
    assert_eq!(
        results[14]["value"],
        json!({"str": "0/1"}),
        "marked statements prepared afresh, the other kept once: {body}"
    );
}

// ---------------------------------------------------------------------------------------
// Traps and request bodies

#[tokio::test]
async fn a_trapping_guest_is_a_500_and_the_runner_keeps_serving() {
    let runner = start_probe(RunnerOptions::default());
    for round in 0..2 {
        let response = http().get(runner.url("/trap")).send().await.expect("the runner answers a trap");
        assert_eq!(response.status().as_u16(), 500, "round {round}: a panicking guest must be a 500");
        let (status, echo) = get(&runner, "/exact").await;
        assert_eq!(status, 200, "round {round}: the next request must be served: {echo}");
        assert_eq!(echo["component"], "probe-exact");
        let (status, echo) = get(&runner, "/after-trap").await;
        assert_eq!(status, 200, "round {round}: the trapped component itself must serve again: {echo}");
        assert_eq!(echo["component"], "probe");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_and_bodies_under_it_arrive_intact() {
    let runner =
        start_probe(RunnerOptions { extra_args: vec!["--max-body-bytes".into(), "1024".into()], ..Default::default() });

    let response = http().post(runner.url("/body")).body(vec![b'x'; 2048]).send().await.expect("the runner answers");
    assert_eq!(response.status().as_u16(), 413, "2048 bytes over a 1024-byte limit");

    let body: String = (0..1000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let (status, echo) = send(&runner, http().post(runner.url("/body")).body(body.clone())).await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["length"], 1000, "{echo}");
    assert_eq!(echo["body"], body.as_str(), "the body must reach the component unchanged");

    let (status, echo) = send(&runner, http().post(runner.url("/body")).body(vec![b'y'; 1024])).await;
    assert_eq!(status, 200, "a body of exactly the limit is accepted: {echo}");
    assert_eq!(echo["length"], 1024, "{echo}");

    // Without a Content-Length the limit must still hold.
    let status = chunked_post(&runner, "/body", 2048).await;
    assert_eq!(status, 413, "a chunked body over the limit");
    let status = chunked_post(&runner, "/body", 512).await;
    assert_eq!(status, 200, "a chunked body under the limit");
}

#[tokio::test]
async fn the_default_body_limit_is_one_mebibyte() {
    let runner = start_probe(RunnerOptions::default());
    let response = http().post(runner.url("/body")).body(vec![b'z'; (1 << 20) + 1]).send().await;
    // The runner may answer before reading everything and close the connection.
    if let Ok(response) = response {
        assert_eq!(response.status().as_u16(), 413, "1 MiB + 1 byte");
    }
    let (status, echo) = send(&runner, http().post(runner.url("/body")).body(vec![b'z'; 1 << 20])).await;
    assert_eq!(status, 200, "exactly 1 MiB is accepted");
    assert_eq!(echo["length"], 1 << 20);
}

/// POSTs `len` bytes with `Transfer-Encoding: chunked` over a raw connection; returns the status.
async fn chunked_post(runner: &Runner, path: &str, len: usize) -> u16 {
    let addr = runner.base_url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.expect("connect to the runner");
    let head =
        format!("POST {path} HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    let mut request = head.into_bytes();
    for chunk in vec![b'c'; len].chunks(256) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    // The runner may refuse before reading the whole body; what it answers is what counts.
    let _ = stream.write_all(&request).await;
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response);
    let status_line = response.lines().next().unwrap_or_default().to_owned();
    status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status from the runner: {response:?}"))
}

/// Spin lets a handler send its response and keep working; confirm and resume depend on it.
/// The client must have its 202 while the work (half a second in the database) is still going.
#[tokio::test]
async fn a_component_can_answer_first_and_finish_its_work_afterwards() {
    let runner = start_probe(RunnerOptions::default());
    let client = gatehouse_tests::db().await.expect("db");
    let table = unique("after_response");
    client
        .batch_execute(&format!("CREATE TABLE {table} (marker text NOT NULL, written_at timestamptz NOT NULL)"))
        .await
        .expect("create table");

    let sent = std::time::Instant::now();
    let response =
        http().get(runner.url(&format!("/after-response?table={table}&marker=m1"))).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 202);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["accepted"], true);
    let count_sql = format!("SELECT count(*) FROM {table} WHERE marker = 'm1'");
    let count = || async { client.query_one(&count_sql, &[]).await.expect("count").get::<_, i64>(0) };
    assert_eq!(count().await, 0, "the work has not landed when the response arrives");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count().await == 0 {
        assert!(std::time::Instant::now() < deadline, "the work after the response never landed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let finished = sent.elapsed();
    assert!(finished >= std::time::Duration::from_millis(500), "the work ran for its half second: {finished:?}");
    client.batch_execute(&format!("DROP TABLE {table}")).await.expect("drop");
}

/// A component's stdout and stderr reach the runner's log, one line each, tagged with it.
#[tokio::test]
async fn guest_output_is_logged_tagged_with_its_component() {
    let runner = start_probe(RunnerOptions::default());
    let marker = unique("said");
    let (status, _) = get(&runner, &format!("/static/log?message={marker}")).await;
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (stdout, stderr) = loop {
        let logs = runner.logs();
        let find = |stream: &str| {
            logs.iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["stream"] == stream && line.to_string().contains(&marker))
        };
        if let (Some(out), Some(err)) = (find("stdout"), find("stderr")) {
            break (out, err);
        }
        assert!(std::time::Instant::now() < deadline, "guest output not logged: {logs:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(stdout["component"], "probe-wild");
    assert_eq!(stdout["msg"], format!("probe stdout: {marker}"));
    assert_eq!(stderr["component"], "probe-wild");
    // A guest line that is JSON stays structured: its fields are the line's own.
    assert_eq!(stderr["probe_stderr"], marker.as_str());
    assert!(stderr.get("guest").is_none(), "{stderr}");
}

/// Ctrl-C stops new requests but lets a guest finish the work it went on with after
/// answering, so a confirmed call is not cut off mid-way by a restart.
#[tokio::test]
async fn shutdown_lets_work_after_a_response_finish() {
    let mut runner = start_probe(RunnerOptions::default());
    let client = gatehouse_tests::db().await.expect("db");
    let table = unique("drained");
    client
        .batch_execute(&format!("CREATE TABLE {table} (marker text NOT NULL, written_at timestamptz NOT NULL)"))
        .await
        .expect("create table");
    let response =
        http().get(runner.url(&format!("/after-response?table={table}&marker=m1"))).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 202);

    let exit = runner.interrupt_and_wait().expect("runner exits");
    assert!(exit.success(), "clean exit on Ctrl-C: {exit}");
    let landed: i64 = client.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.expect("count").get(0);
    assert_eq!(landed, 1, "the work begun before Ctrl-C finished before the runner exited");
    assert!(runner.logs().iter().any(|l| l.contains("shutting down")), "the runner says it is shutting down");
    client.batch_execute(&format!("DROP TABLE {table}")).await.expect("drop");
}

// ---------------------------------------------------------------------------------------
// The periodic sweep (the runner's own feature: Spin has no timer trigger)

/// What the probe printed for each sweep `component` got, in order.
fn sweeps_logged(runner: &Runner, component: &str) -> Vec<String> {
    runner
        .logs()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["component"] == component && line["stream"] == "stdout")
        .filter_map(|line| line["msg"].as_str().filter(|msg| msg.starts_with("probe swept")).map(str::to_owned))
        .collect()
}

fn sweep_args(interval: &str, component: &str) -> RunnerOptions {
    let extra_args = ["--sweep-interval", interval, "--sweep-component", component].map(String::from).to_vec();
    RunnerOptions { extra_args, ..Default::default() }
}

/// `up` pokes the sweep component (here the private `hidden`, as the real sweeper is) with
/// `POST /sweep` and `{}` every interval, in-process as service chaining does, and a runner
/// that is sweeping still stops cleanly on Ctrl-C.
#[tokio::test]
async fn up_sends_periodic_sweeps_to_the_sweep_component() {
    let mut runner = start_probe(sweep_args("0.2", "hidden"));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let sweeps = loop {
        let sweeps = sweeps_logged(&runner, "hidden");
        if sweeps.len() >= 2 {
            break sweeps;
        }
        assert!(std::time::Instant::now() < deadline, "fewer than 2 sweeps in 5 s; log:\n{}", runner.logs().join("\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for sweep in &sweeps {
        assert_eq!(sweep, "probe swept: POST /sweep application/json {}", "the sweep request's shape");
    }
    let exit = runner.interrupt_and_wait().expect("runner exits");
    assert!(exit.success(), "clean exit on Ctrl-C while sweeping: {exit}");
}

#[tokio::test]
async fn a_zero_sweep_interval_sends_no_sweeps() {
    let runner = start_probe(sweep_args("0", "hidden"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let swept: Vec<String> = runner.logs().into_iter().filter(|line| line.contains("probe swept")).collect();
    assert!(swept.is_empty(), "--sweep-interval 0 must disable sweeping, yet: {swept:?}");
}

// ---------------------------------------------------------------------------------------
// Deadlines and limits (the runner's own: under `spin up` a guest stuck in a loop holds its
// instance until Spin stops)

/// The deadline the tests give each guest, and a tiny pool, so a few stuck guests fill it.
const DEADLINE: Duration = Duration::from_secs(1);
const POOL: usize = 4;
/// What "within the deadline" may take on a loaded machine: stopping happens at the next
/// epoch tick (10 ms) or timer after the deadline, but test machines stall.
const SLACK: Duration = Duration::from_secs(5);

fn bounded() -> RunnerOptions {
    let extra_args = ["--request-timeout", "1", "--max-instances", "4"].map(String::from).to_vec();
    RunnerOptions { extra_args, ..Default::default() }
}

/// A client that gives up on its own well after any bound under test, so a test that fails
/// fails rather than hangs.
fn patient_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("an HTTP client")
}

struct Answer {
    status: u16,
    content_type: String,
    body: Value,
    took: Duration,
}

async fn timed_get(client: &reqwest::Client, runner: &Runner, path: &str) -> Answer {
    let sent = std::time::Instant::now();
    let response = client.get(runner.url(path)).send().await.expect("the runner answers");
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
    let text = response.text().await.expect("a readable body");
    let took = sent.elapsed();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer { status, content_type, body, took }
}

/// `count` requests to `path` at once.
async fn all_at_once(runner: &Runner, path: &str, count: usize) -> Vec<Answer> {
    let client = patient_client();
    futures::future::join_all((0..count).map(|_| timed_get(&client, runner, path))).await
}

/// A 503 in the API's error shape, after the deadline and not long after it.
fn assert_stopped_at_the_deadline(answer: &Answer, what: &str) {
    assert_eq!(answer.status, 503, "{what}: {}", answer.body);
    assert_eq!(answer.content_type, "application/json", "{what}");
    assert_eq!(answer.body["code"], "deadline_exceeded", "{what}: {}", answer.body);
    let sentence = answer.body["error"].as_str().unwrap_or_default();
    assert!(sentence.contains("longer than the server allows (1 s)"), "{what}: {}", answer.body);
    assert!(answer.took >= DEADLINE, "{what}: answered after {:?}, before the deadline", answer.took);
    assert!(answer.took < DEADLINE + SLACK, "{what}: answered after {:?}", answer.took);
}

/// The runner's log lines with message `msg`, as JSON.
fn log_lines(runner: &Runner, msg: &str) -> Vec<Value> {
    runner
        .logs()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|l| l["msg"] == msg)
        .collect()
}

const STOPPED_AFTER_ANSWERING: &str = "component ran past its deadline after responding and was stopped";
const STOPPED_BEFORE_ANSWERING: &str = "component ran past its deadline and was stopped";

/// Waits (within the deadline and its slack) until the log has at least `count` lines with
/// message `msg`; returns them.
async fn wait_for_log_lines(runner: &Runner, msg: &str, count: usize) -> Vec<Value> {
    let give_up = std::time::Instant::now() + DEADLINE + SLACK;
    loop {
        let lines = log_lines(runner, msg);
        if lines.len() >= count {
            return lines;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "{} of {count} lines '{msg}' logged; log:\n{}",
            lines.len(),
            runner.logs().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every instance of the pool is free: as many guests as the pool holds get one each at the
/// same time (a request with none would wait for one and meet its deadline: a 503, not a
/// 202). They then spin until the runner stops them; after that a plain request is served.
async fn assert_the_pool_is_whole_again(runner: &Runner) {
    let already_stopped = log_lines(runner, STOPPED_AFTER_ANSWERING).len();
    for (i, answer) in all_at_once(runner, "/spin-after-response", POOL).await.iter().enumerate() {
        assert_eq!(answer.status, 202, "guest {i} of {POOL} found no free instance: {}", answer.body);
    }
    wait_for_log_lines(runner, STOPPED_AFTER_ANSWERING, already_stopped + POOL).await;
    let answer = timed_get(&patient_client(), runner, "/exact").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["component"], "probe-exact", "{}", answer.body);
}

#[tokio::test]
async fn guests_spinning_past_the_deadline_are_stopped_with_503_and_free_their_instances() {
    let runner = start_probe(bounded());
    // Twice the pool: half run and are trapped, half wait for an instance until the deadline.
    let answers = all_at_once(&runner, "/spin", 2 * POOL).await;
    for (i, answer) in answers.iter().enumerate() {
        assert_stopped_at_the_deadline(answer, &format!("spinning guest {i}"));
    }
    let logged = wait_for_log_lines(&runner, STOPPED_BEFORE_ANSWERING, 2 * POOL).await;
    assert!(logged.iter().all(|line| line["component"] == "probe" && line["deadline_seconds"] == 1.0), "{logged:?}");
    assert_the_pool_is_whole_again(&runner).await;
}

#[tokio::test]
async fn guests_blocked_in_a_host_call_past_the_deadline_are_stopped_with_503_and_free_their_instances() {
    let runner = start_probe(bounded());
    let answers = all_at_once(&runner, "/hang", 2 * POOL).await;
    for (i, answer) in answers.iter().enumerate() {
        assert_stopped_at_the_deadline(answer, &format!("hanging guest {i}"));
    }
    assert_the_pool_is_whole_again(&runner).await;
}

/// A chained request has a deadline of its own: the callee spinning behind a caller that was
/// stopped is stopped too, or it would keep its instance.
#[tokio::test]
async fn a_chained_guest_past_its_deadline_is_stopped_too() {
    let runner = start_probe(bounded());
    let answer = timed_get(&patient_client(), &runner, "/chain?component=probe-exact&path=/spin").await;
    assert_stopped_at_the_deadline(&answer, "a caller waiting on a spinning callee");
    assert_the_pool_is_whole_again(&runner).await;
}

/// Spin lets a guest work on after answering; the deadline covers that work too.
#[tokio::test]
async fn a_guest_spinning_after_its_answer_is_stopped_at_the_deadline_and_logged() {
    let runner = start_probe(bounded());
    let answer = timed_get(&patient_client(), &runner, "/static/spin-after-response").await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(answer.body["accepted"], true, "{}", answer.body);

    let lines = wait_for_log_lines(&runner, STOPPED_AFTER_ANSWERING, 1).await;
    assert_eq!(lines[0]["component"], "probe-wild", "{}", lines[0]);
    assert_eq!(lines[0]["deadline_seconds"], 1.0, "{}", lines[0]);
    assert_eq!(lines[0]["level"], "error", "{}", lines[0]);
    assert_the_pool_is_whole_again(&runner).await;
}

/// A guest may use memory up to the limit; growing past it fails that request only.
#[tokio::test]
async fn a_guest_growing_past_the_memory_limit_fails_and_the_runner_keeps_serving() {
    let runner = start_probe(RunnerOptions::default());
    let client = patient_client();
    let answer = timed_get(&client, &runner, "/grow?mb=64").await;
    assert_eq!(answer.status, 200, "64 MiB is within the 256 MiB limit: {}", answer.body);
    assert_eq!(answer.body["bytes"], 64 << 20, "{}", answer.body);

    let answer = timed_get(&client, &runner, "/grow?mb=300").await;
    assert_eq!(answer.status, 500, "300 MiB is past the 256 MiB limit: {}", answer.body);
    assert_eq!(answer.content_type, "application/json");
    assert_eq!(answer.body["code"], "internal", "{}", answer.body);

    for path in ["/exact", "/grow?mb=64"] {
        let answer = timed_get(&client, &runner, path).await;
        assert_eq!(answer.status, 200, "{path} after a guest ran out of memory: {}", answer.body);
    }
}

/// What the runner answers itself (no route, a body too large, a guest that failed) has the
/// API's error shape, and never carries the failure's own text.
#[tokio::test]
async fn the_runners_own_refusals_are_json_in_the_api_error_shape() {
    let manifest = manifest_without_catch_all();
    let options = RunnerOptions {
        env: vec![("SPIN_VARIABLE_MUST_HAVE".into(), MUST_HAVE.into())],
        extra_args: ["--max-body-bytes", "1024"].map(String::from).to_vec(),
        ..Default::default()
    };
    let runner = Runner::start(&manifest, options).expect("the runner starts on the derived manifest");
    let _ = std::fs::remove_file(&manifest);
    let client = patient_client();

    let answer = timed_get(&client, &runner, "/nowhere").await;
    assert_eq!((answer.status, answer.content_type.as_str()), (404, "application/json"), "{}", answer.body);
    assert_eq!(answer.body["code"], "not_found", "{}", answer.body);
    assert!(answer.body["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", answer.body);

    let response =
        client.post(runner.url("/probe/body")).body(vec![b'x'; 2048]).send().await.expect("the runner answers");
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(body["code"], "payload_too_large", "{body}");

    let answer = timed_get(&client, &runner, "/probe/trap").await;
    assert_eq!((answer.status, answer.content_type.as_str()), (500, "application/json"), "{}", answer.body);
    assert_eq!(answer.body["code"], "internal", "{}", answer.body);
    assert!(!answer.body.to_string().contains("trap"), "the failure's text must stay in the log: {}", answer.body);
}

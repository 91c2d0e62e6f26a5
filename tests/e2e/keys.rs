//! Scoped API keys (docs/keys.md): made with `gatehouse keys`, checked by every public route on
//! the real runner and components against the test database. Each scope against each route, a
//! revocation seen at once by two hosts, a rotation that keeps both keys valid until the old one
//! is revoked, and the key shown once.

use std::process::Command;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::{Runner, RunnerOptions, TOKEN, app_manifest, database_url, gatehouse_bin, http, unique};
use reqwest::Method;
use serde_json::{Value, json};

/// `gatehouse keys ARGS` against the test database; its stdout and stderr.
fn keys(args: &[&str]) -> Result<(String, String)> {
    admin_cli("keys", args)
}

/// `gatehouse COMMAND ARGS` (`keys`, `tenants`) against the test database; its stdout and
/// stderr, failing the test if it fails.
pub(crate) fn admin_cli(command: &str, args: &[&str]) -> Result<(String, String)> {
    admin_cli_on(&database_url(), command, args)
}

/// `gatehouse COMMAND ARGS` against the database at `url`.
pub(crate) fn admin_cli_on(url: &str, command: &str, args: &[&str]) -> Result<(String, String)> {
    let output = Command::new(gatehouse_bin()).arg(command).args(args).env("DATABASE_URL", url).output()?;
    let (stdout, stderr) = (String::from_utf8(output.stdout)?, String::from_utf8(output.stderr)?);
    ensure!(output.status.success(), "gatehouse {command} {args:?} failed: {stderr}");
    Ok((stdout, stderr))
}

/// A new key of the first tenant with these scopes, labelled for the test that made it.
fn new_key(scopes: &[&str]) -> Result<String> {
    new_tenant_key("default", scopes)
}

/// A new key of `tenant` with these scopes.
pub(crate) fn new_tenant_key(tenant: &str, scopes: &[&str]) -> Result<String> {
    new_tenant_key_on(&database_url(), tenant, scopes)
}

/// A new key of `tenant`, in the database at `url`, with these scopes.
pub(crate) fn new_tenant_key_on(url: &str, tenant: &str, scopes: &[&str]) -> Result<String> {
    let label = unique("keys-test");
    let mut args = vec!["create", "--tenant", tenant, "--label", label.as_str()];
    for scope in scopes {
        args.extend(["--scope", scope]);
    }
    let (stdout, _) = admin_cli_on(url, "keys", &args)?;
    let key = stdout.trim().to_owned();
    ensure!(key.starts_with("ghk_") && key.len() == 56, "not a key: {key:?}");
    Ok(key)
}

/// The status, body and `WWW-Authenticate` of `method path` sent with `key`.
async fn send(
    runner: &Runner,
    key: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value, String)> {
    let mut request = http().request(method, runner.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = request.send().await?;
    let status = answer.status().as_u16();
    let challenge = answer.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let text = answer.text().await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text)), challenge))
}

/// Every public route, with the scope it needs. The calls named do not exist: a route that
/// admits the key answers what it answers for those (404, 400, ...), never 401 or 403.
fn routes() -> Vec<(Method, String, Option<Value>, &'static str)> {
    let call = "tc_000000000000";
    let mcp = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    vec![
        (Method::POST, "/voice-tools/pending".into(), Some(json!({})), "calls:write"),
        (
            Method::PATCH,
            format!("/voice-tools/modify/{call}"),
            Some(json!({"parameters": {"to": "a@b.co"}})),
            "calls:write",
        ),
        (Method::POST, format!("/voice-tools/confirm/{call}"), Some(json!({})), "calls:write"),
        (Method::DELETE, format!("/voice-tools/cancel/{call}"), Some(json!({})), "calls:write"),
        (Method::POST, format!("/resume-execution/{call}"), Some(json!({"action": "proceed"})), "calls:write"),
        (Method::POST, "/execute-gmail".into(), Some(json!({})), "calls:write"),
        (Method::POST, "/query-vector-db".into(), Some(json!({})), "calls:write"),
        (Method::POST, "/mcp".into(), Some(mcp), "calls:write"),
        (Method::GET, format!("/voice-tools/status/{call}"), None, "calls:read"),
        (Method::GET, "/voice-tools/calls?limit=1".into(), None, "calls:read"),
        (Method::GET, format!("/voice-tools/calls/{call}/callbacks"), None, "calls:read"),
        (Method::GET, "/voice-tools/context/keys-test-session".into(), None, "calls:read"),
        (Method::GET, "/get-session-context?session_id=keys-test-session&context_key=k".into(), None, "calls:read"),
        (Method::GET, "/voice-tools/tools".into(), None, "tools:read"),
        (Method::GET, "/voice-tools/tools/send_email/executions?limit=1".into(), None, "tools:read"),
        (Method::GET, "/voice-tools/tools/send_email/stats".into(), None, "tools:read"),
        (Method::POST, "/voice-tools/sweep".into(), None, "admin"),
        // Who the key is: any valid key may ask.
        (Method::GET, "/voice-tools/key".into(), None, ANY_SCOPE),
    ]
}

/// What a route needs when any valid key will do.
const ANY_SCOPE: &str = "any";

/// Whether holding `held` lets a key use a route that needs `needed`: admin is everything, and a
/// relay that acts on calls reads them.
fn covers(held: &str, needed: &str) -> bool {
    needed == ANY_SCOPE || held == needed || held == "admin" || (held == "calls:write" && needed == "calls:read")
}

#[tokio::test]
async fn each_scope_is_refused_where_it_should_be_with_a_403_naming_the_scope() -> Result<()> {
    let runner = Runner::start(&app_manifest(), RunnerOptions::default())?;
    let scopes = ["calls:write", "calls:read", "tools:read", "admin"];
    let mut keys_by_scope = Vec::new();
    for scope in scopes {
        keys_by_scope.push((scope, new_key(&[scope])?));
    }
    for (method, path, body, needed) in routes() {
        for (held, key) in &keys_by_scope {
            let (status, answer, challenge) = send(&runner, key, method.clone(), &path, body.as_ref()).await?;
            if covers(held, needed) {
                ensure!(status != 401 && status != 403, "{held} on {method} {path}: {status} {answer}");
            } else {
                ensure!(status == 403, "{held} on {method} {path} needs {needed}: {status} {answer}");
                ensure!(
                    answer["code"] == "forbidden" && answer["required_scope"] == needed,
                    "{method} {path}: {answer}"
                );
                ensure!(answer["error"].as_str().is_some_and(|e| e.contains(needed)), "{answer}");
                let expected = format!("Bearer error=\"insufficient_scope\", scope=\"{needed}\"");
                ensure!(challenge == expected, "{method} {path}: WWW-Authenticate {challenge:?}");
            }
        }
        // The api_token variable is the first tenant's admin key, as before keys existed.
        let (status, answer, _) = send(&runner, TOKEN, method.clone(), &path, body.as_ref()).await?;
        ensure!(status != 401 && status != 403, "api_token on {method} {path}: {status} {answer}");
        // A key's shape with a secret no key has is the same 401 as any wrong credential.
        let admin = &keys_by_scope[3].1;
        let last = if admin.ends_with('A') { 'B' } else { 'A' };
        let unknown = format!("{}{last}", &admin[..55]);
        let (status, answer, challenge) = send(&runner, &unknown, method.clone(), &path, body.as_ref()).await?;
        ensure!(
            status == 401 && answer["code"] == "unauthorized" && challenge == "Bearer",
            "{method} {path}: {status} {answer}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_rotation_keeps_both_keys_valid_and_a_revoked_key_is_refused_at_once_on_every_host() -> Result<()> {
    let hosts = [
        Runner::start(&app_manifest(), RunnerOptions::default())?,
        Runner::start(&app_manifest(), RunnerOptions::default())?,
    ];
    let old = new_key(&["calls:read"])?;
    let (stdout, stderr) = keys(&["rotate", &old[..12]])?;
    let new = stdout.trim().to_owned();
    ensure!(new.starts_with("ghk_") && new != old, "rotate printed {stdout:?}");
    ensure!(stderr.contains(&format!("{} stays valid", &old[..12])), "{stderr}");
    let read = |host: &Runner, key: &str| {
        let (host, key) = (host.url("/voice-tools/calls?limit=1"), key.to_owned());
        async move { http().get(host).bearer_auth(key).send().await.map(|a| a.status().as_u16()) }
    };
    for host in &hosts {
        ensure!(
            read(host, &old).await? == 200 && read(host, &new).await? == 200,
            "both keys are valid during the overlap"
        );
    }

    keys(&["revoke", &old[..12]])?;
    for host in &hosts {
        ensure!(read(host, &old).await? == 401, "the revoked key is refused on its next request");
        ensure!(read(host, &new).await? == 200, "the new key stays valid");
    }
    let revoked_again = Command::new(gatehouse_bin())
        .args(["keys", "revoke", &old[..12]])
        .env("DATABASE_URL", database_url())
        .output()?;
    ensure!(!revoked_again.status.success(), "revoking a revoked key is an error");

    // The list names keys by prefix, never shows a key, and tells which one replaced which.
    let (list, _) = keys(&["list"])?;
    let line = |prefix: &str| list.lines().find(|line| line.starts_with(prefix)).map(str::to_owned);
    let old_line = line(&old[..12]).context("the old key is listed")?;
    let new_line = line(&new[..12]).context("the new key is listed")?;
    ensure!(old_line.contains("revoked") && new_line.contains(&format!("replaces {}", &old[..12])), "{list}");
    ensure!(!list.contains(&old[13..]) && !list.contains(&new[13..]), "a key's secret is never listed");
    Ok(())
}

#[tokio::test]
async fn keys_are_made_only_with_known_scopes_for_a_tenant_that_exists() -> Result<()> {
    let run = |args: &[&str]| -> Result<(bool, String)> {
        let output =
            Command::new(gatehouse_bin()).arg("keys").args(args).env("DATABASE_URL", database_url()).output()?;
        Ok((output.status.success(), String::from_utf8(output.stderr)?))
    };
    let (made, stderr) = run(&["create", "--scope", "calls:everything"])?;
    ensure!(!made && stderr.contains("the scopes are calls:write, calls:read, tools:read, admin"), "{stderr}");
    let (made, stderr) = run(&["create", "--scope", "admin", "--tenant", "nobody-here"])?;
    ensure!(!made && stderr.contains("there is no tenant \"nobody-here\""), "{stderr}");
    let (made, _) = run(&["create"])?;
    ensure!(!made, "a key needs at least one scope");
    Ok(())
}

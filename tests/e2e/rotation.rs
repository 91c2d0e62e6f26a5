//! Rotating the signing secrets without a refused moment (docs/keys.md, "Rotating the signing
//! secrets"): during a rotation a host holds the new secret and the previous one, signs with
//! both and accepts either. A relay verifying callbacks with the old secret, then the new one,
//! sees no failed signature across the overlap; two hosts whose contract secrets differ during
//! a rotation keep working, whichever of them has moved on first.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::cluster::TOOL_COMPONENTS;
use gatehouse_tests::gmail::{gmail_variables, start_fake};
use gatehouse_tests::lifecycle::{App, Relay, lifecycle_options};
use gatehouse_tests::{
    LIFECYCLE_COMPONENTS, Runner, RunnerOptions, app_manifest, database_url, select_components, unique,
};
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(30);
const OLD: &str = "the-secret-being-replaced";
const NEW: &str = "the-secret-replacing-it";

/// One call through its checkpoint to completion on `app`, reporting to `relay`; its id, once
/// the completion callback has arrived.
async fn walk_one_call(app: &App, relay: &Relay) -> Result<String> {
    let body = json!({"session_id": unique("rotation"), "function_name": "fixture_action",
                      "parameters": {"to": "a@b.example"}, "callback_url": relay.url});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create: {} {}", created.status, created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    relay.wait_for(&id, "completion", SETTLE).await?;
    Ok(id)
}

#[tokio::test]
async fn a_relay_that_moves_to_the_new_callback_secret_during_the_overlap_sees_no_failed_signature() -> Result<()> {
    let relay = Relay::start().await?;
    let args = ["--sweep-interval", "0"];

    // Before: the old secret alone, and the relay verifies with it.
    let before = App::start(lifecycle_options(&[("callback_secret", OLD)], &args)).await?;
    let first = walk_one_call(&before, &relay).await?;
    drop(before);
    // The overlap: the hosts sign with the new secret and the previous one. The relay is
    // moved from the old to the new in the middle of it: every callback verifies with both.
    let overlap =
        App::start(lifecycle_options(&[("callback_secret", NEW), ("callback_secret_previous", OLD)], &args)).await?;
    let during = [walk_one_call(&overlap, &relay).await?, walk_one_call(&overlap, &relay).await?];
    drop(overlap);
    // After: the new secret alone.
    let after = App::start(lifecycle_options(&[("callback_secret", NEW)], &args)).await?;
    let last = walk_one_call(&after, &relay).await?;

    let of = |id: &str| relay.for_call(id);
    for callback in of(&first) {
        ensure!(callback.verifies_with(OLD) && !callback.verifies_with(NEW), "before: {:?}", callback.signature);
    }
    for id in &during {
        let callbacks = of(id);
        ensure!(callbacks.len() >= 2, "the checkpoint and the completion: {}", callbacks.len());
        for callback in callbacks {
            ensure!(callback.verifies_with(OLD) && callback.verifies_with(NEW), "overlap: {:?}", callback.signature);
            ensure!(callback.signature.as_deref().is_some_and(|s| s.matches("v1=").count() == 2), "two signatures");
        }
    }
    for callback in of(&last) {
        ensure!(callback.verifies_with(NEW) && !callback.verifies_with(OLD), "after: {:?}", callback.signature);
    }
    Ok(())
}

/// The lifecycle on one host and Gmail on another, each with its own contract secrets.
async fn two_hosts(edge_secrets: &[&str], tools_secrets: &[&str]) -> Result<()> {
    // A runner serving `components`, with `variables` and the contract secrets given (the
    // current one, then the previous one during a rotation).
    let host = |mut variables: Vec<(String, String)>, secrets: &[&str], components: &[&str]| {
        variables.push(("contract_secret".to_owned(), secrets[0].to_owned()));
        if let Some(previous) = secrets.get(1) {
            variables.push(("contract_secret_previous".to_owned(), (*previous).to_owned()));
        }
        let extra_args = select_components(components);
        Runner::start(&app_manifest(), RunnerOptions { variables, extra_args, ..Default::default() })
    };
    let fake = start_fake().await?;
    let tools = host(gmail_variables(&fake), tools_secrets, &TOOL_COMPONENTS)?;
    let origin = tools.base_url.clone();
    let edge_variables = vec![
        ("tool_registry".to_owned(), format!("send_email={origin}/internal/tools/gmail")),
        ("tools_origin".to_owned(), origin.clone()),
    ];
    let edge = host(edge_variables, edge_secrets, &LIFECYCLE_COMPONENTS)?;
    let app = App { runner: edge, http: reqwest::Client::new(), database_url: database_url() };
    let relay = Relay::start().await?;
    // The edge asks the tools host to validate, prepare and send it, each request signed.
    let id = crate::deployment::call_at_checkpoint(&app, &relay).await?;
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(fake.sent().len() == 1, "exactly one email: {}", fake.sent().len());
    drop(tools);
    Ok(())
}

#[tokio::test]
async fn hosts_with_different_contract_secrets_during_a_rotation_keep_working() -> Result<()> {
    // The tools host moved first: it signs and accepts the new secret and the old one, and
    // the edge, still on the old one alone, reaches it.
    two_hosts(&[OLD], &[NEW, OLD]).await?;
    // The edge moved first: it signs with both, and the tools host, still on the old one,
    // accepts the request.
    two_hosts(&[NEW, OLD], &[OLD]).await?;
    Ok(())
}

//! The conformance kit (`gatehouse tools check URL`, docs/tools.md, "Checking a tool"): it
//! passes every tool the repository ships, through the application they are registered in, and
//! a team's tool host that keeps the contract; a tool host broken on purpose fails it with the
//! line of the rule it breaks. Pointed at a declared tool's backend (`tools check FILE
//! --backend`), it passes the reservation service and fails a copy of it broken on purpose on
//! each rule the flaw breaks.
use std::time::Duration;

use anyhow::{Result, ensure};
use gatehouse_tests::gmail::{gmail_variables, start_fake};
use gatehouse_tests::reservations::{HoldState, ReservationFlaws, Reservations};
use gatehouse_tests::tool_host::{Flaws, ToolHost};
use gatehouse_tests::{TOKEN, gatehouse_bin, workspace_root};

const SECRET: &str = "conformance-contract-secret";

/// `gatehouse tools check ARGS...` with the contract secret (and the API token) in its
/// environment: whether it passed, and what it printed.
async fn kit(args: &[&str]) -> Result<(bool, String)> {
    let output = tokio::process::Command::new(gatehouse_bin())
        .args(["tools", "check"])
        .args(args)
        .env("GATEHOUSE_CONTRACT_SECRET", SECRET)
        .env("GATEHOUSE_TOKEN", TOKEN)
        .output()
        .await?;
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok((output.status.success(), printed))
}

/// The report's line for the rule that starts with `rule`.
fn line<'a>(printed: &'a str, rule: &str) -> &'a str {
    printed.lines().find(|line| line.trim_start().starts_with(rule)).unwrap_or_default()
}

#[tokio::test]
async fn a_tool_host_that_keeps_the_contract_passes_and_a_broken_one_fails_on_its_rule() -> Result<()> {
    let keeps = ToolHost::start(SECRET, Flaws::default()).await?;
    let (passed, printed) = kit(&[&keeps.url]).await?;
    ensure!(passed, "{printed}");
    ensure!(printed.lines().filter(|line| line.contains("  pass")).count() == 11, "every rule passes:\n{printed}");
    ensure!(keeps.opened().len() == 1, "the kit's execute ran once: {:?}", keeps.opened());

    let twice = ToolHost::start(SECRET, Flaws { runs_execute_twice: true, ..Flaws::default() }).await?;
    let (passed, printed) = kit(&[&twice.url]).await?;
    let broken = line(&printed, "execute twice with the same call runs once");
    ensure!(!passed && broken.contains("FAIL") && broken.contains("it ran twice"), "{printed}");
    ensure!(printed.matches("FAIL").count() == 1, "only that rule fails:\n{printed}");

    let unsigned = ToolHost::start(SECRET, Flaws { accepts_unsigned: true, ..Flaws::default() }).await?;
    let (passed, printed) = kit(&[&unsigned.url]).await?;
    ensure!(!passed, "{printed}");
    for rule in
        ["an unsigned request is refused", "a wrongly signed request is refused", "a replayed request is refused"]
    {
        ensure!(line(&printed, rule).contains("FAIL"), "{rule}:\n{printed}");
    }

    // Issue 49: a host that leaves out the checkpoint it declared, and one whose execute
    // answers outside the contract, fail with the field named.
    let skips = ToolHost::start(SECRET, Flaws { omits_checkpoint: true, ..Flaws::default() }).await?;
    let (passed, printed) = kit(&[&skips.url]).await?;
    let broken = line(&printed, "prepare then discard leaves nothing behind");
    ensure!(!passed && broken.contains("FAIL") && broken.contains("`checkpoint`"), "{printed}");
    let off = ToolHost::start(SECRET, Flaws { answers_off_contract: true, ..Flaws::default() }).await?;
    let (passed, printed) = kit(&[&off.url]).await?;
    let broken = line(&printed, "execute twice with the same call runs once");
    ensure!(!passed && broken.contains("FAIL") && broken.contains("`result`"), "{printed}");

    let slow = Flaws { slow_execute: Some(Duration::from_secs(3)), ..Flaws::default() };
    let slow = ToolHost::start(SECRET, slow).await?;
    let (passed, printed) = kit(&[&slow.url, "--timeout-ms", "1000"]).await?;
    let cut = line(&printed, "every answer comes within the timeout");
    ensure!(!passed && cut.contains("FAIL") && cut.contains("execute (no answer within 1000 ms)"), "{printed}");
    Ok(())
}

#[tokio::test]
async fn every_tool_the_repository_ships_keeps_the_contract() -> Result<()> {
    let fake = start_fake().await?;
    let reservations = Reservations::start().await?;
    // The declared-tool fixture registers all three shipped tools; gmail_variables' own
    // registry (Gmail alone) is left out.
    let variables: Vec<(String, String)> =
        gmail_variables(&fake).into_iter().filter(|(name, _)| name != "tool_registry").collect();
    let variables: Vec<(&str, &str)> = variables.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let app =
        crate::declared_tools::app_with(&reservations, &[&variables[..], &[("contract_secret", SECRET)]].concat(), &[])
            .await?;
    let through = app.runner.base_url.clone();
    let (passed, printed) = kit(&["gmail", "vector-query", "book-table", "--through", &through]).await?;
    ensure!(passed, "{printed}");
    for tool in ["send_email", "query_vector_db", "book_table"] {
        ensure!(printed.contains(&format!("{tool} at {through}/internal/tools/")), "{tool} was checked:\n{printed}");
    }
    ensure!(!printed.contains("FAIL"), "{printed}");
    ensure!(fake.sent().len() == 1, "one email for the kit's one execute: {:?}", fake.sent().len());
    Ok(())
}

/// `gatehouse tools check tools/book_table.toml --backend` against `reservations`, its variables
/// given as `--variable` and its signing secret from the environment, as an operator would.
async fn backend_kit(reservations: &Reservations) -> Result<(bool, String)> {
    let declaration = workspace_root().join("tools/book_table.toml");
    let mut command = tokio::process::Command::new(gatehouse_bin());
    command.args(["tools", "check", "--backend"]).arg(&declaration);
    for (name, value) in reservations.variables() {
        match name {
            "book_table_signing_secret" => command.env("SPIN_VARIABLE_BOOK_TABLE_SIGNING_SECRET", value),
            _ => command.arg("--variable").arg(format!("{name}={value}")),
        };
    }
    let output = command.output().await?;
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok((output.status.success(), printed))
}

/// Issue 49: a declared tool's backend gets the tool contract's guarantees. The reservation
/// service passes every rule, and what the kit held is released; one that ignores signatures
/// fails the unsigned, wrongly signed, replayed and re-targeted rules, and one that ignores
/// Idempotency-Key fails the rule that it acts once under a key, and only that one.
#[tokio::test]
async fn the_kit_passes_a_backend_that_keeps_the_promises_and_fails_one_that_breaks_them() -> Result<()> {
    let keeps = Reservations::start().await?;
    let (passed, printed) = backend_kit(&keeps).await?;
    ensure!(passed, "{printed}");
    ensure!(printed.contains(&format!("the backend of book_table at {}", keeps.url)), "{printed}");
    ensure!(printed.lines().filter(|line| line.contains("  pass")).count() == 7, "every rule passes:\n{printed}");
    ensure!(!printed.contains(gatehouse_tests::reservations::SIGNING_SECRET), "never the secret:\n{printed}");
    let holds = keeps.holds();
    ensure!(holds.len() == 2, "the kit's two holds: {holds:?}");
    ensure!(
        holds.iter().filter(|hold| hold.state == HoldState::Released).count() == 1
            && holds.iter().filter(|hold| hold.state == HoldState::Booked).count() == 1,
        "one hold released, the other booked once: {holds:?}"
    );

    let unsigned =
        Reservations::start_with(ReservationFlaws { accepts_unsigned: true, ..ReservationFlaws::default() }).await?;
    let (passed, printed) = backend_kit(&unsigned).await?;
    ensure!(!passed, "{printed}");
    for rule in [
        "an unsigned request is refused",
        "a wrongly signed request is refused",
        "a replayed request is refused",
        "a request sent to another target than it was signed for is refused",
    ] {
        ensure!(line(&printed, rule).contains("FAIL"), "{rule}:\n{printed}");
    }
    ensure!(line(&printed, "a correctly signed request is accepted").contains("pass"), "{printed}");

    let twice =
        Reservations::start_with(ReservationFlaws { ignores_idempotency_key: true, ..ReservationFlaws::default() })
            .await?;
    let (passed, printed) = backend_kit(&twice).await?;
    let broken = line(&printed, "execute twice with the same Idempotency-Key acts once");
    ensure!(!passed && broken.contains("FAIL") && broken.contains("it acted twice under the same key"), "{printed}");
    ensure!(printed.matches("FAIL").count() == 1, "only that rule fails:\n{printed}");
    Ok(())
}

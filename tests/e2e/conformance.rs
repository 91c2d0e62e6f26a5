//! The conformance kit (`gatehouse tools check URL`, docs/tools.md, "Checking a tool"): it
//! passes every tool the repository ships, through the application they are registered in, and
//! a team's tool host that keeps the contract; a tool host broken on purpose fails it with the
//! line of the rule it breaks.
use std::time::Duration;

use anyhow::{Result, ensure};
use gatehouse_tests::gmail::{gmail_variables, start_fake};
use gatehouse_tests::reservations::Reservations;
use gatehouse_tests::tool_host::{Flaws, ToolHost};
use gatehouse_tests::{TOKEN, gatehouse_bin};

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

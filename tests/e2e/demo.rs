//! `gatehouse demo` end to end: the seed's conversation replayed against the running
//! application, with the demo's own relay verifying every callback's signature.

use anyhow::{Context, Result, ensure};
use gatehouse_tests::gmail::GmailApp;
use gatehouse_tests::lifecycle::CALLBACK_SECRET;
use gatehouse_tests::{TOKEN, gatehouse_bin};
use mail_parser::MessageParser;

#[tokio::test]
async fn the_demo_replays_the_seed_conversation_and_sends_one_email() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let output = tokio::process::Command::new(gatehouse_bin())
        .args(["demo", "--url", &app.runner.base_url, "--token", TOKEN, "--callback-secret", CALLBACK_SECRET])
        .args(["--relay-listen", &gatehouse_tests::free_relay_address()?.to_string()])
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(output.status.success(), "the demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    for line in [
        "I'll send an email to john@gmail.com about 'Meeting Tomorrow'. Confirm to proceed.",
        "I'll send an email to john.smith@gmail.com about 'Meeting Tomorrow'. Confirm to proceed.",
        "checkpoint callback received, signature verified",
        "The email to john.smith@gmail.com about 'Meeting Tomorrow' is ready. Shall I send it?",
        "completion callback received, signature verified",
        "Email sent to john.smith@gmail.com successfully!",
        "PENDING -> MODIFIED -> EXECUTING -> PREPARED -> EXECUTING -> COMPLETED",
        "Gatehouse time for the whole conversation:",
    ] {
        assert!(stdout.contains(line), "the demo did not print {line:?}:\n{stdout}");
    }
    let sent = fake.sent();
    assert_eq!(sent.len(), 1, "one email");
    let parsed = MessageParser::default().parse(&sent[0].raw).context("parse")?;
    let to: Vec<&str> = parsed.to().context("to")?.iter().filter_map(|a| a.address()).collect();
    assert_eq!(to, ["john.smith@gmail.com"], "sent to the corrected address");
    Ok(())
}

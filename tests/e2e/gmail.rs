//! The Gmail tool end to end (docs/architecture.md, "The Gmail tool"): the real `gmail` component,
//! served by the runner, sending through a fake Gmail server that speaks the Gmail REST API and
//! Google's token endpoint. What the fake received is read back with a real mail parser.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_fake_gmail::{Fault, StoredMessage};
use gatehouse_tests::gmail::{GmailApp, SENDER, gmail_options, start_fake};
use gatehouse_tests::lifecycle::{Answer, App, ProgressReply, Relay, ScratchDatabase};
use gatehouse_tests::{db, unique};
use mail_parser::MessageParser;
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);

async fn create(app: &App, session: &str, parameters: Value, relay: &Relay) -> Result<Answer> {
    let body = json!({"session_id": session, "function_name": "send_email", "parameters": parameters,
        "callback_url": relay.url});
    app.send(Method::POST, "/voice-tools/pending", Some(body)).await
}

async fn create_id(app: &App, session: &str, parameters: Value, relay: &Relay) -> Result<String> {
    let answer = create(app, session, parameters, relay).await?;
    ensure!(answer.status == 201, "create answered {}: {}", answer.status, answer.body);
    answer.body["tool_call_id"].as_str().map(str::to_owned).context("no tool_call_id")
}

fn meeting() -> Value {
    json!({"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "Let's discuss the Q3 numbers at 10."})
}

/// Polls until `check` holds, or fails after `timeout`.
async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !check() {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn sent_for(messages: &[StoredMessage], id: &str) -> Vec<StoredMessage> {
    let header = format!("<gatehouse.{id}@example.com>");
    messages.iter().filter(|m| m.message_id_header.as_deref() == Some(header.as_str())).cloned().collect()
}

/// The seed's conversation with real email: wrong address, corrected, confirmed, the draft at
/// the checkpoint, sent once. The delivered message is parsed back by a real mail parser.
#[tokio::test]
async fn the_seed_conversation_sends_one_correct_message() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let session = unique("gmail-seed");
    let subject = "Réunion demain — 会議 Meeting Tomorrow";
    let body = "Hi John,\nLet's discuss the Q3 numbers at 10:00.\nÇa marche? — Gatehouse ✓";
    let parameters = json!({"to": "john@gmail.com", "cc": ["ops@example.org"], "bcc": "audit@example.org",
        "subject": subject, "body": body});
    let created = create(&app, &session, parameters, &relay).await?;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.body["message"],
        format!(
            "I'll send an email to john@gmail.com, copying ops@example.org and 1 blind copy about '{subject}'. Confirm to proceed."
        )
    );
    let id = created.body["tool_call_id"].as_str().context("id")?.to_owned();

    let modified = app
        .send(
            Method::PATCH,
            &format!("/voice-tools/modify/{id}"),
            Some(json!({"parameters": {"to": "john.smith@gmail.com"}, "reason": "the caller spelled the address"})),
        )
        .await?;
    assert_eq!(modified.status, 200, "{}", modified.body);
    assert_eq!(modified.body["modification_applied"]["new"], "john.smith@gmail.com");

    assert_eq!(app.confirm(&id).await?.status, 202);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    assert!(checkpoint.signature_valid);
    assert_eq!(
        checkpoint.body["message"],
        format!("The email to john.smith@gmail.com about '{subject}' is ready. Shall I send it?")
    );
    let drafts = fake.drafts();
    assert_eq!(drafts.len(), 1, "prepare creates exactly one draft");
    assert!(fake.sent().is_empty(), "nothing is sent before proceed");

    assert_eq!(app.resume(&id, "proceed").await?.status, 202);
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert!(completion.signature_valid);
    assert_eq!(completion.body["voice_response"], "Email sent to john.smith@gmail.com successfully!");

    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    let message = &sent[0];
    assert_eq!(call["result"]["message_id"], message.id.as_str());
    assert_eq!(call["result"]["thread_id"], message.thread_id.as_str());
    assert_eq!(message.id, drafts[0].message.id, "the draft's message is what went out");
    assert!(fake.drafts().is_empty(), "sending consumed the draft");

    let parsed = MessageParser::default().parse(&message.raw).context("the raw message does not parse")?;
    assert_eq!(parsed.subject(), Some(subject));
    assert_eq!(parsed.body_text(0).context("no text body")?.replace("\r\n", "\n"), body);
    let addresses = |list: Option<&mail_parser::Address>| -> Vec<String> {
        list.map(|l| l.iter().filter_map(|a| a.address().map(str::to_owned)).collect()).unwrap_or_default()
    };
    assert_eq!(addresses(parsed.to()), ["john.smith@gmail.com"]);
    assert_eq!(addresses(parsed.cc()), ["ops@example.org"]);
    assert_eq!(addresses(parsed.from()), [SENDER]);
    let expected_id = format!("gatehouse.{id}@example.com");
    assert_eq!(parsed.message_id(), Some(expected_id.as_str()));
    assert_eq!(call["result"]["rfc822_message_id"], format!("<{expected_id}>"));
    let raw = String::from_utf8_lossy(&message.raw);
    assert!(raw.contains("=?UTF-8?B?"), "the subject is RFC 2047 encoded");
    assert!(raw.is_ascii(), "the message is 7-bit clean");
    let delivered = String::from_utf8_lossy(&message.delivered);
    assert!(
        !delivered.to_ascii_lowercase().contains("audit@example.org"),
        "the bcc recipient must not appear in what the recipients receive:\n{delivered}"
    );
    let received =
        MessageParser::default().parse(&message.delivered).context("the delivered message does not parse")?;
    assert!(received.bcc().is_none());
    assert_eq!(addresses(received.to()), ["john.smith@gmail.com"]);
    assert_eq!(message.bcc, ["audit@example.org"], "but Gmail was told to deliver to it");
    Ok(())
}

/// Header injection and bad addresses are refused with field errors before anything is
/// recorded or sent.
#[tokio::test]
async fn header_injection_and_bad_addresses_are_refused() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let session = unique("gmail-bad");
    let cases = [
        (json!({"to": "john@gmail.com", "subject": "Hi\r\nBcc: everyone@example.com", "body": "x"}), "subject"),
        (json!({"to": "john@gmail.com\r\nBcc: everyone@example.com", "subject": "Hi", "body": "x"}), "to"),
        (json!({"to": ["john@gmail.com", "not-an-address"], "subject": "Hi", "body": "x"}), "to[1]"),
        (json!({"to": "john@", "subject": "Hi", "body": "x"}), "to"),
        (json!({"to": "john@gmail.com", "subject": "Hi", "body": "x".repeat(40_000)}), "body"),
        (json!({"to": "john@gmail.com", "body": "x"}), "subject"),
    ];
    for (parameters, field) in cases {
        let answer = create(&app, &session, parameters.clone(), &relay).await?;
        assert_eq!(answer.status, 422, "{parameters}: {}", answer.body);
        let fields: Vec<&str> =
            answer.body["fields"].as_array().context("fields")?.iter().filter_map(|f| f["field"].as_str()).collect();
        assert!(fields.contains(&field), "{parameters}: expected a problem with {field}, got {}", answer.body);
    }
    let count: i64 =
        db().await?.query_one("SELECT count(*) FROM tool_calls WHERE session_id = $1", &[&session]).await?.get(0);
    assert_eq!(count, 0, "a refused call is not recorded");
    assert!(fake.requests().iter().all(|r| r.operation.starts_with("_fake")), "Gmail was never called");
    Ok(())
}

/// A 401 gets a new access token and the request goes through; a 429 is retried after its
/// Retry-After. The cached token is reused across requests until then.
#[tokio::test]
async fn an_expired_token_is_refreshed_and_a_429_waits_for_retry_after() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let id = create_id(&app, &unique("gmail-401"), meeting(), &relay).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "PREPARED", SETTLE).await?;
    let grants_before = fake.requests().iter().filter(|r| r.operation == "token").count();

    fake.expire_tokens();
    fake.inject(Fault::status("drafts.send", 429).retry_after(1));
    assert_eq!(app.resume(&id, "proceed").await?.status, 202);
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    assert_eq!(sent_for(&fake.sent(), &id).len(), 1);

    let requests = fake.requests();
    let grants = requests.iter().filter(|r| r.operation == "token").count();
    assert_eq!(grants, grants_before + 1, "one new token after the 401, then reused");
    let rejected = requests.iter().filter(|r| r.status == 401).count();
    assert!(rejected >= 1, "the expired token was refused");
    let sends: Vec<_> = requests.iter().filter(|r| r.operation == "drafts.send").collect();
    assert_eq!(sends.iter().map(|r| r.status).collect::<Vec<_>>(), [429, 200]);
    let waited = sends[1].at_ms - sends[0].at_ms;
    assert!(waited >= 1000, "the retry came {waited} ms after the 429, before its Retry-After of 1 s");
    assert_eq!(call["result"]["message_id"], sent_for(&fake.sent(), &id)[0].id.as_str());
    Ok(())
}

/// A Gmail that keeps failing ends the call FAILED, with a sentence the agent can say and
/// nothing sent.
#[tokio::test]
async fn a_persistent_5xx_fails_the_call_with_a_spoken_reason() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let id = create_id(&app, &unique("gmail-5xx"), meeting(), &relay).await?;
    fake.inject(Fault::status("drafts.create", 503).times(1000));
    assert_eq!(app.confirm(&id).await?.status, 202);
    let call = app.wait_for(&id, "FAILED", SETTLE).await?;
    assert_eq!(
        call["voice_response"],
        "Gmail isn't responding right now, so the email was not sent. Please try again in a minute."
    );
    assert!(fake.sent().is_empty() && fake.drafts().is_empty());
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "FAILED");
    Ok(())
}

/// The runner dies right after Gmail accepted the send and before COMPLETED is recorded. Another
/// runner's sweeper re-drives the call; the tool finds the message in the Sent folder and
/// completes with its id. One email, never two.
#[tokio::test]
async fn a_crash_right_after_the_send_completes_with_the_sent_message() -> Result<()> {
    // A database of its own: on the shared one, any other test's runner could take the
    // stranded call up before the survivor does.
    let scratch = ScratchDatabase::create("gmail_crash").await?;
    let lease = [("execution_lease_seconds", "2")];
    let fake = start_fake().await?;
    let app = App::start(scratch.serve(gmail_options(&fake, &lease, &["--sweep-interval", "0"]))).await?;
    let relay = Relay::start().await?;
    let id = create_id(&app, &unique("gmail-crash"), meeting(), &relay).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "PREPARED", SETTLE).await?;

    // Gmail sends, then its answer is held back: the runner is killed while it waits.
    fake.inject(Fault::status("drafts.send", 500).after_effect().delay_ms(60_000));
    assert_eq!(app.resume(&id, "proceed").await?.status, 202);
    eventually(SETTLE, "Gmail to send the message", || sent_for(&fake.sent(), &id).len() == 1).await?;
    drop(app);

    let survivor = App::start(scratch.serve(gmail_options(&fake, &lease, &["--sweep-interval", "0.2"]))).await?;
    let call = survivor.wait_for(&id, "COMPLETED", SETTLE).await?;
    let sent = sent_for(&fake.sent(), &id);
    assert_eq!(sent.len(), 1, "exactly one email");
    assert_eq!(call["result"]["message_id"], sent[0].id.as_str());
    assert_eq!(call["attempts"], 2, "{call}");
    // The held-back answer was never given (its runner died), so any send on record would be a resend.
    let resends: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.operation == "drafts.send" || r.operation == "messages.send")
        .collect();
    assert!(resends.is_empty(), "the survivor sent again: {resends:?}");
    assert!(fake.requests().iter().any(|r| r.operation == "messages.list"), "the survivor looked in the Sent folder");
    Ok(())
}

/// Cancelling at the checkpoint deletes the draft; a cancel while the send is under way is
/// refused with 409 and the email goes out once.
#[tokio::test]
async fn cancel_deletes_the_draft_and_is_refused_once_the_send_started() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let session = unique("gmail-cancel");

    let id = create_id(&app, &session, meeting(), &relay).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "PREPARED", SETTLE).await?;
    assert_eq!(fake.drafts().len(), 1);
    let cancelled = app.cancel(&id).await?;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    eventually(SETTLE, "the draft to be deleted", || fake.drafts().is_empty()).await?;
    assert!(fake.sent().is_empty());

    let id = create_id(&app, &session, meeting(), &relay).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "PREPARED", SETTLE).await?;
    fake.inject(Fault { operation: "drafts.send".into(), delay_ms: Some(1500), ..Fault::default() });
    assert_eq!(app.resume(&id, "proceed").await?.status, 202);
    let deadline = Instant::now() + SETTLE;
    while app.status(&id).await?.body["side_effect_started_at"].is_null() {
        ensure!(Instant::now() < deadline, "the send never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = app.cancel(&id).await?;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.body["code"], "side_effect_started");
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    assert_eq!(sent_for(&fake.sent(), &id).len(), 1);
    Ok(())
}

/// The history rows of a call, `operation:outcome` in the order they started, once there are
/// `expected` of them (a discard runs after the flow answers).
async fn history(id: &str, expected: usize) -> Result<Vec<String>> {
    let db = db().await?;
    let deadline = Instant::now() + SETTLE;
    loop {
        let rows = db
            .query(
                "SELECT operation || ':' || outcome, component, component_version FROM tool_executions
                  WHERE tool_call_id = $1 ORDER BY started_at, execution_id",
                &[&id],
            )
            .await?;
        if rows.len() >= expected || Instant::now() > deadline {
            for row in &rows {
                assert_eq!(
                    (row.get::<_, String>(1), row.get::<_, String>(2)),
                    ("gmail".into(), env!("CARGO_PKG_VERSION").into())
                );
            }
            return Ok(rows.iter().map(|row| row.get(0)).collect());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn execute_gmail(app: &App, session: &str, relay_url: &str) -> Result<Answer> {
    let body = json!({"intent_id": "intent_123", "session_id": session, "to": "john.smith@gmail.com",
        "subject": "Meeting Tomorrow", "body": "Let's discuss...", "callback_url": relay_url});
    app.send(Method::POST, "/execute-gmail", Some(body)).await
}

/// `POST /execute-gmail`: both gates continue and the message is sent; a cancel at either
/// gate sends nothing; a relay that cannot be reached sends nothing (fail closed).
#[tokio::test]
async fn the_gated_direct_flow_sends_only_when_the_relay_says_continue() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[("gate_timeout_seconds", "2")], &[]).await?;
    let relay = Relay::start().await?;
    let session = unique("gmail-direct");

    let answer = execute_gmail(&app, &session, &relay.url).await?;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["success"], true);
    let id = answer.body["tool_call_id"].as_str().context("id")?.to_owned();
    let sent = sent_for(&fake.sent(), &id);
    assert_eq!(sent.len(), 1);
    assert_eq!(answer.body["message_id"], sent[0].id.as_str());
    assert_eq!(answer.body["thread_id"], sent[0].thread_id.as_str());
    let callbacks = relay.for_call(&id);
    let gates: Vec<&str> = callbacks.iter().filter_map(|c| c.body["gate"].as_str()).collect();
    assert_eq!(gates, ["PREPARING", "READY_TO_SEND"]);
    assert_eq!(callbacks[1].body["requires_confirmation"], true);
    assert_eq!(callbacks[2].kind, "completion");
    assert_eq!(callbacks[2].body["voice_response"], "Email sent to john.smith@gmail.com successfully!");
    assert!(callbacks.iter().all(|c| c.signature_valid));
    let call = app.status(&id).await?.body;
    assert_eq!(call["status"], "COMPLETED");
    assert_eq!(call["intent_id"], "intent_123");
    // The flow runs the tool in-process and records its work like the contract server does.
    assert_eq!(history(&id, 2).await?, ["prepare:ok", "execute:ok"]);

    let expected_history = [vec!["prepare:cancelled"], vec!["prepare:ok", "execute:cancelled", "discard:ok"]];
    for (gate, expected) in ["PREPARING", "READY_TO_SEND"].into_iter().zip(expected_history) {
        relay.set_progress_reply(ProgressReply::CancelAtGate(gate));
        let answer = execute_gmail(&app, &session, &relay.url).await?;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["success"], false);
        assert_eq!(answer.body["status"], "CANCELLED", "{}", answer.body);
        let id = answer.body["tool_call_id"].as_str().context("id")?.to_owned();
        assert!(sent_for(&fake.sent(), &id).is_empty(), "cancelled at {gate}, yet sent");
        eventually(SETTLE, "no draft left behind", || fake.drafts().is_empty()).await?;
        assert_eq!(app.status(&id).await?.body["status"], "CANCELLED");
        assert_eq!(history(&id, expected.len()).await?, expected, "cancelled at {gate}");
    }

    let unreachable = gatehouse_tests::unreachable_callback_url()?;
    let answer = execute_gmail(&app, &session, &unreachable).await?;
    assert_eq!(answer.body["status"], "CANCELLED", "{}", answer.body);
    let id = answer.body["tool_call_id"].as_str().context("id")?.to_owned();
    assert!(sent_for(&fake.sent(), &id).is_empty());
    assert_eq!(fake.sent().len(), 1, "only the first flow sent anything");
    let reason = &app.status(&id).await?.body["status_history"];
    assert!(reason.to_string().contains("the relay could not be reached"), "{reason}");
    Ok(())
}

/// An email that refers to stored session context is accepted only while that context exists.
#[tokio::test]
async fn reference_context_must_exist_and_be_unexpired() -> Result<()> {
    let GmailApp { app, fake: _fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let session = unique("gmail-ref");
    let db = db().await?;
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value, expires_at)
         VALUES ($1, 'fresh', '{}'::jsonb, now() + interval '1 hour'),
                ($1, 'stale', '{}'::jsonb, now() - interval '1 second')",
        &[&session],
    )
    .await?;
    let with =
        |key: &str| json!({"to": "a@example.com", "subject": "Numbers", "body": "See above", "reference_context": key});
    let accepted = create(&app, &session, with("fresh"), &relay).await?;
    assert_eq!(accepted.status, 201, "{}", accepted.body);
    assert_eq!(accepted.body["parameters"]["reference_context"], "fresh", "recorded for the audit trail");
    for key in ["stale", "missing"] {
        let refused = create(&app, &session, with(key), &relay).await?;
        assert_eq!(refused.status, 422, "{key}: {}", refused.body);
        assert_eq!(refused.body["fields"][0]["field"], "reference_context");
    }
    Ok(())
}

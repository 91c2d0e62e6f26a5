use std::time::{Duration, Instant};

use gatehouse_fake_gmail::Fault;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{self, DEV_GRANT, Gmail, base64url, email, google_error, token_request};

#[tokio::test]
async fn a_429_carries_retry_after_and_is_used_up_after_its_times() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    fake.inject(Fault::status("messages.send", 429).times(2).retry_after(7));
    let body = json!({"raw": base64url(&email("<r@t>", "a@example.com", "Retry"))});
    for _ in 0..2 {
        let reply = gmail.post("messages/send", &body).await;
        let error = google_error(&reply, 429, "RESOURCE_EXHAUSTED");
        assert_eq!(error["errors"][0]["reason"], "rateLimitExceeded");
        assert_eq!(reply.header("retry-after"), Some("7"));
    }
    assert!(fake.sent().is_empty(), "a refused send sends nothing");
    assert_eq!(gmail.post("messages/send", &body).await.status, StatusCode::OK);
    assert_eq!(fake.sent().len(), 1);
    let statuses: Vec<u16> =
        fake.requests().iter().filter(|r| r.operation == "messages.send").map(|r| r.status).collect();
    assert_eq!(statuses, vec![429, 429, 200]);
}

#[tokio::test]
async fn server_errors_have_googles_shape() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    fake.inject(Fault::status("drafts.create", 500));
    fake.inject(Fault::status("drafts.create", 503).retry_after(2));
    let body = json!({"message": {"raw": base64url(&email("<e@t>", "a@example.com", "Errors"))}});
    let error = google_error(&gmail.post("drafts", &body).await, 500, "INTERNAL");
    assert_eq!(error["message"], "Backend Error");
    let unavailable = gmail.post("drafts", &body).await;
    google_error(&unavailable, 503, "UNAVAILABLE");
    assert_eq!(unavailable.header("retry-after"), Some("2"));
    assert!(fake.drafts().is_empty());
    assert_eq!(gmail.post("drafts", &body).await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_injected_401_refuses_once_without_revoking_the_token() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    fake.inject(Fault::status("messages.list", 401));
    let reply = gmail.get("messages").await;
    google_error(&reply, 401, "UNAUTHENTICATED");
    assert!(reply.header("www-authenticate").is_some());
    assert_eq!(gmail.get("messages").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_delay_holds_the_answer_back() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    fake.inject(Fault { operation: "drafts.list".into(), delay_ms: Some(300), ..Fault::default() });
    let started = Instant::now();
    assert_eq!(gmail.get("drafts").await.status, StatusCode::OK);
    let slow = started.elapsed();
    let started = Instant::now();
    gmail.get("drafts").await;
    let fast = started.elapsed();
    assert!(slow >= Duration::from_millis(300), "{slow:?}");
    assert!(fast < Duration::from_millis(300), "{fast:?}");
    let record = fake.requests().into_iter().find(|r| r.operation == "drafts.list").unwrap();
    assert!(record.duration_ms >= 300, "{record:?}");
}

#[tokio::test]
async fn after_effect_sends_the_draft_but_answers_an_error() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let draft = gmail.create_draft(&email("<lost@t>", "a@example.com", "Lost answer")).await;
    fake.inject(Fault::status("drafts.send", 500).after_effect());
    google_error(&gmail.post("drafts/send", &json!({"id": draft["id"]})).await, 500, "INTERNAL");

    assert_eq!(fake.sent().len(), 1, "the send happened although the client saw a 500");
    assert!(fake.drafts().is_empty());
    // What a careful retry sees: the draft is gone and the message is findable as sent.
    google_error(&gmail.post("drafts/send", &json!({"id": draft["id"]})).await, 404, "NOT_FOUND");
    assert_eq!(
        gmail.search("rfc822msgid:lost@t in:sent").await,
        vec![draft["message"]["id"].as_str().unwrap().to_owned()]
    );
}

#[tokio::test]
async fn a_client_that_gives_up_during_a_delay_still_caused_the_effect() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    fake.inject(Fault { operation: "messages.send".into(), delay_ms: Some(400), ..Fault::default() });
    let body = json!({"raw": base64url(&email("<timeout@t>", "a@example.com", "Timeout"))});
    let request = gmail.http.post(gmail.url("messages/send")).bearer_auth(&gmail.token).json(&body);
    let outcome = request.timeout(Duration::from_millis(100)).send().await;
    assert!(outcome.is_err_and(|e| e.is_timeout()));
    assert_eq!(fake.sent().len(), 1);
}

#[tokio::test]
async fn the_token_endpoint_takes_faults_in_its_own_error_shape() {
    let fake = support::start().await;
    fake.inject(Fault::status("token", 503));
    let (status, _, body) = token_request(&fake, DEV_GRANT).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "temporarily_unavailable");
    fake.inject(Fault::status("*", 429));
    let (status, headers, _) = token_request(&fake, DEV_GRANT).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    let (status, _, _) = token_request(&fake, DEV_GRANT).await;
    assert_eq!(status, StatusCode::OK);
}

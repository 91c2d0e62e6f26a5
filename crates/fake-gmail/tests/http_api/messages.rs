use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use gatehouse_fake_gmail::FakeGmailConfig;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{self, Gmail, base64url, email, google_error};

#[tokio::test]
async fn messages_send_stores_a_sent_message_that_can_be_read_back() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let raw = email("<direct@t>", "a@example.com, \"B, C\" <b@example.com>", "=?UTF-8?B?Q2Fmw6k=?=");
    let reply = gmail.post("messages/send", &json!({"raw": base64url(&raw)})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let sent = reply.json();
    let id = sent["id"].as_str().unwrap();
    assert_eq!(sent["threadId"], id);
    assert_eq!(sent["labelIds"], json!(["SENT"]));

    let as_raw = gmail.get(&format!("messages/{id}?format=raw")).await.json();
    assert_eq!(URL_SAFE.decode(as_raw["raw"].as_str().unwrap()).unwrap(), raw);
    assert_eq!(as_raw["sizeEstimate"], raw.len());
    assert!(as_raw["internalDate"].as_str().unwrap().parse::<u64>().unwrap() > 1_600_000_000_000);

    let metadata =
        gmail.get(&format!("messages/{id}?format=metadata&metadataHeaders=Subject&metadataHeaders=to")).await.json();
    assert_eq!(
        metadata["payload"]["headers"],
        json!([{"name": "To", "value": "a@example.com, \"B, C\" <b@example.com>"}, {"name": "Subject", "value": "=?UTF-8?B?Q2Fmw6k=?="}])
    );
    let minimal = gmail.get(&format!("messages/{id}?format=minimal")).await.json();
    assert!(minimal["payload"].is_null() && minimal["raw"].is_null());
    assert_eq!(minimal["snippet"], "Hello from the test.");
    let full = gmail.get(&format!("messages/{id}")).await.json();
    assert_eq!(
        URL_SAFE.decode(full["payload"]["body"]["data"].as_str().unwrap()).unwrap(),
        b"Hello from the test.\r\n"
    );

    assert_eq!(gmail.search("in:sent subject:café").await, vec![id.to_owned()]);
    assert_eq!(fake.sent()[0].raw, raw);
}

#[tokio::test]
async fn messages_send_refuses_a_message_it_could_not_deliver() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let no_recipient = b"Subject: x\r\n\r\nbody";
    let error = google_error(
        &gmail.post("messages/send", &json!({"raw": base64url(no_recipient)})).await,
        400,
        "INVALID_ARGUMENT",
    );
    assert_eq!(error["message"], "Recipient address required");
    let error = google_error(&gmail.post("messages/send", &json!({})).await, 400, "INVALID_ARGUMENT");
    assert!(error["message"].as_str().unwrap().starts_with("'raw' RFC822 payload"));
    let bcc_only = b"Bcc: hidden@example.com\r\nSubject: x\r\n\r\nbody";
    assert_eq!(gmail.post("messages/send", &json!({"raw": base64url(bcc_only)})).await.status, StatusCode::OK);
    assert_eq!(fake.sent().len(), 1);
}

#[tokio::test]
async fn messages_get_checks_the_id() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let error = google_error(&gmail.get("messages/not-an-id").await, 400, "INVALID_ARGUMENT");
    assert_eq!(error["message"], "Invalid id value");
    google_error(&gmail.get("messages/18c0ffee00000001").await, 404, "NOT_FOUND");
    google_error(&gmail.get("messages/18c0ffee00000001?format=bogus").await, 400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn a_reply_joins_the_thread_it_names() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let first = gmail
        .post("messages/send", &json!({"raw": base64url(&email("<t1@t>", "a@example.com", "Topic"))}))
        .await
        .json();
    let reply = email("<t2@t>", "a@example.com", "Re: Topic");
    let second =
        gmail.post("messages/send", &json!({"raw": base64url(&reply), "threadId": first["threadId"]})).await.json();
    assert_eq!(second["threadId"], first["threadId"]);
    assert_ne!(second["id"], first["id"]);
    let unknown_thread =
        gmail.post("messages/send", &json!({"raw": base64url(&reply), "threadId": "18c0ffee00000001"})).await.json();
    assert_eq!(unknown_thread["threadId"], unknown_thread["id"]);
}

#[tokio::test]
async fn messages_list_pages_newest_first() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let raw = email(&format!("<p{n}@t>"), "a@example.com", "Page");
        ids.push(
            gmail.post("messages/send", &json!({"raw": base64url(&raw)})).await.json()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    ids.reverse();
    let first = gmail.get("messages?maxResults=2").await.json();
    assert_eq!(first["resultSizeEstimate"], 5);
    let token = first["nextPageToken"].as_str().unwrap();
    let second = gmail.get(&format!("messages?maxResults=2&pageToken={token}")).await.json();
    let seen: Vec<&str> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["messages"].as_array().unwrap())
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(seen, ids[..4].iter().map(String::as_str).collect::<Vec<_>>());
    let last = gmail
        .get(&format!("messages?maxResults=2&pageToken={}", second["nextPageToken"].as_str().unwrap()))
        .await
        .json();
    assert_eq!(last["messages"].as_array().unwrap().len(), 1);
    assert!(last["nextPageToken"].is_null());
}

#[tokio::test]
async fn concurrent_sends_each_get_their_own_message() {
    let fake = support::start().await;
    let gmail = std::sync::Arc::new(Gmail::connect(&fake).await);
    let sends = (0..40).map(|n| {
        let gmail = gmail.clone();
        tokio::spawn(async move {
            let raw = email(&format!("<c{n}@t>"), "a@example.com", "Concurrent");
            gmail.post("messages/send", &json!({"raw": base64url(&raw)})).await.json()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
    });
    let ids: HashSet<String> = futures_join(sends).await;
    assert_eq!(ids.len(), 40);
    assert_eq!(fake.sent().len(), 40);
}

async fn futures_join(handles: impl Iterator<Item = tokio::task::JoinHandle<String>>) -> HashSet<String> {
    let mut ids = HashSet::new();
    for handle in handles.collect::<Vec<_>>() {
        ids.insert(handle.await.unwrap());
    }
    ids
}

#[tokio::test]
async fn sent_mail_is_also_written_to_the_mail_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mail_dir = dir.path().join("sent");
    let fake =
        support::start_with(FakeGmailConfig { mail_dir: Some(mail_dir.clone()), ..FakeGmailConfig::default() }).await;
    let gmail = Gmail::connect(&fake).await;
    let direct = email("<file1@t>", "a@example.com", "Direct");
    let sent = gmail.post("messages/send", &json!({"raw": base64url(&direct)})).await.json();
    let drafted = email("<file2@t>", "a@example.com", "Drafted");
    let draft = gmail.create_draft(&drafted).await;
    assert_eq!(std::fs::read_dir(&mail_dir).unwrap().count(), 1, "a draft is not mail sent");
    gmail.post("drafts/send", &json!({"id": draft["id"]})).await;

    let read = |id: &serde_json::Value| std::fs::read(mail_dir.join(format!("{}.eml", id.as_str().unwrap()))).unwrap();
    assert_eq!(read(&sent["id"]), direct);
    assert_eq!(read(&draft["message"]["id"]), drafted);
    assert_eq!(std::fs::read_dir(&mail_dir).unwrap().count(), 2);
}

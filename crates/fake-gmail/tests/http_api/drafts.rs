use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{self, Gmail, base64url, email, google_error};

#[tokio::test]
async fn a_draft_is_created_read_sent_and_then_gone() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let raw = email("<call-1@gatehouse.test>", "Jane <jane@example.com>", "Hello");

    let draft = gmail.create_draft(&raw).await;
    let draft_id = draft["id"].as_str().unwrap().to_owned();
    let message_id = draft["message"]["id"].as_str().unwrap().to_owned();
    assert!(draft_id.starts_with('r') && draft_id[1..].chars().all(|c| c.is_ascii_digit()), "{draft_id}");
    assert!(message_id.len() == 16 && message_id.chars().all(|c| c.is_ascii_hexdigit()), "{message_id}");
    assert_eq!(draft["message"]["threadId"], message_id.as_str());
    assert_eq!(draft["message"]["labelIds"], json!(["DRAFT"]));

    let read = gmail.get(&format!("drafts/{draft_id}?format=raw")).await;
    assert_eq!(read.status, StatusCode::OK);
    let read = read.json();
    assert_eq!(read["id"], draft_id.as_str());
    assert_eq!(URL_SAFE.decode(read["message"]["raw"].as_str().unwrap()).unwrap(), raw);
    let full = gmail.get(&format!("drafts/{draft_id}")).await.json();
    assert!(full["message"]["raw"].is_null());
    assert_eq!(full["message"]["payload"]["mimeType"], "text/plain");
    assert_eq!(fake.drafts().len(), 1);

    // Like Gmail, the draft's message is searchable, but it is not in:sent yet.
    assert_eq!(gmail.search("rfc822msgid:call-1@gatehouse.test").await, vec![message_id.clone()]);
    assert!(gmail.search("rfc822msgid:call-1@gatehouse.test in:sent").await.is_empty());
    assert_eq!(gmail.search("rfc822msgid:<call-1@gatehouse.test> in:drafts").await, vec![message_id.clone()]);

    let sent = gmail.post("drafts/send", &json!({"id": draft_id})).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    let sent = sent.json();
    assert_eq!(sent["id"], message_id.as_str(), "the draft's message becomes the sent one");
    assert_eq!(sent["labelIds"], json!(["SENT"]));

    google_error(&gmail.get(&format!("drafts/{draft_id}")).await, 404, "NOT_FOUND");
    google_error(&gmail.post("drafts/send", &json!({"id": draft_id})).await, 404, "NOT_FOUND");
    assert!(fake.drafts().is_empty());

    assert_eq!(gmail.search("rfc822msgid:<call-1@gatehouse.test>").await, vec![message_id.clone()]);
    assert_eq!(gmail.search("rfc822msgid:call-1@gatehouse.test in:sent").await, vec![message_id.clone()]);
    assert_eq!(gmail.search("label:sent").await, vec![message_id.clone()]);
    assert!(gmail.search("in:drafts").await.is_empty());
    let by_label = gmail.get("messages?labelIds=SENT").await.json();
    assert_eq!(by_label["messages"][0]["id"], message_id.as_str());

    let stored = fake.sent();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, message_id);
    assert_eq!(stored[0].raw, raw, "the bytes exactly as received");
    assert_eq!(stored[0].label_ids, vec!["SENT"]);
    assert_eq!(stored[0].message_id_header.as_deref(), Some("<call-1@gatehouse.test>"));
}

#[tokio::test]
async fn deleting_a_draft_removes_it_and_its_message() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let draft = gmail.create_draft(&email("<del@t>", "a@example.com", "Bye")).await;
    let draft_id = draft["id"].as_str().unwrap();

    let deleted = gmail.delete(&format!("drafts/{draft_id}")).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(deleted.text.is_empty());
    google_error(&gmail.get(&format!("drafts/{draft_id}")).await, 404, "NOT_FOUND");
    let again = google_error(&gmail.delete(&format!("drafts/{draft_id}")).await, 404, "NOT_FOUND");
    assert_eq!(again["message"], "Requested entity was not found.");

    let listed = gmail.get("messages").await.json();
    assert_eq!(listed, json!({"resultSizeEstimate": 0}), "Gmail leaves `messages` out when there are none");
    assert!(fake.drafts().is_empty() && fake.sent().is_empty());
}

#[tokio::test]
async fn a_draft_without_recipients_is_kept_but_cannot_be_sent() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let raw = b"From: gatehouse@example.com\r\nSubject: Nobody\r\nMessage-ID: <none@t>\r\n\r\nHi\r\n";
    let draft = gmail.create_draft(raw).await;
    let reply = gmail.post("drafts/send", &json!({"id": draft["id"]})).await;
    let error = google_error(&reply, 400, "INVALID_ARGUMENT");
    assert_eq!(error["message"], "Recipient address required");
    assert_eq!(fake.drafts().len(), 1, "a refused send leaves the draft");
    assert!(fake.sent().is_empty());

    let bad_to =
        gmail.post("drafts", &json!({"message": {"raw": base64url(&email("<x@t>", "not an address", "S"))}})).await;
    assert_eq!(google_error(&bad_to, 400, "INVALID_ARGUMENT")["message"], "Invalid To header");
}

#[tokio::test]
async fn raw_is_accepted_in_every_base64_spelling_and_refused_when_broken() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    // Bytes whose encodings differ between the alphabets, and a length that needs padding.
    let mut raw = email("<b64@t>", "a@example.com", "Alphabets");
    raw.extend_from_slice(&[0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe]);
    if raw.len().is_multiple_of(3) {
        raw.push(b'\n');
    }
    assert!(STANDARD.encode(&raw).contains(['+', '/']) && URL_SAFE.encode(&raw).ends_with('='));
    for encoded in [URL_SAFE.encode(&raw), base64url(&raw), STANDARD.encode(&raw)] {
        let reply = gmail.post("drafts", &json!({"message": {"raw": encoded}})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    assert!(fake.drafts().iter().all(|d| d.message.raw == raw));

    let cases = [
        (json!({"message": {"raw": "!!!not base64!!!"}}), "Base64 decoding failed"),
        (json!({"message": {"raw": 42}}), "Invalid value at 'message.raw'"),
        (json!({"message": {}}), "'raw' RFC822 payload"),
        (json!({}), "Missing draft message"),
        (json!({"message": {"Raw": "eA"}}), "Unknown name \"Raw\" at 'message'"),
    ];
    for (body, expected) in cases {
        let reply = gmail.post("drafts", &body).await;
        let error = google_error(&reply, 400, "INVALID_ARGUMENT");
        assert!(error["message"].as_str().unwrap().contains(expected), "{body}: {error}");
    }
    let not_json =
        gmail.send(gmail.http.post(gmail.url("drafts")).header("content-type", "application/json").body("{")).await;
    google_error(&not_json, 400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn drafts_list_answers_newest_first() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    assert_eq!(gmail.get("drafts").await.json(), json!({"resultSizeEstimate": 0}));
    let first = gmail.create_draft(&email("<l1@t>", "a@example.com", "One")).await;
    let second = gmail.create_draft(&email("<l2@t>", "a@example.com", "Two")).await;
    let listed = gmail.get("drafts").await.json();
    assert_eq!(listed["resultSizeEstimate"], 2);
    assert_eq!(listed["drafts"][0]["id"], second["id"]);
    assert_eq!(listed["drafts"][1]["id"], first["id"]);
    assert_eq!(listed["drafts"][1]["message"]["id"], first["message"]["id"]);
}

#[tokio::test]
async fn a_draft_sent_with_new_content_sends_that_content() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let draft = gmail.create_draft(&email("<v1@t>", "a@example.com", "First version")).await;
    let second = email("<v1@t>", "b@example.com", "Second version");
    let reply = gmail.post("drafts/send", &json!({"id": draft["id"], "message": {"raw": base64url(&second)}})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json()["id"], draft["message"]["id"]);
    assert_eq!(fake.sent()[0].raw, second);
}

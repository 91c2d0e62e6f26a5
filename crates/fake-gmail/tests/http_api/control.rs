use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use gatehouse_fake_gmail::{Fault, RequestRecord};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{self, Gmail, base64url, email, google_error};

async fn get_json(url: String) -> Value {
    let response = support::http().get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

async fn post_json(url: String, body: Value) -> (StatusCode, Value) {
    let response = support::http().post(url).json(&body).send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test]
async fn the_control_routes_mirror_the_library() {
    let fake = support::start().await;
    let base = fake.base_url();
    let gmail = Gmail::connect(&fake).await;
    let raw = email("<ctl@t>", "a@example.com", "Control");
    let sent = gmail.post("messages/send", &json!({"raw": base64url(&raw)})).await.json();
    let draft = gmail.create_draft(&email("<ctl-draft@t>", "b@example.com", "Draft")).await;

    let messages = get_json(format!("{base}/_fake/messages")).await;
    assert_eq!(messages.as_array().unwrap().len(), 1);
    let message = &messages[0];
    assert_eq!(message["id"], sent["id"]);
    assert_eq!(message["thread_id"], sent["threadId"]);
    assert_eq!(message["label_ids"], json!(["SENT"]));
    assert_eq!(message["message_id_header"], "<ctl@t>");
    assert_eq!(message["raw"], String::from_utf8(raw.clone()).unwrap());
    assert_eq!(URL_SAFE.decode(message["raw_base64url"].as_str().unwrap()).unwrap(), raw);

    let drafts = get_json(format!("{base}/_fake/drafts")).await;
    assert_eq!(drafts[0]["id"], draft["id"]);
    assert_eq!(drafts[0]["message"]["label_ids"], json!(["DRAFT"]));

    // A fault armed over HTTP, with `times` left to its default of 1.
    let (status, armed) =
        post_json(format!("{base}/_fake/faults"), json!({"operation": "messages.list", "status": 503})).await;
    assert_eq!(status, StatusCode::OK, "{armed}");
    assert_eq!(armed["times"], 1);
    assert_eq!(get_json(format!("{base}/_fake/faults")).await.as_array().unwrap().len(), 1);
    google_error(&gmail.get("messages").await, 503, "UNAVAILABLE");
    assert_eq!(gmail.get("messages").await.status, StatusCode::OK);
    for bad in [
        json!({"operation": "drafts.explode", "status": 500}),
        json!({"operation": "*", "status": 200}),
        json!({"status": 500}),
        json!({"operation": "*", "stauts": 500}),
    ] {
        let (status, body) = post_json(format!("{base}/_fake/faults"), bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} -> {body}");
    }

    let records: Vec<RequestRecord> = serde_json::from_value(get_json(format!("{base}/_fake/requests")).await).unwrap();
    assert_eq!(records, fake.requests()[..records.len()].to_vec());
    let operations: Vec<(&str, u16)> = records.iter().map(|r| (r.operation.as_str(), r.status)).collect();
    assert_eq!(
        operations[..5],
        [
            ("token", 200),
            ("messages.send", 200),
            ("drafts.create", 200),
            ("_fake.messages", 200),
            ("_fake.drafts", 200)
        ]
    );
    assert!(operations.contains(&("messages.list", 503)));
    assert!(records.windows(2).all(|pair| pair[0].at_ms <= pair[1].at_ms));
    assert!(records.iter().all(|r| !r.path.contains('?')));

    let (status, body) = post_json(format!("{base}/_fake/expire-tokens"), json!({})).await;
    assert_eq!((status, body["expired_tokens"].as_u64()), (StatusCode::OK, Some(1)));
    google_error(&gmail.get("messages").await, 401, "UNAUTHENTICATED");

    fake.inject(Fault::status("token", 500));
    let (status, _) = post_json(format!("{base}/_fake/reset"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(fake.sent().is_empty() && fake.drafts().is_empty());
    assert_eq!(get_json(format!("{base}/_fake/faults")).await, json!([]));
    assert_eq!(get_json(format!("{base}/_fake/messages")).await, json!([]));
    let after_reset: Vec<String> = fake.requests().into_iter().map(|r| r.operation).collect();
    assert_eq!(after_reset, ["_fake.reset", "_fake.faults", "_fake.messages"], "the log restarts with the reset");
}

#[tokio::test]
async fn the_dev_view_lists_sent_mail_and_serves_it_raw() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    let raw = email("<view@t>", "<script>@example.com", "=?UTF-8?Q?Caf=C3=A9_<b>bold</b>?=");
    let raw = String::from_utf8(raw)
        .unwrap()
        .replace("To: <script>@example.com", "To: \"<i>x</i>\" <x@example.com>")
        .into_bytes();
    let sent = gmail.post("messages/send", &json!({"raw": base64url(&raw)})).await.json();
    let id = sent["id"].as_str().unwrap();

    let page = support::http().get(format!("{}/", fake.base_url())).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains("Café &lt;b&gt;bold&lt;/b&gt;"), "{html}");
    assert!(html.contains("&quot;&lt;i&gt;x&lt;/i&gt;&quot; &lt;x@example.com&gt;"), "{html}");
    assert!(html.contains(&format!("href=\"/_fake/messages/{id}.eml\"")));
    assert!(!html.contains("<b>bold"));

    let eml = support::http().get(format!("{}/_fake/messages/{id}.eml", fake.base_url())).send().await.unwrap();
    assert_eq!(eml.status(), StatusCode::OK);
    assert_eq!(eml.headers()["content-type"], "message/rfc822");
    assert_eq!(eml.bytes().await.unwrap().to_vec(), raw);
    let missing =
        support::http().get(format!("{}/_fake/messages/0000000000000000.eml", fake.base_url())).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn unknown_paths_answer_a_json_404() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    for url in [format!("{}/nowhere", fake.base_url()), gmail.url("labels"), format!("{}/token", fake.base_url())] {
        let reply = gmail.send(gmail.http.get(url.clone())).await;
        google_error(&reply, 404, "NOT_FOUND");
    }
    let update = gmail.send(gmail.http.put(gmail.url("drafts/r1")).json(&json!({}))).await;
    google_error(&update, 404, "NOT_FOUND");
    assert!(fake.requests().iter().filter(|r| r.operation == "unknown").count() >= 4);
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_pooled_connections() {
    let fake = support::start().await;
    let client = support::http();
    let url = format!("{}/_fake/messages", fake.base_url());
    assert_eq!(client.get(&url).send().await.unwrap().status(), StatusCode::OK);
    fake.shutdown().await;
    assert!(client.get(&url).send().await.is_err(), "the keep-alive connection is gone as well");
    assert!(support::http().get(&url).send().await.is_err());
}

#[tokio::test]
async fn dropping_the_fake_stops_it() {
    let fake = support::start().await;
    let url = format!("{}/_fake/messages", fake.base_url());
    drop(fake);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(support::http().get(&url).send().await.is_err());
}

use std::time::Duration;

use base64::Engine;
use gatehouse_fake_gmail::{Credentials, FakeGmailConfig};
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{self, DEV_GRANT, Gmail, google_error, token_request};

#[tokio::test]
async fn the_refresh_grant_answers_a_bearer_token() {
    let fake = support::start().await;
    let (status, headers, body) = token_request(&fake, DEV_GRANT).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["access_token"].as_str().unwrap().starts_with("ya29."));
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["token_type"], "Bearer");
    let scopes: Vec<&str> = body["scope"].as_str().unwrap().split(' ').collect();
    assert!(scopes.contains(&"https://www.googleapis.com/auth/gmail.compose"));
    assert!(scopes.contains(&"https://www.googleapis.com/auth/gmail.send"));
    assert!(headers["cache-control"].to_str().unwrap().contains("no-store"));
    let (_, _, again) = token_request(&fake, DEV_GRANT).await;
    assert_ne!(again["access_token"], body["access_token"], "each grant issues a new token");
}

#[tokio::test]
async fn the_grant_refuses_what_google_refuses() {
    let config = FakeGmailConfig {
        credentials: Credentials {
            client_id: "id-1".into(),
            client_secret: "secret-1".into(),
            refresh_token: "rt-1".into(),
        },
        ..FakeGmailConfig::default()
    };
    let fake = support::start_with(config).await;
    type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);
    let cases: &[Case] = &[
        (
            &[
                ("grant_type", "refresh_token"),
                ("client_id", "id-1"),
                ("client_secret", "nope"),
                ("refresh_token", "rt-1"),
            ],
            401,
            "invalid_client",
        ),
        (
            &[
                ("grant_type", "refresh_token"),
                ("client_id", "id-2"),
                ("client_secret", "secret-1"),
                ("refresh_token", "rt-1"),
            ],
            401,
            "invalid_client",
        ),
        (
            &[
                ("grant_type", "refresh_token"),
                ("client_id", "id-1"),
                ("client_secret", "secret-1"),
                ("refresh_token", "rt-2"),
            ],
            400,
            "invalid_grant",
        ),
        (
            &[("grant_type", "refresh_token"), ("client_id", "id-1"), ("client_secret", "secret-1")],
            400,
            "invalid_request",
        ),
        (
            &[("grant_type", "refresh_token"), ("client_secret", "secret-1"), ("refresh_token", "rt-1")],
            400,
            "invalid_request",
        ),
        (
            &[("grant_type", "password"), ("client_id", "id-1"), ("client_secret", "secret-1")],
            400,
            "unsupported_grant_type",
        ),
        (
            &[("client_id", "id-1"), ("client_secret", "secret-1"), ("refresh_token", "rt-1")],
            400,
            "unsupported_grant_type",
        ),
    ];
    for (pairs, code, error) in cases {
        let (status, _, body) = token_request(&fake, pairs).await;
        assert_eq!(status.as_u16(), *code, "{pairs:?}: {body}");
        assert_eq!(body["error"], *error, "{pairs:?}: {body}");
        assert!(body["error_description"].is_string());
        let text = body.to_string();
        assert!(!text.contains("secret-1") && !text.contains("rt-1"), "no credential echoed: {text}");
    }
    let (status, _, body) = token_request(
        &fake,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", "id-1"),
            ("client_secret", "secret-1"),
            ("refresh_token", "rt-1"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn client_credentials_may_come_as_basic_auth() {
    let fake = support::start().await;
    let basic = base64::engine::general_purpose::STANDARD.encode("fake-client-id:fake-client-secret");
    let response = support::http()
        .post(fake.token_url())
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(support::form(&[("grant_type", "refresh_token"), ("refresh_token", "fake-refresh-token")]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_token_stops_working_once_its_ttl_has_passed() {
    let config = FakeGmailConfig { token_ttl: Duration::from_millis(800), ..FakeGmailConfig::default() };
    let fake = support::start_with(config).await;
    let (_, _, body) = token_request(&fake, DEV_GRANT).await;
    assert_eq!(body["expires_in"], 1, "whole seconds, rounded up");
    let gmail = Gmail::connect(&fake).await;
    assert_eq!(gmail.get("drafts").await.status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let reply = gmail.get("drafts").await;
    let error = google_error(&reply, 401, "UNAUTHENTICATED");
    assert_eq!(error["errors"][0]["reason"], "authError");
    assert!(reply.header("www-authenticate").unwrap().contains("invalid_token"));
}

#[tokio::test]
async fn expire_tokens_ends_every_token_issued_so_far() {
    let fake = support::start().await;
    let first = Gmail::connect(&fake).await;
    let second = Gmail::connect(&fake).await;
    fake.expire_tokens();
    google_error(&first.get("drafts").await, 401, "UNAUTHENTICATED");
    google_error(&second.get("drafts").await, 401, "UNAUTHENTICATED");
    let renewed = Gmail::connect(&fake).await;
    assert_eq!(renewed.get("drafts").await.status, StatusCode::OK);
}

#[tokio::test]
async fn gmail_routes_need_a_bearer_token() {
    let fake = support::start().await;
    let url = format!("{}/gmail/v1/users/me/messages", fake.base_url());
    let missing = support::http().get(&url).send().await.unwrap();
    let challenge = missing.headers()["www-authenticate"].to_str().unwrap().to_owned();
    let body: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], 401);
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
    assert!(
        body["error"]["message"].as_str().unwrap().starts_with("Request is missing required authentication credential")
    );
    assert!(challenge.starts_with("Bearer realm="));

    for header in ["Bearer not-a-token", "Basic Zm9vOmJhcg=="] {
        let response = support::http().get(&url).header("authorization", header).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().starts_with("Request had invalid authentication credentials")
        );
        assert_eq!(body["error"]["errors"][0]["message"], "Invalid Credentials");
    }
    let token = support::access_token(&fake).await;
    let by_parameter = support::http().get(&url).query(&[("access_token", token)]).send().await.unwrap();
    assert_eq!(by_parameter.status(), StatusCode::OK);
}

#[tokio::test]
async fn only_the_own_mailbox_is_reachable() {
    let fake = support::start().await;
    let gmail = Gmail::connect(&fake).await;
    for user in ["me", "gatehouse%40example.com", "Gatehouse@Example.com"] {
        let url = format!("{}/gmail/v1/users/{user}/messages", fake.base_url());
        assert_eq!(gmail.send(gmail.http.get(url)).await.status, StatusCode::OK, "{user}");
    }
    let url = format!("{}/gmail/v1/users/someone@example.com/messages", fake.base_url());
    let reply = gmail.send(gmail.http.get(url)).await;
    let error = google_error(&reply, 403, "PERMISSION_DENIED");
    assert_eq!(error["message"], "Delegation denied for someone@example.com");
}

#[tokio::test]
async fn each_method_checks_the_token_scopes_as_gmail_does() {
    let fake = support::start().await;
    let narrowed = [
        DEV_GRANT,
        &[("scope", "https://www.googleapis.com/auth/gmail.compose https://www.googleapis.com/auth/gmail.send")],
    ]
    .concat();
    let (status, _, body) = token_request(&fake, &narrowed).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["scope"],
        "https://www.googleapis.com/auth/gmail.compose https://www.googleapis.com/auth/gmail.send"
    );
    let gmail = Gmail { token: body["access_token"].as_str().unwrap().to_owned(), ..Gmail::connect(&fake).await };

    let draft = gmail.create_draft(&support::email("<s@t>", "a@example.com", "Scopes")).await;
    assert_eq!(gmail.get(&format!("drafts/{}", draft["id"].as_str().unwrap())).await.status, StatusCode::OK);
    let reply = gmail.get("messages?q=rfc822msgid%3As%40t").await;
    let error = google_error(&reply, 403, "PERMISSION_DENIED");
    assert_eq!(error["message"], "Request had insufficient authentication scopes.");
    assert_eq!(error["errors"][0]["reason"], "insufficientPermissions");
    assert!(reply.header("www-authenticate").unwrap().contains("insufficient_scope"));
    let id = draft["message"]["id"].as_str().unwrap();
    google_error(&gmail.get(&format!("messages/{id}")).await, 403, "PERMISSION_DENIED");

    let widened = [DEV_GRANT, &[("scope", "https://mail.google.com/")]].concat();
    let (status, _, body) = token_request(&fake, &widened).await;
    assert_eq!((status.as_u16(), body["error"].clone()), (400, json!("invalid_scope")));
}

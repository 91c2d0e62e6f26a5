use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_fake_gmail::{FakeGmail, FakeGmailConfig};
use reqwest::StatusCode;
use serde_json::Value;

pub async fn start() -> FakeGmail {
    start_with(FakeGmailConfig::default()).await
}

pub async fn start_with(config: FakeGmailConfig) -> FakeGmail {
    FakeGmail::start("127.0.0.1:0".parse().unwrap(), config).await.unwrap()
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// POSTs a form to the token endpoint.
pub async fn token_request(
    fake: &FakeGmail,
    pairs: &[(&str, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = http()
        .post(fake.token_url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap())
}

pub const DEV_GRANT: &[(&str, &str)] = &[
    ("grant_type", "refresh_token"),
    ("client_id", "fake-client-id"),
    ("client_secret", "fake-client-secret"),
    ("refresh_token", "fake-refresh-token"),
];

pub async fn access_token(fake: &FakeGmail) -> String {
    let (status, _, body) = token_request(fake, DEV_GRANT).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_owned()
}

/// A plain-text message as the gmail component builds one.
pub fn email(message_id: &str, to: &str, subject: &str) -> Vec<u8> {
    format!(
        "From: gatehouse@example.com\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: {message_id}\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello from the test.\r\n"
    )
    .into_bytes()
}

pub fn base64url(raw: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(raw)
}

/// A Gmail API client holding a valid access token.
pub struct Gmail {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Gmail {
    pub async fn connect(fake: &FakeGmail) -> Gmail {
        Gmail { http: http(), base: fake.base_url(), token: access_token(fake).await }
    }

    pub fn url(&self, tail: &str) -> String {
        format!("{}/gmail/v1/users/me/{tail}", self.base)
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.bearer_auth(&self.token).send().await.unwrap();
        Reply { status: response.status(), headers: response.headers().clone(), text: response.text().await.unwrap() }
    }

    pub async fn get(&self, tail: &str) -> Reply {
        self.send(self.http.get(self.url(tail))).await
    }

    pub async fn post(&self, tail: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(tail)).json(body)).await
    }

    pub async fn delete(&self, tail: &str) -> Reply {
        self.send(self.http.delete(self.url(tail))).await
    }

    pub async fn create_draft(&self, raw: &[u8]) -> Value {
        let reply = self.post("drafts", &serde_json::json!({"message": {"raw": base64url(raw)}})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        reply.json()
    }

    /// The ids messages.list answers for `q`, newest first.
    pub async fn search(&self, q: &str) -> Vec<String> {
        let reply = self.send(self.http.get(self.url("messages")).query(&[("q", q)])).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        let body = reply.json();
        let ids: Vec<String> = body["messages"]
            .as_array()
            .map(|list| list.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        assert_eq!(body["resultSizeEstimate"].as_u64(), Some(ids.len() as u64));
        ids
    }
}

/// Checks Google's error shape and returns its `error` object.
pub fn google_error(reply: &Reply, code: u16, status: &str) -> Value {
    assert_eq!(reply.status.as_u16(), code, "{}", reply.text);
    let body = reply.json();
    let error = body["error"].clone();
    assert_eq!(error["code"], code, "{body}");
    assert_eq!(error["status"], status, "{body}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(error["errors"][0]["reason"].is_string(), "{body}");
    assert!(reply.header("content-type").unwrap().starts_with("application/json"));
    error
}

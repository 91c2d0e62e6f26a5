//! The tool contract spoken to the tool under check: signed (or, for the signature rules, not),
//! every request cut at the kit's timeout, and every late one remembered.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_domain::service_auth;
use reqwest::{Method, Url};
use serde_json::{Value, json};

use crate::{Kit, KitError};

/// How a request is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signing {
    /// With the kit's secret (when it has one).
    Valid,
    /// Not at all.
    Unsigned,
    /// With a key that is not the secret.
    WrongKey,
}

/// An answer: its status and JSON body (`Null` when it is not JSON).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    /// A short account of the answer for a reason: the status and the body, cut.
    pub fn told(&self) -> String {
        let mut body = self.body.to_string();
        if body.len() > 160 {
            let cut = (0..=160).rev().find(|&i| body.is_char_boundary(i)).unwrap_or(0);
            body.truncate(cut);
            body.push('…');
        }
        format!("HTTP {} {body}", self.status)
    }
}

pub(crate) struct Contract {
    http: reqwest::Client,
    base: Url,
    secret: Option<String>,
    timeout: Duration,
    late: Mutex<Vec<String>>,
}

impl Contract {
    pub fn new(kit: &Kit) -> Result<Contract, KitError> {
        let base = Url::parse(kit.base_url.trim_end_matches('/'))
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .ok_or_else(|| KitError::NotAUrl(kit.base_url.clone()))?;
        let http = reqwest::Client::builder().build().map_err(|e| KitError::Client(e.to_string()))?;
        Ok(Contract {
            http,
            base,
            secret: kit.secret.clone().filter(|secret| !secret.is_empty()),
            timeout: kit.timeout,
            late: Mutex::new(Vec::new()),
        })
    }

    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// `GET /tool/describe`, signed.
    pub async fn describe(&self) -> Result<Answer, String> {
        let request = self.request(Method::GET, "describe", Vec::new(), Signing::Valid)?;
        self.send("describe", request).await
    }

    /// `POST /tool/<operation>` with `body`.
    pub async fn post(&self, operation: &str, body: &Value, signing: Signing) -> Result<Answer, String> {
        let request = self.request(Method::POST, operation, body.to_string().into_bytes(), signing)?;
        self.send(operation, request).await
    }

    /// The same signed request sent twice: the two answers.
    pub async fn post_twice(&self, operation: &str, body: &Value) -> Result<(Answer, Answer), String> {
        let request = self.request(Method::POST, operation, body.to_string().into_bytes(), Signing::Valid)?;
        let again = request.try_clone().ok_or("the request cannot be copied")?;
        Ok((self.send(operation, request).await?, self.send(operation, again).await?))
    }

    fn request(
        &self,
        method: Method,
        operation: &str,
        body: Vec<u8>,
        signing: Signing,
    ) -> Result<reqwest::Request, String> {
        let url = format!("{}/tool/{operation}", self.base.as_str().trim_end_matches('/'));
        let url = Url::parse(&url).map_err(|e| format!("{url}: {e}"))?;
        let key = match (signing, &self.secret) {
            (Signing::Valid, Some(secret)) => Some(secret.clone()),
            (Signing::WrongKey, _) => Some("not-the-contract-secret".to_owned()),
            (Signing::Valid | Signing::Unsigned, _) => None,
        };
        let mut builder = self.http.request(method.clone(), url.clone()).header("content-type", "application/json");
        if let Some(key) = key {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let signature = service_auth::sign(key.as_bytes(), now, &nonce(), method.as_str(), url.path(), &body);
            builder = builder.header(service_auth::SIGNATURE_HEADER, signature);
        }
        builder.timeout(self.timeout).body(body).build().map_err(|e| e.to_string())
    }

    async fn send(&self, operation: &str, request: reqwest::Request) -> Result<Answer, String> {
        match self.http.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.bytes().await.map_err(|e| format!("{operation}: reading the answer: {e}"))?;
                Ok(Answer { status, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
            }
            Err(error) if error.is_timeout() => {
                let late = format!("{operation} (no answer within {} ms)", self.timeout.as_millis());
                if let Ok(mut all) = self.late.lock() {
                    all.push(late.clone());
                }
                Err(late)
            }
            Err(error) => Err(format!("{operation}: {error}")),
        }
    }

    /// The operations that were cut at the timeout.
    pub fn late(&self) -> Vec<String> {
        self.late.lock().map(|late| late.clone()).unwrap_or_default()
    }
}

/// A request about call `id` with `parameters`, the checkpoint `prepare` made, if any.
pub(crate) fn on_call(id: &str, parameters: &Value, checkpoint: &Value) -> Value {
    let mut request = json!({"tool_call_id": id, "session_id": "conformance", "parameters": parameters, "attempt": 1});
    if !checkpoint.is_null() {
        request["checkpoint"] = checkpoint.clone();
    }
    request
}

/// A call id no tool has seen: `tc_` and twelve hexadecimal digits, as Gatehouse makes them.
pub(crate) fn new_call_id() -> String {
    format!("tc_{}", random_hex(6))
}

fn nonce() -> String {
    random_hex(16)
}

fn random_hex(bytes: usize) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut buffer = vec![0u8; bytes];
    if getrandom::fill(&mut buffer).is_err() {
        // No system randomness: the clock and a counter still make each id and nonce new.
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let seed = (nanos as u64) ^ COUNT.fetch_add(1, Ordering::Relaxed).rotate_left(32);
        for (i, byte) in buffer.iter_mut().enumerate() {
            *byte = seed.rotate_right(8 * (i as u32 % 8)) as u8;
        }
    }
    hex::encode(buffer)
}

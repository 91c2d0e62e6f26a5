//! The tool contract spoken to the tool under check: signed (or, for the signature rules, not),
//! every request cut at the kit's timeout, and every late one remembered.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_domain::service_auth;
use gatehouse_domain::signing::{self, SignedRequest};
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
    /// How the kit signed the request, kept for a 401: the tool refused the signature, and its
    /// author needs the recipe to compare with their own.
    pub signed_as: Option<Signature>,
}

impl Answer {
    /// A short account of the answer for a reason: the status and the body, cut; for a 401 to a
    /// signed request, the recipe the kit signed it by.
    pub fn told(&self) -> String {
        let told = format!("HTTP {} {}", self.status, cut(self.body.to_string(), 160));
        match (&self.signed_as, self.status) {
            (Some(signature), 401 | 403) => format!("{told}; {}", signature.recipe()),
            _ => told,
        }
    }
}

pub(crate) fn cut(mut text: String, at: usize) -> String {
    if text.len() > at {
        let end = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(end);
        text.push('…');
    }
    text
}

/// A signature the kit made: the header and the content its MAC is over
/// (`gatehouse_domain::signing`, the recipe openapi/signing-test-vector.json publishes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    /// The header it went in: the contract's, or a declared tool's backend's.
    pub header_name: &'static str,
    pub header: String,
    pub content: Vec<u8>,
}

impl Signature {
    /// `key` over the request to `url`: the target signed is the URL's path and query, as the
    /// tool sees them in the request line.
    pub fn new(key: &str, now: u64, nonce: &str, method: &str, url: &Url, idempotency_key: &str, body: &[u8]) -> Self {
        let target = signing::target_of(url.as_str());
        let request = SignedRequest { method, target: &target, idempotency_key, body };
        Signature {
            header_name: service_auth::SIGNATURE_HEADER,
            header: signing::sign_with_each(&[key.as_bytes()], now, nonce, &request),
            content: signing::content(now, nonce, &request),
        }
    }

    /// What the kit did, for the author of a tool that refused it (never the secret).
    pub fn recipe(&self) -> String {
        let content = cut(String::from_utf8_lossy(&self.content).into_owned(), 300);
        format!(
            "the kit signed it {}: {}, where v1 = hex HMAC-SHA256(secret, content) and content = \"{}\" \
             (t \".\" nonce LF METHOD SP path LF Idempotency-Key LF body; docs/tools.md, \"Signatures\")",
            self.header_name,
            self.header,
            content.escape_debug()
        )
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
        let (request, signed_as) = self.request(Method::GET, "describe", Vec::new(), Signing::Valid)?;
        self.send("describe", request, signed_as).await
    }

    /// `POST /tool/<operation>` with `body`.
    pub async fn post(&self, operation: &str, body: &Value, signing: Signing) -> Result<Answer, String> {
        let (request, signed_as) = self.request(Method::POST, operation, body.to_string().into_bytes(), signing)?;
        self.send(operation, request, signed_as).await
    }

    /// The same signed request sent twice: the two answers.
    pub async fn post_twice(&self, operation: &str, body: &Value) -> Result<(Answer, Answer), String> {
        let (request, signed_as) =
            self.request(Method::POST, operation, body.to_string().into_bytes(), Signing::Valid)?;
        let again = request.try_clone().ok_or("the request cannot be copied")?;
        Ok((self.send(operation, request, signed_as.clone()).await?, self.send(operation, again, signed_as).await?))
    }

    fn request(
        &self,
        method: Method,
        operation: &str,
        body: Vec<u8>,
        signing: Signing,
    ) -> Result<(reqwest::Request, Option<Signature>), String> {
        let url = format!("{}/tool/{operation}", self.base.as_str().trim_end_matches('/'));
        let url = Url::parse(&url).map_err(|e| format!("{url}: {e}"))?;
        let key = match (signing, &self.secret) {
            (Signing::Valid, Some(secret)) => Some(secret.clone()),
            (Signing::WrongKey, _) => Some("not-the-contract-secret".to_owned()),
            (Signing::Valid | Signing::Unsigned, _) => None,
        };
        let mut builder = self.http.request(method.clone(), url.clone()).header("content-type", "application/json");
        // The contract's requests carry no Idempotency-Key, so the signature binds an empty one.
        let signed_as = key.map(|key| Signature::new(&key, unix_now(), &nonce(), method.as_str(), &url, "", &body));
        if let Some(signature) = &signed_as {
            builder = builder.header(service_auth::SIGNATURE_HEADER, signature.header.clone());
        }
        let request = builder.timeout(self.timeout).body(body).build().map_err(|e| e.to_string())?;
        Ok((request, signed_as))
    }

    async fn send(
        &self,
        operation: &str,
        request: reqwest::Request,
        signed_as: Option<Signature>,
    ) -> Result<Answer, String> {
        match self.http.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.bytes().await.map_err(|e| format!("{operation}: reading the answer: {e}"))?;
                Ok(Answer { status, body: serde_json::from_slice(&body).unwrap_or(Value::Null), signed_as })
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

/// A signature's nonce: fresh for every request the kit signs.
pub(crate) fn nonce() -> String {
    random_hex(16)
}

/// The clock a signature's `t` is read from.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The kit signs the docs' test vector (openapi/signing-test-vector.json) to the header the
    /// docs publish, and prints that recipe when a tool answers 401.
    #[test]
    fn the_kit_signs_the_published_test_vector() {
        let vector: Value = serde_json::from_str(include_str!("../../../openapi/signing-test-vector.json"))
            .unwrap_or_else(|e| panic!("openapi/signing-test-vector.json: {e}"));
        let text = |name: &str| vector[name].as_str().unwrap_or_else(|| panic!("no {name}")).to_owned();
        let url = Url::parse(&format!("https://tools.example.com{}", text("target")))
            .unwrap_or_else(|e| panic!("the vector's target: {e}"));
        let signature = Signature::new(
            &text("secret"),
            vector["timestamp"].as_u64().unwrap_or_default(),
            &text("nonce"),
            &text("method"),
            &url,
            &text("idempotency_key"),
            text("body").as_bytes(),
        );
        assert_eq!(signature.header, text("header"));
        assert_eq!(signature.content, text("content").into_bytes());

        let refused = Answer {
            status: 401,
            body: json!({"error": "no", "code": "signature_mismatch"}),
            signed_as: Some(signature.clone()),
        };
        let told = refused.told();
        assert!(told.contains("signature_mismatch") && told.contains(&text("header")), "{told}");
        assert!(told.contains(r"DELETE /holds/H4?notify=false\n"), "the content, LF shown: {told}");
        assert!(!told.contains(&text("secret")), "never the secret: {told}");
        let accepted = Answer { status: 200, ..refused };
        assert!(!accepted.told().contains("HMAC"), "the recipe only for a 401");
    }
}

//! The Gmail REST API v1, as far as this tool needs it: drafts, sending, and the search that
//! tells whether a message went out.
//!
//! Retries are bounded and never blind. A 401 gets a new token and one more try; a 429 waits
//! for `Retry-After`. Both mean the request was not carried out. A 5xx or a lost answer is
//! retried only for requests that are safe to repeat; for a send, the caller must first find
//! out what happened (`GmailError::Uncertain`).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_platform::{Method, OutboundResponse};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::GmailConfig;
use crate::error::GmailError;
use crate::oauth::TokenSource;
use crate::percent::percent_encode;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const MAX_ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// A `Retry-After` longer than this is not waited out: the caller is on the phone.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(20);

/// Whether repeating a request whose answer was lost could do something twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Safe,
    Unsafe,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRef {
    pub id: String,
    #[serde(default)]
    pub thread_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Draft {
    pub id: String,
    pub message: MessageRef,
}

pub struct Gmail<'a> {
    config: &'a GmailConfig,
    tokens: TokenSource<'a>,
}

impl<'a> Gmail<'a> {
    pub fn new(config: &'a GmailConfig) -> Gmail<'a> {
        Gmail { config, tokens: TokenSource::new(config) }
    }

    /// `drafts.create`. Not safe to repeat blind: it would leave a second draft.
    pub async fn create_draft(&self, raw: &[u8]) -> Result<Draft, GmailError> {
        let body = json!({"message": {"raw": URL_SAFE_NO_PAD.encode(raw)}});
        decode(self.call(Method::Post, "drafts", Some(body), Repeat::Unsafe).await?)
    }

    /// `drafts.get`; `None` once the draft was sent or deleted.
    pub async fn get_draft(&self, draft_id: &str) -> Result<Option<Draft>, GmailError> {
        let path = format!("drafts/{}?format=minimal", percent_encode(draft_id));
        match self.call(Method::Get, &path, None, Repeat::Safe).await {
            Ok(value) => decode(value).map(Some),
            Err(GmailError::NotFound) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// `drafts.send`: the irreversible step.
    pub async fn send_draft(&self, draft_id: &str) -> Result<MessageRef, GmailError> {
        decode(self.call(Method::Post, "drafts/send", Some(json!({"id": draft_id})), Repeat::Unsafe).await?)
    }

    /// `drafts.delete`; false if there was no such draft.
    pub async fn delete_draft(&self, draft_id: &str) -> Result<bool, GmailError> {
        let path = format!("drafts/{}", percent_encode(draft_id));
        match self.call(Method::Delete, &path, None, Repeat::Safe).await {
            Ok(_) => Ok(true),
            Err(GmailError::NotFound) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// `messages.send` of a whole message, for a call whose draft is gone before any send.
    pub async fn send_message(&self, raw: &[u8]) -> Result<MessageRef, GmailError> {
        let body = json!({"raw": URL_SAFE_NO_PAD.encode(raw)});
        decode(self.call(Method::Post, "messages/send", Some(body), Repeat::Unsafe).await?)
    }

    /// The sent message with this `Message-ID` header, if it went out.
    pub async fn find_sent(&self, message_id: &str) -> Result<Option<MessageRef>, GmailError> {
        let query = format!("rfc822msgid:{} in:sent", message_id.trim_matches(['<', '>']));
        let path = format!("messages?maxResults=1&q={}", percent_encode(&query));
        #[derive(Deserialize)]
        struct Listed {
            #[serde(default)]
            messages: Vec<MessageRef>,
        }
        let listed: Listed = decode(self.call(Method::Get, &path, None, Repeat::Safe).await?)?;
        Ok(listed.messages.into_iter().next())
    }

    /// The draft whose message has this `Message-ID`, if one exists.
    pub async fn find_draft(&self, message_id: &str) -> Result<Option<Draft>, GmailError> {
        let query = format!("rfc822msgid:{}", message_id.trim_matches(['<', '>']));
        let path = format!("drafts?maxResults=1&q={}", percent_encode(&query));
        #[derive(Deserialize)]
        struct Listed {
            #[serde(default)]
            drafts: Vec<Draft>,
        }
        let listed: Listed = decode(self.call(Method::Get, &path, None, Repeat::Safe).await?)?;
        Ok(listed.drafts.into_iter().next())
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>, repeat: Repeat) -> Result<Value, GmailError> {
        let sender = percent_encode(self.config.sender.as_str());
        let url = format!("{}/gmail/v1/users/{sender}/{path}", self.config.api_base_url);
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let mut refreshed = false;
        let mut backoff = FIRST_BACKOFF;
        let mut last_problem = String::new();
        for attempt in 1..=MAX_ATTEMPTS {
            let token = self.tokens.token().await?;
            let authorization = format!("Bearer {token}");
            let headers = [("authorization", authorization.as_str()), ("content-type", "application/json")];
            let sent = gatehouse_platform::send(method.clone(), &url, &headers, body.clone(), REQUEST_TIMEOUT).await;
            let answer = match sent {
                Ok(answer) => answer,
                Err(failure) if repeat == Repeat::Unsafe => return Err(GmailError::Uncertain(failure.to_string())),
                Err(failure) => {
                    last_problem = failure.to_string();
                    wait(&mut backoff, None, attempt).await;
                    continue;
                }
            };
            match answer.status {
                200..=299 => return Ok(serde_json::from_slice(&answer.body).unwrap_or(Value::Null)),
                401 if !refreshed => {
                    refreshed = true;
                    self.tokens.refresh().await?;
                }
                401 => return Err(GmailError::Credentials("Gmail refused a freshly issued access token".into())),
                404 => return Err(GmailError::NotFound),
                429 => {
                    last_problem = "Gmail answered HTTP 429 (rate limited)".into();
                    let retry_after = retry_after(&answer);
                    if retry_after.is_some_and(|wait| wait > MAX_RETRY_AFTER) {
                        return Err(GmailError::Unavailable(format!("{last_problem}, retry after {retry_after:?}")));
                    }
                    wait(&mut backoff, retry_after, attempt).await;
                }
                500..=599 if repeat == Repeat::Unsafe => {
                    return Err(GmailError::Uncertain(format!("Gmail answered HTTP {}", answer.status)));
                }
                500..=599 => {
                    last_problem = format!("Gmail answered HTTP {}", answer.status);
                    wait(&mut backoff, retry_after(&answer), attempt).await;
                }
                status => return Err(GmailError::Refused { status, message: google_message(&answer) }),
            }
        }
        Err(GmailError::Unavailable(last_problem))
    }
}

/// Waits before the next attempt, unless there is none.
async fn wait(backoff: &mut Duration, retry_after: Option<Duration>, attempt: u32) {
    if attempt >= MAX_ATTEMPTS {
        return;
    }
    gatehouse_platform::sleep(retry_after.unwrap_or(*backoff).min(MAX_RETRY_AFTER)).await;
    *backoff *= 2;
}

/// `Retry-After` in seconds (Google sends seconds, not a date).
fn retry_after(answer: &OutboundResponse) -> Option<Duration> {
    answer.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok()).map(Duration::from_secs)
}

/// The message of Google's error shape `{"error": {"code", "message", "status"}}`.
fn google_message(answer: &OutboundResponse) -> String {
    serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "no error message".into())
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, GmailError> {
    serde_json::from_value(value).map_err(|e| GmailError::Unavailable(format!("an unexpected answer from Gmail: {e}")))
}

//! Access tokens by the OAuth 2.0 refresh-token grant (RFC 6749 §6), cached until they
//! expire: in this instance, and sealed in `credential_cache` for the next request.

use std::cell::RefCell;
use std::time::Duration;

use gatehouse_platform::Method;
use serde::Deserialize;

use crate::config::GmailConfig;
use crate::error::GmailError;
use crate::percent::percent_encode;
use crate::seal;

/// A cached token is not used in its last minute, so it cannot expire in flight.
const EXPIRY_MARGIN_SECONDS: f64 = 60.0;
const GRANT_TIMEOUT: Duration = Duration::from_secs(10);
const GRANT_ATTEMPTS: u32 = 3;

#[derive(Deserialize)]
struct Grant {
    access_token: String,
    #[serde(default = "an_hour")]
    expires_in: f64,
}

fn an_hour() -> f64 {
    3600.0
}

pub struct TokenSource<'a> {
    config: &'a GmailConfig,
    current: RefCell<Option<String>>,
}

impl<'a> TokenSource<'a> {
    pub fn new(config: &'a GmailConfig) -> TokenSource<'a> {
        TokenSource { config, current: RefCell::new(None) }
    }

    /// A token believed valid: this instance's, the cached one, or a new grant.
    pub async fn token(&self) -> Result<String, GmailError> {
        if let Some(token) = self.current.borrow().clone() {
            return Ok(token);
        }
        if let Some(token) = self.cached() {
            *self.current.borrow_mut() = Some(token.clone());
            return Ok(token);
        }
        self.refresh().await
    }

    /// A new token, replacing one the API refused.
    pub async fn refresh(&self) -> Result<String, GmailError> {
        let key = seal::cache_key(self.config);
        if let Ok(db) = gatehouse_platform::open_db() {
            let _ = gatehouse_store::forget_credential(&db, &key);
        }
        let grant = self.grant().await?;
        *self.current.borrow_mut() = Some(grant.access_token.clone());
        // Caching is an optimisation: without it every request asks for a token, which works.
        let cached = seal::seal(self.config, &grant.access_token).and_then(|sealed| {
            let db = gatehouse_platform::open_db().ok()?;
            gatehouse_store::cache_credential(&db, &key, &sealed, grant.expires_in).ok()
        });
        if cached.is_none() {
            gatehouse_platform::log_line("warn", "could not cache the Gmail access token");
        }
        Ok(grant.access_token)
    }

    fn cached(&self) -> Option<String> {
        let db = gatehouse_platform::open_db().ok()?;
        let sealed =
            gatehouse_store::cached_credential(&db, &seal::cache_key(self.config), EXPIRY_MARGIN_SECONDS).ok()??;
        seal::open(self.config, &sealed)
    }

    async fn grant(&self) -> Result<Grant, GmailError> {
        let form = format!(
            "grant_type=refresh_token&client_id={}&client_secret={}&refresh_token={}",
            percent_encode(&self.config.client_id),
            percent_encode(&self.config.client_secret),
            percent_encode(&self.config.refresh_token)
        );
        let headers = [("content-type", "application/x-www-form-urlencoded"), ("accept", "application/json")];
        let mut last_problem = String::new();
        for attempt in 1..=GRANT_ATTEMPTS {
            let sent = gatehouse_platform::send(
                Method::Post,
                &self.config.token_url,
                &headers,
                form.clone().into_bytes(),
                GRANT_TIMEOUT,
            )
            .await;
            match sent {
                Ok(answer) if answer.is_success() => {
                    return serde_json::from_slice(&answer.body)
                        .map_err(|e| GmailError::Credentials(format!("the token endpoint's answer: {e}")));
                }
                // A refused grant does not get better by asking again.
                Ok(answer) if (400..500).contains(&answer.status) && answer.status != 429 => {
                    let error = serde_json::from_slice::<serde_json::Value>(&answer.body)
                        .ok()
                        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                        .unwrap_or_default();
                    return Err(GmailError::Credentials(format!(
                        "the token endpoint refused the grant: HTTP {} {error}",
                        answer.status
                    )));
                }
                Ok(answer) => last_problem = format!("the token endpoint answered HTTP {}", answer.status),
                Err(failure) => last_problem = format!("the token endpoint: {failure}"),
            }
            if attempt < GRANT_ATTEMPTS {
                gatehouse_platform::sleep(Duration::from_millis(250 << attempt)).await;
            }
        }
        Err(GmailError::Unavailable(last_problem))
    }
}

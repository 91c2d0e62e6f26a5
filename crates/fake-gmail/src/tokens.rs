//! The access tokens the token endpoint issues, and what each one grants.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::distr::Alphanumeric;

struct IssuedToken {
    expires_at: Instant,
    scopes: Vec<String>,
}

#[derive(Default)]
pub(crate) struct TokenStore {
    tokens: HashMap<String, IssuedToken>,
}

/// What an access token presented to a Gmail route turned out to be.
pub(crate) enum TokenCheck {
    Valid { scopes: Vec<String> },
    Invalid,
}

impl TokenStore {
    /// A new token for `ttl`, granting `scopes`; expired ones are forgotten on the way.
    pub fn issue(&mut self, ttl: Duration, scopes: Vec<String>) -> String {
        let now = Instant::now();
        self.tokens.retain(|_, token| token.expires_at > now);
        let random: String = rand::rng().sample_iter(&Alphanumeric).take(96).map(char::from).collect();
        // Google's access tokens start with "ya29."; clients that sniff for it see what they expect.
        let token = format!("ya29.{random}");
        self.tokens.insert(token.clone(), IssuedToken { expires_at: now + ttl, scopes });
        token
    }

    pub fn check(&self, token: &str) -> TokenCheck {
        match self.tokens.get(token) {
            Some(issued) if issued.expires_at > Instant::now() => TokenCheck::Valid { scopes: issued.scopes.clone() },
            _ => TokenCheck::Invalid,
        }
    }

    pub fn expire_all(&mut self) -> usize {
        let count = self.tokens.len();
        self.tokens.clear();
        count
    }
}

use std::path::PathBuf;
use std::time::Duration;

/// The OAuth client and the refresh token the fake accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub client_id: String,
    pub client_secret: String,
    pub refresh_token: String,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            client_id: "fake-client-id".into(),
            client_secret: "fake-client-secret".into(),
            refresh_token: "fake-refresh-token".into(),
        }
    }
}

/// What the refresh token was granted by default: drafts and sending (`gmail.compose`,
/// `gmail.send`), and reading (`gmail.readonly`), without which real Gmail refuses
/// `messages.list` and `messages.get` with 403 — a component that checks whether a message
/// already went out needs it.
pub const DEFAULT_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/gmail.compose",
    "https://www.googleapis.com/auth/gmail.readonly",
    "https://www.googleapis.com/auth/gmail.send",
];

#[derive(Clone, Debug)]
pub struct FakeGmailConfig {
    pub credentials: Credentials,
    /// The mailbox's own address; `userId` may be `me` or this.
    pub sender: String,
    /// How long an access token stays valid.
    pub token_ttl: Duration,
    /// When set, each message that becomes SENT is also written there as `<message id>.eml`.
    pub mail_dir: Option<PathBuf>,
    /// The scopes the refresh token was granted; every access token carries them (or the subset
    /// the grant asked for), and each Gmail method checks them as Gmail does.
    pub scopes: Vec<String>,
}

impl Default for FakeGmailConfig {
    fn default() -> Self {
        FakeGmailConfig {
            credentials: Credentials::default(),
            sender: "gatehouse@example.com".into(),
            token_ttl: Duration::from_secs(3600),
            mail_dir: None,
            scopes: DEFAULT_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

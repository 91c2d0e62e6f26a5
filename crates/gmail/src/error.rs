//! What a call to Gmail (or to its token endpoint) can end in, shared by the API client and the
//! OAuth token source; the tool decides from it whether a send may be retried.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GmailError {
    /// The OAuth credentials do not work.
    #[error("Gmail credentials: {0}")]
    Credentials(String),
    #[error("Gmail has no such item")]
    NotFound,
    /// Gmail refused the request as it is (a 4xx other than 401, 404 and 429).
    #[error("Gmail refused the request: HTTP {status}: {message}")]
    Refused { status: u16, message: String },
    /// Gmail stayed busy or failing through every attempt; nothing was carried out.
    #[error("Gmail is unavailable: {0}")]
    Unavailable(String),
    /// A request that must not be repeated blind got no usable answer: it may have been
    /// carried out.
    #[error("no usable answer from Gmail: {0}")]
    Uncertain(String),
}

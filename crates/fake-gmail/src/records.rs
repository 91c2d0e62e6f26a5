use serde::{Deserialize, Serialize};

/// One answered request, as `GET /_fake/requests` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub method: String,
    /// The path without the query string, so no `access_token` parameter ends up here.
    pub path: String,
    /// The Gmail or OAuth operation (`token`, `drafts.create`, ...), `_fake.*` for the control
    /// routes, `dev_view` for the page, `unknown` for anything else.
    pub operation: String,
    pub status: u16,
    /// When the request arrived, in milliseconds since the server started.
    pub at_ms: u64,
    /// How long it took to answer, injected delays included.
    pub duration_ms: u64,
}

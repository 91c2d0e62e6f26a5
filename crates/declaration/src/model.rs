//! The declaration file as written (TOML), before it is checked.
//!
//! docs/tools.md, "A declared tool", shows a whole file; docs/architecture.md, "Declared tools",
//! says why each part is there.

use std::collections::BTreeMap;

use gatehouse_domain::contract::ToolEffects;
use serde::Deserialize;
use serde_json::Value;

/// One declared tool: what it is, what it accepts, what it says, and the requests it makes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// The function name the agent calls (`book_table`).
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// JSON Schema (2020-12) of the parameters object.
    pub parameters: Value,
    /// The sentence the agent speaks to have the caller confirm: a template over `parameters`.
    pub confirm: String,
    /// What running the tool does to the world (MCP's tool annotations come from it).
    #[serde(default)]
    pub effects: Option<ToolEffects>,
    /// Where the backend is, how long it may take, and what it promises.
    pub backend: Backend,
    /// The reversible step before the checkpoint (a hold, a draft, a quote). With it, the call
    /// stops at the checkpoint and `discard` must be declared too.
    #[serde(default)]
    pub prepare: Option<Step>,
    /// What the agent says at the checkpoint: a template over `parameters` and `prepared`.
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// The irreversible step.
    pub execute: Step,
    /// Undoes what `prepare` left (a cancel or an expiry at the checkpoint).
    #[serde(default)]
    pub discard: Option<Step>,
    /// How the backend's answer to `execute` becomes the call's result.
    pub answer: Answer,
}

/// The team's backend.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backend {
    /// The backend's origin (`https://reservations.example.com`), or one Spin variable that
    /// holds it (`{{ vars.reservations_url }}`).
    pub url: String,
    /// How long one request may take, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The backend does an action once per `Idempotency-Key`, so a request whose answer was
    /// lost may be sent again. Without it, such a request is never sent twice.
    #[serde(default)]
    pub honours_idempotency_key: bool,
}

pub const fn default_timeout_ms() -> u64 {
    10_000
}

/// One HTTP request to the backend.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub method: HttpMethod,
    /// The path under the backend's URL; every value put into it is percent-encoded.
    pub path: String,
    /// Header templates; a secret comes only from `{{ secrets.name }}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The JSON body: any JSON value whose strings are templates. A string that is exactly one
    /// `{{ expression }}` keeps the value's type (a number stays a number).
    #[serde(default)]
    pub body: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl HttpMethod {
    pub const fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }
}

/// The call's result and what the agent says when it completes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// A template over `parameters`, `prepared` and `response` (the backend's JSON answer).
    pub voice_response: String,
    /// The call's `result`: a JSON template like a step's body; the whole answer when absent.
    #[serde(default)]
    pub result: Option<Value>,
}

//! The requests a declared tool sends its backend: built from a step's templates, with the
//! headers that make them safe on the backend's side (docs/tools.md, "What your backend
//! receives"): an `Idempotency-Key` for the call and the operation, and a signature by the
//! one recipe of `gatehouse_domain::signing`, over the time, a nonce, the method, the path and
//! query, the key and the body, so a captured request cannot be replayed or sent to another
//! record (docs/architecture.md, "Declared tools").

use gatehouse_domain::signing::{self, SignedRequest};
use serde_json::{Map, Value, json};

use crate::model::{HttpMethod, Step};
use crate::template::{self, TemplateError};

/// Which of a declaration's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    Prepare,
    Execute,
    Discard,
}

impl StepKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            StepKind::Prepare => "prepare",
            StepKind::Execute => "execute",
            StepKind::Discard => "discard",
        }
    }
}

/// What the templates may read for one call. Each field is one root name of the templates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    pub parameters: Map<String, Value>,
    /// The backend's answer to `prepare` (kept in the call's checkpoint).
    pub prepared: Option<Value>,
    /// The backend's answer to `execute`.
    pub response: Option<Value>,
    pub tool_call_id: Option<String>,
    pub session_id: Option<String>,
    /// The Spin variables the declaration reads as `vars.*`.
    pub vars: Map<String, Value>,
    /// The Spin variables the declaration reads as `secrets.*` (headers only).
    pub secrets: Map<String, Value>,
}

impl Inputs {
    pub fn only_parameters(parameters: &Map<String, Value>) -> Inputs {
        Inputs { parameters: parameters.clone(), ..Inputs::default() }
    }

    /// Everything but the secrets, which only a header may read.
    pub(crate) fn scope(&self) -> minijinja::Value {
        template::scope(&self.values(false))
    }

    fn values(&self, with_secrets: bool) -> Map<String, Value> {
        let mut values = Map::new();
        values.insert("parameters".into(), Value::Object(self.parameters.clone()));
        if let Some(prepared) = &self.prepared {
            values.insert("prepared".into(), prepared.clone());
        }
        if let Some(response) = &self.response {
            values.insert("response".into(), response.clone());
        }
        values.insert("call".into(), json!({"tool_call_id": self.tool_call_id, "session_id": self.session_id}));
        values.insert("vars".into(), Value::Object(self.vars.clone()));
        if with_secrets {
            values.insert("secrets".into(), Value::Object(self.secrets.clone()));
        }
        values
    }
}

/// One request to the backend, ready to send.
#[derive(Clone, PartialEq)]
pub struct BackendRequest {
    pub method: HttpMethod,
    /// The path and query under the backend's origin.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for BackendRequest {
    /// Header values are left out: they may carry a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("BackendRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &names)
            .finish()
    }
}

impl BackendRequest {
    /// Signs the request for the backend: `X-Gatehouse-Signature: t=<unix seconds>,v1=<hex>,n=<nonce>`
    /// by the one recipe (`gatehouse_domain::signing`), binding the method, the path and query
    /// under the backend's origin, the `Idempotency-Key` (empty when there is none) and the body.
    /// `nonce` must be fresh for each try: a backend spends each nonce once.
    pub fn sign(&mut self, secret: &[u8], unix_seconds: u64, nonce: &str) {
        let header = gatehouse_domain::callback::SIGNATURE_HEADER;
        self.headers.retain(|(name, _)| !name.eq_ignore_ascii_case(header));
        let signature = signing::sign_with_each(&[secret], unix_seconds, nonce, &self.signed_request());
        self.headers.push((header.to_owned(), signature));
    }

    /// What the signature covers, as the backend sees the request: the method, the path and
    /// query, the `Idempotency-Key` (empty when there is none) and the body. Also what the
    /// conformance kit shows of a signature a backend refused.
    pub fn signed_request(&self) -> SignedRequest<'_> {
        SignedRequest {
            method: self.method.as_str(),
            target: &self.path,
            idempotency_key: self.header("idempotency-key").unwrap_or_default(),
            body: &self.body,
        }
    }

    /// The value of header `name`, if the request carries it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// The `Idempotency-Key` of one operation of one call: the same on every retry and after a
/// crash, different for each operation, so a backend that honours keys does each at most once.
pub fn idempotency_key(tool: &str, tool_call_id: &str, kind: StepKind) -> String {
    format!("gatehouse-{tool}-{tool_call_id}-{}", kind.as_str())
}

pub(crate) fn build(tool: &str, kind: StepKind, step: &Step, inputs: &Inputs) -> Result<BackendRequest, TemplateError> {
    let scope = inputs.scope();
    let path = template::render_path(&step.path, &scope)?;
    let mut headers = Vec::new();
    let with_secrets = template::scope(&inputs.values(true));
    for (name, value) in &step.headers {
        headers.push((name.to_ascii_lowercase(), template::render_text(value, &with_secrets)?));
    }
    let body = match &step.body {
        Some(body) => {
            headers.push(("content-type".to_owned(), "application/json".to_owned()));
            serde_json::to_vec(&template::render_json(body, &scope)?).map_err(|e| TemplateError(e.to_string()))?
        }
        None => Vec::new(),
    };
    if let Some(call) = &inputs.tool_call_id {
        headers.push(("idempotency-key".to_owned(), idempotency_key(tool, call, kind)));
    }
    Ok(BackendRequest { method: step.method, path, headers, body })
}

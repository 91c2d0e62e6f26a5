//! `POST /voice-tools/pending`: record a PENDING call, with the tool's summary to speak.

use gatehouse_domain::contract::ToolRequest;
use gatehouse_domain::{ApiError, ErrorCode, SessionId};
use gatehouse_http::Reply;
use gatehouse_store::{Connection, Created, NewCall};
use gatehouse_tool::ToolError;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::Config;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    pub session_id: String,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub function_name: Option<String>,
    pub parameters: Value,
    #[serde(default)]
    pub connection_id: Option<String>,
    #[serde(default)]
    pub intent_id: Option<String>,
    #[serde(default)]
    pub callback_url: Option<String>,
}

pub async fn create(
    db: &Connection,
    request: CreateRequest,
    idempotency_key: Option<&str>,
    trace_id: &str,
) -> Result<Reply, ApiError> {
    let session_id = crate::session_id(&request.session_id)?;
    let function = request.function_name.as_deref().or(request.function.as_deref()).unwrap_or_default();
    if function.is_empty() {
        return Err(ApiError::invalid_input("Say which tool to use.").with_field("function_name", "is required"));
    }
    let Value::Object(parameters) = &request.parameters else {
        return Err(ApiError::invalid_input("The parameters must be a JSON object.")
            .with_field("parameters", "must be an object"));
    };
    if let Some(key) = idempotency_key
        && (key.is_empty() || key.len() > 255)
    {
        return Err(ApiError::invalid_input("The Idempotency-Key header must be 1 to 255 characters."));
    }
    let registry = Config::registry()?;
    let entry = registry.resolve(function).ok_or_else(|| {
        ApiError::new(ErrorCode::UnknownFunction, format!("I don't have a tool called {function}."))
            .with_field("function_name", format!("must be one of: {}", registry.names().join(", ")))
    })?;
    let callback_url = Config::checked_callback_url(request.callback_url.as_deref())?;

    let validated = Config::tool(&entry.name, &entry.component)?
        .validate(&ToolRequest {
            tool_call_id: None,
            session_id: Some(session_id.clone()),
            parameters: parameters.clone(),
            checkpoint: None,
            attempt: 1,
            side_effect_may_have_started: false,
            trace_id: Some(trace_id.to_owned()),
        })
        .await
        .map_err(|e| tool_error(e, &entry.name))?;

    let fingerprint = fingerprint(&session_id, &entry.name, parameters, &request);
    let new_id = gatehouse_http::new_tool_call_id();
    let call = NewCall {
        tool_call_id: &new_id,
        session_id: &session_id,
        connection_id: request.connection_id.as_deref(),
        intent_id: request.intent_id.as_deref(),
        function_name: &entry.name,
        tool: &entry.component,
        parameters: &validated.parameters,
        summary: &validated.summary,
        callback_url: callback_url.as_deref(),
        idempotency_key,
        request_fingerprint: &fingerprint,
        trace_id,
        ttl_seconds: Config::pending_ttl_seconds()?,
    };
    // A concurrent create with the same key may not be visible yet to this statement; the
    // second try sees it.
    for _ in 0..2 {
        match gatehouse_store::insert_call(db, &call)? {
            Created::New(body) => return Ok(gatehouse_http::json_response(201, &body).into()),
            Created::Existing { fingerprint: first, response } if first == fingerprint => {
                return Ok(gatehouse_http::json_response(201, &response).into());
            }
            Created::Existing { .. } => {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyKeyReused,
                    "That Idempotency-Key was already used for a different request.",
                ));
            }
            Created::Raced => continue,
        }
    }
    Err(ApiError::internal().with_detail("an idempotent create raced twice"))
}

/// The tool's answer as an API error: its field errors for the caller, or a 502.
pub(crate) fn tool_error(error: ToolError, tool: &str) -> ApiError {
    match error {
        ToolError::Refused(refusal) => ApiError::validation_failed(refusal.error, refusal.fields),
        ToolError::Crashed(detail) => ApiError::tool_unavailable(tool).with_detail(detail),
    }
}

/// What makes two creates "the same request" for Idempotency-Key: everything the client sent.
fn fingerprint(
    session_id: &SessionId,
    function: &str,
    parameters: &Map<String, Value>,
    request: &CreateRequest,
) -> String {
    // serde_json's maps are ordered, so equal requests serialize identically.
    let canonical = json!({
        "session_id": session_id,
        "function_name": function,
        "parameters": parameters,
        "connection_id": request.connection_id,
        "intent_id": request.intent_id,
        "callback_url": request.callback_url,
    });
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

//! `POST /voice-tools/pending`: record a PENDING call, with the tool's summary to speak.

use gatehouse_domain::contract::ToolRequest;
use gatehouse_domain::limits::{MAX_LABEL_CHARS, MAX_URL_CHARS, check_optional_length};
use gatehouse_domain::{ApiError, ErrorCode, SessionId};
use gatehouse_store::{Insertion, Limit, NewCall};
use gatehouse_tool::ToolError;
use gatehouse_tool::history::validated_row;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::{Created, Ctx};

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

impl CreateRequest {
    /// Every label and URL within its bound (`gatehouse_domain::limits`).
    fn check_bounds(&self) -> Result<(), ApiError> {
        check_optional_length("function_name", self.function_name.as_deref(), MAX_LABEL_CHARS)?;
        check_optional_length("function", self.function.as_deref(), MAX_LABEL_CHARS)?;
        check_optional_length("connection_id", self.connection_id.as_deref(), MAX_LABEL_CHARS)?;
        check_optional_length("intent_id", self.intent_id.as_deref(), MAX_LABEL_CHARS)?;
        check_optional_length("callback_url", self.callback_url.as_deref(), MAX_URL_CHARS)
    }
}

/// Records the call; its answer (the call's id, status and the sentence to read back) is the
/// same for a retried request with the same `Idempotency-Key`.
pub async fn create(
    ctx: &Ctx,
    request: CreateRequest,
    idempotency_key: Option<&str>,
    trace_id: &str,
) -> Result<Created, ApiError> {
    let config = ctx.config();
    let grant = ctx.grant()?;
    ctx.db()?;
    let session_id = crate::session_id(&request.session_id)?;
    request.check_bounds()?;
    let function = request.function_name.as_deref().or(request.function.as_deref()).unwrap_or_default();
    if function.is_empty() {
        return Err(ApiError::invalid_input("Say which tool to use.").with_field("function_name", "is required"));
    }
    let Value::Object(parameters) = &request.parameters else {
        return Err(ApiError::invalid_input("The parameters must be a JSON object.")
            .with_field("parameters", "must be an object"));
    };
    gatehouse_domain::limits::check_parameters_size(parameters)?;
    checked_idempotency_key(idempotency_key)?;
    let registry = config.registry()?;
    let entry = registry.resolve(function).ok_or_else(|| {
        ApiError::new(ErrorCode::UnknownFunction, format!("I don't have a tool called {function}."))
            .with_field("function_name", format!("must be one of: {}", registry.names().join(", ")))
    })?;
    let callback_url = config.checked_callback_url(ctx.grant()?, request.callback_url.as_deref())?;
    refuse_past_limits(ctx)?;

    let validated = config
        .tool(&entry.name, &entry.component)?
        .validate(&ToolRequest {
            tool_call_id: None,
            session_id: Some(session_id.clone()),
            tenant: Some(grant.tenant.clone()),
            parameters: parameters.clone(),
            checkpoint: None,
            attempt: 1,
            side_effect_may_have_started: false,
            trace_id: Some(trace_id.to_owned()),
        })
        .await
        .map_err(|e| tool_error(e, &entry.name))?;

    let fingerprint = fingerprint(&session_id, &entry.name, parameters, &request);
    let new_id = gatehouse_platform::new_tool_call_id();
    let call = NewCall {
        tool_call_id: &new_id,
        session_id: &session_id,
        connection_id: request.connection_id.as_deref(),
        intent_id: request.intent_id.as_deref(),
        function_name: &entry.name,
        component: &entry.component,
        parameters: &validated.parameters,
        summary: &validated.summary,
        callback_url: callback_url.as_deref(),
        idempotency_key,
        request_fingerprint: &fingerprint,
        trace_id,
        ttl_seconds: config.pending_ttl_seconds()?,
        needs_checkpoint: validated.needs_checkpoint,
        validation: validated.execution.as_ref().map(|e| validated_row(e, None, Some(trace_id))),
        max_pending_per_session: config.max_pending_per_session()?,
        grant,
    };
    // A concurrent create with the same key may not be visible yet to this statement; the
    // second try sees it.
    for _ in 0..2 {
        match gatehouse_store::insert_call(&*ctx.db()?, &call)? {
            Insertion::New(created) => return Ok(created),
            Insertion::Existing { fingerprint: first, response } if first == fingerprint => return Ok(response),
            Insertion::Existing { .. } => {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyKeyReused,
                    "That Idempotency-Key was already used for a different request.",
                ));
            }
            Insertion::Raced => continue,
            Insertion::Limited(limit) => return Err(limited(limit, config.max_pending_per_session()?)),
        }
    }
    Err(ApiError::internal().with_detail("an idempotent create raced twice"))
}

/// A limit the create met (docs/keys.md, "Limits"): 429. A full session has the relay settle
/// some of its calls (confirm or cancel) before proposing more, and waiting alone does not help,
/// so it names no wait of its own (it carries the `Retry-After` every 429 does, which only
/// paces a retry); the tenant's limits are shared with its other sessions, which settle and
/// create on their own, so they say when to try again.
pub(crate) fn limited(limit: Limit, session_cap: i64) -> ApiError {
    match limit {
        Limit::SessionFull => ApiError::new(
            ErrorCode::TooManyOpenCalls,
            format!(
                "This conversation already has {session_cap} requests waiting for an answer. \
                 Confirm or cancel some of them before asking for more."
            ),
        ),
        Limit::TenantFull => ApiError::new(
            ErrorCode::TooManyOpenCalls,
            "Too many requests are waiting for an answer across your conversations. Please try again shortly.",
        )
        .with_retry_after(TENANT_FULL_RETRY_SECONDS),
        Limit::RateLimited => ApiError::new(
            ErrorCode::RateLimited,
            "Too many requests are being made right now. Please try again in a moment.",
        )
        .with_retry_after(1),
    }
}

/// A tenant with limits is refused before the tool is asked to validate, when it is past them
/// already: the create's insert checks again, but a tenant hammering creates then costs one
/// statement a request, not a tool's `validate` too.
pub(crate) fn refuse_past_limits(ctx: &Ctx) -> Result<(), ApiError> {
    let grant = ctx.grant()?;
    if !grant.limited {
        return Ok(());
    }
    match gatehouse_store::tenant_limit(&*ctx.db()?, &grant.tenant)? {
        Some(limit) => Err(limited(limit, ctx.config().max_pending_per_session()?)),
        None => Ok(()),
    }
}

/// How long a tenant whose waiting calls are at its limit is told to wait: long enough for
/// some of its other conversations to answer theirs.
const TENANT_FULL_RETRY_SECONDS: u32 = 5;

/// The tool's answer as an API error: its field errors for the caller, or a 502.
pub(crate) fn tool_error(error: ToolError, tool: &str) -> ApiError {
    match error {
        ToolError::Refused(refusal) => ApiError::validation_failed(refusal.error, refusal.fields),
        ToolError::Crashed(fault) | ToolError::BrokeContract(fault) => ApiError::tool_unavailable(tool, fault),
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

/// An `Idempotency-Key` header is 1 to 255 characters, on every route that takes one.
pub(crate) fn checked_idempotency_key(key: Option<&str>) -> Result<Option<&str>, ApiError> {
    match key {
        Some(key) if key.is_empty() || key.chars().count() > 255 => {
            Err(ApiError::invalid_input("The Idempotency-Key header must be 1 to 255 characters."))
        }
        key => Ok(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(parameters: Value) -> CreateRequest {
        CreateRequest {
            session_id: "s1".into(),
            function: None,
            function_name: Some("send_email".into()),
            parameters,
            connection_id: None,
            intent_id: None,
            callback_url: None,
        }
    }

    fn print(request: &CreateRequest) -> String {
        let session = SessionId::parse(&request.session_id).expect("a valid session id");
        let Value::Object(parameters) = &request.parameters else { panic!("parameters are an object") };
        fingerprint(&session, "send_email", parameters, request)
    }

    #[test]
    fn the_same_request_has_the_same_fingerprint_whatever_its_key_order() {
        let one = request(json!({"to": "a@example.com", "subject": "Hi"}));
        let other = request(serde_json::from_str(r#"{"subject": "Hi", "to": "a@example.com"}"#).expect("json"));
        assert_eq!(print(&one), print(&other));
    }

    #[test]
    fn anything_the_client_sent_changes_the_fingerprint() {
        let base = request(json!({"to": "a@example.com"}));
        let changed_parameter = request(json!({"to": "b@example.com"}));
        let with_callback = CreateRequest { callback_url: Some("https://relay.example/cb".into()), ..base.clone() };
        let with_intent = CreateRequest { intent_id: Some("i1".into()), ..base.clone() };
        let prints = [print(&base), print(&changed_parameter), print(&with_callback), print(&with_intent)];
        for (i, a) in prints.iter().enumerate() {
            for b in &prints[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_refusal_keeps_the_tools_fields_and_a_crash_is_a_502() {
        use gatehouse_domain::FieldProblem;
        use gatehouse_domain::contract::ToolRefusal;
        let problem = FieldProblem { field: "to".into(), problem: "is not an address".into() };
        let refused =
            tool_error(ToolError::Refused(ToolRefusal { fields: vec![problem], ..ToolRefusal::saying("No.") }), "t");
        assert_eq!((refused.code, refused.fields.len()), (ErrorCode::ValidationFailed, 1));
        use gatehouse_domain::contract::{FaultKind, ToolFault};
        let fault = ToolFault::new(FaultKind::ErrorStatus, "component t answered validate with HTTP 500");
        let crashed = tool_error(ToolError::Crashed(fault.clone()), "t");
        assert_eq!((crashed.code, crashed.http_status()), (ErrorCode::ToolUnavailable, 502));
        let wire = serde_json::to_value(&crashed).unwrap_or_default();
        assert_eq!(wire["cause"], serde_json::json!({"kind": "error_status", "explanation": fault.explanation}));
    }
}

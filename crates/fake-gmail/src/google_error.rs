//! Google's JSON error body: `{"error": {"code", "message", "errors": [...], "status"}}`, with
//! the texts and reasons the Gmail API uses for each case.
use hyper::StatusCode;
use serde_json::{Value, json};

use crate::message_format::UnknownFormat;
use crate::responses::{self, Answer};

const REALM: &str = "https://accounts.google.com/";
const CREDENTIALS_HELP: &str = "Expected OAuth 2 access token, login cookie or other valid authentication credential. \
     See https://developers.google.com/identity/sign-in/web/devconsole-project.";

/// Boxed: it travels in the `Err` of every handler, next to a much smaller `Ok`.
pub(crate) struct GoogleError(Box<Details>);

struct Details {
    code: u16,
    status: &'static str,
    message: String,
    /// The text inside `errors[]`, when Google words it differently from `message`.
    errors_message: Option<&'static str>,
    reason: &'static str,
    domain: &'static str,
    location: Option<(&'static str, &'static str)>,
    details: Option<Value>,
    www_authenticate: Option<String>,
    retry_after_seconds: Option<u64>,
}

impl GoogleError {
    fn new(code: u16, status: &'static str, message: impl Into<String>, reason: &'static str) -> Self {
        GoogleError(Box::new(Details {
            code,
            status,
            message: message.into(),
            errors_message: None,
            reason,
            domain: "global",
            location: None,
            details: None,
            www_authenticate: None,
            retry_after_seconds: None,
        }))
    }

    pub fn not_found() -> Self {
        GoogleError::new(404, "NOT_FOUND", "Requested entity was not found.", "notFound")
    }

    /// A path or method the API does not have.
    pub fn method_not_found() -> Self {
        GoogleError::new(404, "NOT_FOUND", "Method not found.", "notFound")
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        GoogleError::new(400, "INVALID_ARGUMENT", message, "invalidArgument")
    }

    /// A value Google's request parser refused (bad JSON, bad base64, bad enum), reason `invalid`.
    pub fn invalid_value(message: impl Into<String>) -> Self {
        GoogleError::new(400, "INVALID_ARGUMENT", message, "invalid")
    }

    pub fn payload_too_large(limit: usize) -> Self {
        GoogleError::new(
            413,
            "INVALID_ARGUMENT",
            format!("Request payload size exceeds the limit: {limit} bytes."),
            "badRequest",
        )
    }

    /// No `Authorization` header (nor `access_token` parameter) at all.
    pub fn missing_credentials() -> Self {
        let mut error = GoogleError::new(
            401,
            "UNAUTHENTICATED",
            format!("Request is missing required authentication credential. {CREDENTIALS_HELP}"),
            "required",
        );
        error.0.www_authenticate = Some(format!("Bearer realm=\"{REALM}\""));
        error.0.location = Some(("Authorization", "header"));
        error
    }

    /// An access token that is unknown, expired or revoked.
    pub fn invalid_credentials() -> Self {
        let mut error = GoogleError::new(
            401,
            "UNAUTHENTICATED",
            format!("Request had invalid authentication credentials. {CREDENTIALS_HELP}"),
            "authError",
        );
        error.errors_message_override("Invalid Credentials");
        error.0.www_authenticate = Some(format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""));
        error.0.location = Some(("Authorization", "header"));
        error
    }

    pub fn delegation_denied(user_id: &str) -> Self {
        GoogleError::new(403, "PERMISSION_DENIED", format!("Delegation denied for {user_id}"), "forbidden")
    }

    /// The token is valid but none of its scopes allows the method.
    pub fn insufficient_scopes(accepted: &[&str]) -> Self {
        let mut error = GoogleError::new(
            403,
            "PERMISSION_DENIED",
            "Request had insufficient authentication scopes.",
            "insufficientPermissions",
        );
        error.errors_message_override("Insufficient Permission");
        error.0.www_authenticate =
            Some(format!("Bearer realm=\"{REALM}\", error=\"insufficient_scope\", scope=\"{}\"", accepted.join(" ")));
        error.0.details = Some(json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
            "domain": "googleapis.com",
            "metadata": {"service": "gmail.googleapis.com"},
        }]));
        error
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        GoogleError::new(403, "PERMISSION_DENIED", message, "forbidden")
    }

    pub fn recipient_required() -> Self {
        GoogleError::invalid_argument("Recipient address required")
    }

    pub fn invalid_recipient_header(header: &str) -> Self {
        GoogleError::invalid_argument(format!("Invalid {header} header"))
    }

    /// The answer an injected fault gives, shaped as Gmail shapes that status.
    pub fn for_status(code: u16, retry_after_seconds: Option<u64>) -> Self {
        let mut error = match code {
            400 => GoogleError::new(400, "INVALID_ARGUMENT", "Bad Request", "badRequest"),
            401 => GoogleError::invalid_credentials(),
            403 => {
                let mut error =
                    GoogleError::new(403, "PERMISSION_DENIED", "User-rate limit exceeded.", "rateLimitExceeded");
                error.0.domain = "usageLimits";
                error
            }
            404 => GoogleError::not_found(),
            409 => GoogleError::new(409, "ABORTED", "Aborted", "aborted"),
            429 => {
                let seconds = retry_after_seconds.unwrap_or(1);
                let mut error = GoogleError::new(
                    429,
                    "RESOURCE_EXHAUSTED",
                    format!("User-rate limit exceeded.  Retry after {seconds} seconds."),
                    "rateLimitExceeded",
                );
                error.0.domain = "usageLimits";
                error.0.retry_after_seconds = Some(seconds);
                error
            }
            500 => GoogleError::new(500, "INTERNAL", "Backend Error", "backendError"),
            502 => GoogleError::new(502, "UNAVAILABLE", "Bad Gateway", "backendError"),
            503 => GoogleError::new(503, "UNAVAILABLE", "The service is currently unavailable.", "backendError"),
            504 => GoogleError::new(504, "DEADLINE_EXCEEDED", "Deadline exceeded.", "deadlineExceeded"),
            code if code < 500 => {
                GoogleError::new(code, "FAILED_PRECONDITION", "Precondition check failed.", "failedPrecondition")
            }
            _ => GoogleError::new(code, "UNKNOWN", "Unknown Error.", "unknownError"),
        };
        if retry_after_seconds.is_some() {
            error.0.retry_after_seconds = retry_after_seconds;
        }
        error
    }

    fn errors_message_override(&mut self, text: &'static str) {
        self.0.errors_message = Some(text);
    }

    pub fn into_answer(self) -> Answer {
        let mut entry = json!({
            "message": self.0.errors_message.map_or_else(|| self.0.message.clone(), str::to_owned),
            "domain": self.0.domain,
            "reason": self.0.reason,
        });
        if let Some((location, location_type)) = self.0.location {
            entry["location"] = json!(location);
            entry["locationType"] = json!(location_type);
        }
        let mut error = json!({
            "code": self.0.code,
            "message": self.0.message,
            "errors": [entry],
            "status": self.0.status,
        });
        if let Some(details) = self.0.details {
            error["details"] = details;
        }
        let status = StatusCode::from_u16(self.0.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut answer = responses::json(status, &json!({ "error": error }));
        if let Some(challenge) = &self.0.www_authenticate {
            responses::add_header(&mut answer, "www-authenticate", challenge);
        }
        if let Some(seconds) = self.0.retry_after_seconds {
            responses::add_header(&mut answer, "retry-after", &seconds.to_string());
        }
        answer
    }
}

impl From<UnknownFormat> for GoogleError {
    /// Gmail's answer to a `format` it does not know, naming the protocol enum it checked.
    fn from(UnknownFormat(value): UnknownFormat) -> Self {
        GoogleError::invalid_value(format!(
            "Invalid value at 'format' (type.googleapis.com/caribou.api.proto.MessageFormat), \"{value}\""
        ))
    }
}

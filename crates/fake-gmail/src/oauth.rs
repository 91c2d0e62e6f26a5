//! Google's OAuth2 token endpoint, refresh-token grant only. The tokens it issues are kept in
//! `tokens`, where the Gmail routes check them.
use base64::Engine;
use hyper::StatusCode;
use serde_json::{Value, json};

use crate::responses::{self, Answer};
use crate::routes::Incoming;
use crate::state::Shared;

/// `POST /token` with `grant_type=refresh_token`.
pub(crate) fn grant(shared: &Shared, request: &Incoming) -> Answer {
    let params = token_params(request);
    let param = |name: &str| params.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str());

    let grant_type = param("grant_type").unwrap_or_default();
    if grant_type != "refresh_token" {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!("Invalid grant_type: {grant_type}"),
        );
    }
    let (client_id, client_secret) = match (param("client_id"), basic_credentials(request)) {
        (Some(id), _) => (Some(id.to_owned()), param("client_secret").map(str::to_owned)),
        (None, Some((id, secret))) => (Some(id), Some(secret)),
        (None, None) => (None, None),
    };
    let credentials = &shared.config.credentials;
    let Some(client_id) = client_id else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "Could not determine client ID from request.");
    };
    if client_id != credentials.client_id {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "The OAuth client was not found.");
    }
    if client_secret.as_deref() != Some(credentials.client_secret.as_str()) {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "Unauthorized");
    }
    let Some(refresh_token) = param("refresh_token") else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "Missing required parameter: refresh_token");
    };
    if refresh_token != credentials.refresh_token {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "Bad Request");
    }
    let granted = &shared.config.scopes;
    // A refresh grant may narrow the scopes the refresh token carries, never widen them.
    let scopes: Vec<String> = match param("scope") {
        Some(requested) if !requested.trim().is_empty() => {
            let requested: Vec<String> = requested.split_whitespace().map(str::to_owned).collect();
            if requested.iter().any(|scope| !granted.contains(scope)) {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_scope", "Some requested scopes were invalid.");
            }
            requested
        }
        _ => granted.clone(),
    };
    let ttl = shared.config.token_ttl;
    let access_token = shared.lock().tokens.issue(ttl, scopes.clone());
    let mut answer = oauth_json(
        StatusCode::OK,
        &json!({
            "access_token": access_token,
            "expires_in": ttl.as_secs_f64().ceil() as u64,
            "scope": scopes.join(" "),
            "token_type": "Bearer",
        }),
    );
    responses::add_header(&mut answer, "cache-control", "no-cache, no-store, max-age=0, must-revalidate");
    responses::add_header(&mut answer, "pragma", "no-cache");
    answer
}

/// The token endpoint's answer to an injected fault, in the endpoint's own error shape.
pub(crate) fn fault_answer(code: u16, retry_after_seconds: Option<u64>) -> Answer {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (error, description) = match code {
        400 => ("invalid_grant", "Bad Request"),
        401 => ("invalid_client", "Unauthorized"),
        429 | 503 => ("temporarily_unavailable", "The service is temporarily unavailable."),
        500..=599 => ("server_error", "Internal error."),
        _ => ("invalid_request", "Bad Request"),
    };
    let mut answer = oauth_error(status, error, description);
    let retry_after = if code == 429 { Some(retry_after_seconds.unwrap_or(1)) } else { retry_after_seconds };
    if let Some(seconds) = retry_after {
        responses::add_header(&mut answer, "retry-after", &seconds.to_string());
    }
    answer
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Answer {
    oauth_json(status, &json!({"error": error, "error_description": description}))
}

fn oauth_json(status: StatusCode, body: &Value) -> Answer {
    let text = serde_json::to_vec_pretty(body).unwrap_or_else(|_| b"{}".to_vec());
    responses::with_type(status, "application/json; charset=utf-8", text)
}

/// The form parameters, or the members of a JSON object, which the endpoint also accepts.
fn token_params(request: &Incoming) -> Vec<(String, String)> {
    let is_json = request.content_type().is_some_and(|t| t.starts_with("application/json"));
    if is_json {
        let Ok(Value::Object(members)) = serde_json::from_slice::<Value>(&request.body) else { return Vec::new() };
        return members
            .into_iter()
            .filter_map(|(key, value)| match value {
                Value::String(text) => Some((key, text)),
                _ => None,
            })
            .collect();
    }
    form_urlencoded::parse(&request.body).into_owned().collect()
}

/// Client credentials sent as HTTP Basic authentication (each half form-urlencoded, per RFC 6749).
fn basic_credentials(request: &Incoming) -> Option<(String, String)> {
    let value = request.header("authorization")?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let unescape =
        |text: &str| form_urlencoded::parse(format!("x={text}").as_bytes()).next().map(|(_, v)| v.into_owned());
    Some((unescape(id)?, unescape(secret)?))
}

//! The lifecycle's settings, from Spin variables. Each component declares the variables it
//! reads in spin.toml; a setting is read only when an operation needs it.

use std::time::Duration;

use gatehouse_domain::{ApiError, CallbackAllowlist, ErrorCode};
use gatehouse_tool::{ToolClient, ToolRegistry};
use spin_sdk::variables;

/// At most this many attempts to run a call (SPEC §4).
pub const MAX_ATTEMPTS: i32 = 3;

pub struct Config;

fn read(name: &str) -> Result<String, ApiError> {
    variables::get(name).map_err(|e| ApiError::internal().with_detail(format!("reading the {name} variable: {e:?}")))
}

fn seconds(name: &str) -> Result<f64, ApiError> {
    let value = read(name)?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| ApiError::internal().with_detail(format!("the {name} variable is not a number of seconds")))
}

impl Config {
    pub fn pending_ttl_seconds() -> Result<f64, ApiError> {
        seconds("pending_ttl_seconds")
    }

    pub fn checkpoint_ttl_seconds() -> Result<f64, ApiError> {
        seconds("checkpoint_ttl_seconds")
    }

    /// How long a worker owns an EXECUTING call before the sweeper may take it over. Longer
    /// than the tool timeout, so a live worker is never overtaken.
    pub fn lease_seconds() -> Result<f64, ApiError> {
        seconds("execution_lease_seconds")
    }

    pub fn tool_timeout() -> Result<Duration, ApiError> {
        seconds("tool_timeout_seconds").map(Duration::from_secs_f64)
    }

    pub fn registry() -> Result<ToolRegistry, ApiError> {
        ToolRegistry::parse(&read("tool_registry")?)
            .map_err(|e| ApiError::internal().with_detail(format!("the tool_registry variable: {e}")))
    }

    /// The client for the tool `name`, served by `component`.
    pub fn tool(name: &str, component: &str) -> Result<ToolClient, ApiError> {
        Ok(ToolClient::new(name, component, Self::tool_timeout()?))
    }

    /// Where confirmed calls are handed over to be driven: the `async-executor` component by
    /// service chaining (the default, `http://async-executor.spin.internal`), or the origin of a
    /// host that serves it, where the manifest routes `/internal/executor/...` to it. A hand-off
    /// to another host is signed with `contract_secret`.
    pub fn executor_drive_url() -> Result<String, ApiError> {
        let origin = read("executor_origin")?;
        let origin = origin.trim().trim_end_matches('/');
        if !(origin.starts_with("http://") || origin.starts_with("https://")) {
            return Err(ApiError::internal().with_detail("the executor_origin variable is not an http(s) origin"));
        }
        Ok(format!("{origin}/internal/executor/drive"))
    }

    pub fn callback_allowlist() -> Result<CallbackAllowlist, ApiError> {
        Ok(CallbackAllowlist::parse(&read("callback_allowed_hosts")?))
    }

    /// A callback URL the caller gave, checked against the allowlist and normalized.
    pub fn checked_callback_url(url: Option<&str>) -> Result<Option<String>, ApiError> {
        let Some(url) = url else { return Ok(None) };
        Self::callback_allowlist()?.check(url).map(Some).map_err(|problem| {
            ApiError::new(ErrorCode::CallbackNotAllowed, "That callback address is not allowed.")
                .with_field("callback_url", problem.to_string())
        })
    }

    pub fn callback_secret() -> Result<String, ApiError> {
        let secret = read("callback_secret")?;
        // An empty key would make every signature forgeable: fail closed.
        if secret.is_empty() {
            return Err(ApiError::internal().with_detail("the callback_secret variable is empty"));
        }
        Ok(secret)
    }

    /// The relay that gets callbacks for calls that name none; empty for none.
    pub fn callback_default_url() -> Result<Option<String>, ApiError> {
        Ok(Some(read("callback_default_url")?).filter(|url| !url.trim().is_empty()))
    }

    pub fn callback_timeout() -> Result<Duration, ApiError> {
        seconds("callback_timeout_seconds").map(Duration::from_secs_f64)
    }

    /// How long a direct flow waits for the relay at a gate. Longer than a callback's timeout:
    /// at a gate that asks for confirmation the relay answers once the caller has spoken.
    pub fn gate_timeout() -> Result<Duration, ApiError> {
        seconds("gate_timeout_seconds").map(Duration::from_secs_f64)
    }
}

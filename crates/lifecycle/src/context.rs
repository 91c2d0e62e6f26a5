//! What every operation is given: the settings, read once per request, and the one rule for
//! reaching the database.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use gatehouse_domain::keys::Grant;
use gatehouse_domain::tenant_callbacks::TenantCallbacks;
use gatehouse_domain::{ApiError, CallbackAllowlist, ErrorCode, SessionId, SessionOf};
use gatehouse_store::{Caller, Connection};
use gatehouse_tool::{ToolClient, ToolRegistry};

/// At most this many attempts for each run of a call (a confirm or a resume starts one at
/// attempt 1); once they are spent, the sweeper fails the call (docs/architecture.md, "The
/// lifecycle").
pub const MAX_ATTEMPTS: i32 = 3;

/// An operation's surroundings. Cheap to clone: the work an operation leaves for after its
/// answer (callbacks, the executor hand-off) takes a clone along.
///
/// **The connection rule.** An operation reaches the database first, so that an unreachable
/// one is answered `database_unavailable` before anything else happens. The request then keeps
/// its connection from step to step ([`Ctx::db`]) and gives it back ([`Ctx::release`]) before
/// anything that waits: the relay, a sleep, the executor, and a tool's `prepare`, `execute` or
/// `discard`. Those take seconds, the tool needs a connection of its own meanwhile, and a
/// connection held through them would starve the pool; the next step takes a new one. A
/// tool's `validate` is answered in milliseconds and is not a wait.
///
/// **Whom it acts for.** A request made with a key carries the key's [`Grant`]: its operations
/// see only the key's tenant's calls, and the transitions they make name the key. Gatehouse's
/// own work (the executor, the sweeper) carries none and reaches any call by its id. An
/// operation only a key may ask for reads [`Ctx::grant`], which refuses a context without one,
/// so a route that forgot its key fails closed (docs/architecture.md, "Tenants").
#[derive(Clone, Default)]
pub struct Ctx {
    config: Rc<Config>,
    connection: Rc<RefCell<Option<Rc<Connection>>>>,
    grant: Option<Rc<Grant>>,
}

impl Ctx {
    /// Gatehouse's own work on a Spin host (the executor, the sweeper): settings come from the
    /// component's variables, and no tenant confines it.
    pub fn gatehouse() -> Ctx {
        Ctx::default()
    }

    /// A request made with a key, on a Spin host.
    pub fn for_grant(grant: Grant) -> Ctx {
        Ctx { grant: Some(Rc::new(grant)), ..Ctx::default() }
    }

    /// A context whose settings are the given values, not Spin variables.
    #[cfg(test)]
    pub(crate) fn with_settings(values: &[(&str, &str)]) -> Ctx {
        Ctx { config: Rc::new(Config::fixed(values)), connection: Rc::default(), grant: None }
    }

    /// The key the request was made with; an operation only a key may ask for reads it.
    pub fn grant(&self) -> Result<&Grant, ApiError> {
        self.grant.as_deref().ok_or_else(|| ApiError::internal().with_detail("an operation for a key ran without one"))
    }

    /// Whom the store's statements run for: the request's key, or Gatehouse itself.
    pub fn caller(&self) -> Caller<'_> {
        self.grant.as_deref().map_or(Caller::Gatehouse, Caller::Key)
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The request's connection, opened by the first step that needs one (see the rule above).
    /// The key of what a front end signs and hands a client to bring back, such as MCP's
    /// `requestState`: `state_secret`, which only Gatehouse's hosts hold. (Not the callback
    /// secret: every relay holds that one to verify callbacks, so a relay could mint a state
    /// for a call it did not create.)
    pub fn state_secret(&self) -> Result<String, ApiError> {
        self.config().non_empty_secret("state_secret")
    }

    pub fn db(&self) -> Result<Rc<Connection>, ApiError> {
        if let Some(connection) = self.connection.borrow().as_ref() {
            return Ok(connection.clone());
        }
        let connection = Rc::new(gatehouse_platform::open_db()?);
        *self.connection.borrow_mut() = Some(connection.clone());
        Ok(connection)
    }

    /// A session the client named, as the key's tenant's (two tenants may use the same id).
    pub fn session<'a>(&'a self, session_id: &'a SessionId) -> Result<SessionOf<'a>, ApiError> {
        Ok(SessionOf { tenant: &self.grant()?.tenant, session_id })
    }

    /// Gives the request's connection back before a wait (see the rule above).
    pub fn release(&self) {
        self.connection.borrow_mut().take();
    }
}

/// The lifecycle's settings. Each component declares the variables it reads in spin.toml, so
/// a setting is read only when an operation needs it, and then once per request.
#[derive(Default)]
pub(crate) struct Config {
    /// Values given up front instead of Spin variables.
    fixed: Option<HashMap<String, String>>,
    read: RefCell<HashMap<&'static str, String>>,
}

impl Config {
    #[cfg(test)]
    fn fixed(values: &[(&str, &str)]) -> Config {
        let fixed = values.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        Config { fixed: Some(fixed), read: RefCell::default() }
    }

    fn read(&self, name: &'static str) -> Result<String, ApiError> {
        if let Some(value) = self.read.borrow().get(name) {
            return Ok(value.clone());
        }
        let value = match &self.fixed {
            Some(fixed) => fixed
                .get(name)
                .cloned()
                .ok_or_else(|| ApiError::internal().with_detail(format!("the {name} setting is not given")))?,
            None => spin_sdk::variables::get(name)
                .map_err(|e| ApiError::internal().with_detail(format!("reading the {name} variable: {e:?}")))?,
        };
        self.read.borrow_mut().insert(name, value.clone());
        Ok(value)
    }

    fn seconds(&self, name: &'static str) -> Result<f64, ApiError> {
        let value = self.read(name)?;
        value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| ApiError::internal().with_detail(format!("the {name} variable is not a number of seconds")))
    }

    pub fn pending_ttl_seconds(&self) -> Result<f64, ApiError> {
        self.seconds("pending_ttl_seconds")
    }

    /// How many waiting PENDING calls one session may hold (`max_pending_calls_per_session`).
    pub fn max_pending_per_session(&self) -> Result<i64, ApiError> {
        let name = "max_pending_calls_per_session";
        self.read(name)?.trim().parse::<i64>().ok().filter(|cap| *cap >= 1).ok_or_else(|| {
            ApiError::internal().with_detail(format!("the {name} variable is not a whole number of at least 1"))
        })
    }

    /// How many days of history (executions, callback attempts, the stats' rollups) the
    /// sweeper keeps (`history_retention_days`), and of final calls (`calls_retention_days`);
    /// 0 keeps everything (docs/architecture.md, "Retention").
    pub fn retention(&self) -> Result<gatehouse_store::Retention, ApiError> {
        Ok(gatehouse_store::Retention {
            history_days: self.days("history_retention_days")?,
            calls_days: self.days("calls_retention_days")?,
        })
    }

    fn days(&self, name: &'static str) -> Result<i32, ApiError> {
        self.read(name)?.trim().parse::<i32>().ok().filter(|days| *days >= 0).ok_or_else(|| {
            ApiError::internal().with_detail(format!("the {name} variable is not a whole number of days"))
        })
    }

    pub fn checkpoint_ttl_seconds(&self) -> Result<f64, ApiError> {
        self.seconds("checkpoint_ttl_seconds")
    }

    /// How long a worker owns an EXECUTING call before the sweeper may take it over. Longer
    /// than the tool timeout, so a live worker is never overtaken.
    pub fn lease_seconds(&self) -> Result<f64, ApiError> {
        self.seconds("execution_lease_seconds")
    }

    /// How a call whose tool crashed is tried again: after `tool_retry_backoff_seconds`,
    /// doubled with each attempt, up to [`MAX_ATTEMPTS`].
    pub fn retry(&self) -> Result<gatehouse_store::Retry, ApiError> {
        let backoff_seconds = self.seconds("tool_retry_backoff_seconds")?;
        Ok(gatehouse_store::Retry { backoff_seconds, max_attempts: MAX_ATTEMPTS })
    }

    pub fn tool_timeout(&self) -> Result<Duration, ApiError> {
        self.seconds("tool_timeout_seconds").map(Duration::from_secs_f64)
    }

    pub fn registry(&self) -> Result<ToolRegistry, ApiError> {
        ToolRegistry::parse(&self.read("tool_registry")?)
            .map_err(|e| ApiError::internal().with_detail(format!("the tool_registry variable: {e}")))
    }

    /// The client for the tool `name`, served by `component`.
    pub fn tool(&self, name: &str, component: &str) -> Result<ToolClient, ApiError> {
        Ok(ToolClient::new(name, component, self.tool_timeout()?))
    }

    /// Where confirmed calls are handed over to be driven: the `async-executor` component by
    /// service chaining (the default, `http://async-executor.spin.internal`), or the origin of a
    /// host that serves it, where the manifest routes `/internal/executor/...` to it. A hand-off
    /// to another host is signed with `contract_secret`.
    pub fn executor_drive_url(&self) -> Result<String, ApiError> {
        let origin = self.read("executor_origin")?;
        let origin = origin.trim().trim_end_matches('/');
        if !(origin.starts_with("http://") || origin.starts_with("https://")) {
            return Err(ApiError::internal().with_detail("the executor_origin variable is not an http(s) origin"));
        }
        Ok(format!("{origin}{}", gatehouse_domain::service_auth::EXECUTOR_DRIVE_PATH))
    }

    /// The hosts `tenant`'s callbacks may reach: the deployment's `callback_allowed_hosts` for
    /// the first tenant, the tenant's own for any other (`settings`, from the tenants row).
    pub fn callback_allowlist(&self, tenant: &str, settings: &TenantCallbacks) -> Result<CallbackAllowlist, ApiError> {
        Ok(settings.allowlist(tenant, &self.read("callback_allowed_hosts")?))
    }

    /// A callback URL the key's caller gave, checked against its tenant's hosts and normalized:
    /// a key can never send its tenant's callbacks to a host its tenant has not named.
    pub fn checked_callback_url(&self, grant: &Grant, url: Option<&str>) -> Result<Option<String>, ApiError> {
        let Some(url) = url else { return Ok(None) };
        let settings = TenantCallbacks { allowed_hosts: grant.callback_hosts.clone(), ..TenantCallbacks::default() };
        self.callback_allowlist(&grant.tenant, &settings)?.check(url).map(Some).map_err(|problem| {
            ApiError::new(ErrorCode::CallbackNotAllowed, "That callback address is not allowed.")
                .with_field("callback_url", problem.to_string())
        })
    }

    pub fn callback_secret(&self) -> Result<String, ApiError> {
        self.non_empty_secret("callback_secret")
    }

    /// The keys a callback is signed with, one signature each: `callback_secret`, then
    /// `callback_secret_previous` during a rotation, so a relay that verifies with either
    /// accepts it (docs/keys.md, "Rotating the signing secrets").
    /// A manifest from before rotations declares no previous secret: that reads as none, which
    /// accepts less, never more.
    pub fn callback_secrets(&self) -> Result<Vec<String>, ApiError> {
        let previous = self.read("callback_secret_previous").ok().filter(|secret| !secret.is_empty());
        Ok(std::iter::once(self.callback_secret()?).chain(previous).collect())
    }

    /// A signing key's variable. An empty key would make every signature forgeable: fail closed.
    fn non_empty_secret(&self, name: &'static str) -> Result<String, ApiError> {
        let secret = self.read(name)?;
        if secret.is_empty() {
            return Err(ApiError::internal().with_detail(format!("the {name} variable is empty")));
        }
        Ok(secret)
    }

    /// The relay that gets callbacks for the first tenant's calls that name none; empty for
    /// none. It is the operator's relay: another tenant's calls that name none get no callback.
    pub fn callback_default_url(&self, tenant: &str) -> Result<Option<String>, ApiError> {
        if tenant != gatehouse_domain::keys::DEFAULT_TENANT {
            return Ok(None);
        }
        Ok(Some(self.read("callback_default_url")?).filter(|url| !url.trim().is_empty()))
    }

    pub fn callback_timeout(&self) -> Result<Duration, ApiError> {
        self.seconds("callback_timeout_seconds").map(Duration::from_secs_f64)
    }

    /// How long a direct flow waits for the relay at a gate. Longer than a callback's timeout:
    /// at a gate that asks for confirmation the relay answers once the caller has spoken.
    pub fn gate_timeout(&self) -> Result<Duration, ApiError> {
        self.seconds("gate_timeout_seconds").map(Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_must_be_finite_and_not_negative() {
        let ctx = Ctx::with_settings(&[
            ("pending_ttl_seconds", " 300 "),
            ("checkpoint_ttl_seconds", "-1"),
            ("execution_lease_seconds", "NaN"),
            ("tool_timeout_seconds", "2.5"),
        ]);
        assert_eq!(ctx.config().pending_ttl_seconds().ok(), Some(300.0));
        assert!(ctx.config().checkpoint_ttl_seconds().is_err());
        assert!(ctx.config().lease_seconds().is_err());
        assert_eq!(ctx.config().tool_timeout().ok(), Some(Duration::from_millis(2500)));
        assert!(ctx.config().gate_timeout().is_err(), "a setting nobody gave is an error, not a default");
    }

    #[test]
    fn the_executor_is_reached_at_an_http_origin() {
        let url = |origin: &str| Ctx::with_settings(&[("executor_origin", origin)]).config().executor_drive_url();
        assert_eq!(
            url("http://async-executor.spin.internal/").ok().as_deref(),
            Some("http://async-executor.spin.internal/internal/executor/drive")
        );
        assert_eq!(url("https://exec.example").ok().as_deref(), Some("https://exec.example/internal/executor/drive"));
        assert!(url("exec.example").is_err());
        assert!(url("ftp://exec.example").is_err());
    }

    #[test]
    fn an_empty_callback_secret_fails_closed() {
        assert!(Ctx::with_settings(&[("callback_secret", "")]).config().callback_secret().is_err());
        assert_eq!(
            Ctx::with_settings(&[("callback_secret", "k")]).config().callback_secret().ok().as_deref(),
            Some("k")
        );
    }

    #[test]
    fn no_default_relay_is_none() {
        let none = Ctx::with_settings(&[("callback_default_url", "  ")]);
        assert_eq!(none.config().callback_default_url("default").ok(), Some(None));
        let operators = Ctx::with_settings(&[("callback_default_url", "https://relay.example/cb")]);
        assert!(operators.config().callback_default_url("default").is_ok_and(|url| url.is_some()));
        assert_eq!(operators.config().callback_default_url("acme").ok(), Some(None), "not another tenant's");
    }

    #[test]
    fn a_callback_url_outside_the_allowlist_names_the_field() {
        let ctx = Ctx::with_settings(&[("callback_allowed_hosts", "relay.example")]);
        let operator = Grant::api_token();
        assert_eq!(ctx.config().checked_callback_url(&operator, None).ok(), Some(None));
        let refused = ctx.config().checked_callback_url(&operator, Some("https://evil.example/cb")).err();
        let refused = refused.map(|e| (e.code, e.fields.into_iter().map(|f| f.field).collect::<Vec<_>>()));
        assert_eq!(refused, Some((ErrorCode::CallbackNotAllowed, vec!["callback_url".to_owned()])));
        assert!(ctx.config().checked_callback_url(&operator, Some("https://relay.example/cb")).is_ok());
        // Another tenant's key reaches only the hosts its tenant named, never the deployment's.
        let acme = Grant { tenant: "acme".into(), callback_hosts: None, ..Grant::api_token() };
        assert!(ctx.config().checked_callback_url(&acme, Some("https://relay.example/cb")).is_err());
        let named = Grant { callback_hosts: Some("relay.acme.example".into()), ..acme };
        assert!(ctx.config().checked_callback_url(&named, Some("https://relay.acme.example/cb")).is_ok());
        assert!(ctx.config().checked_callback_url(&named, Some("https://relay.example/cb")).is_err());
    }

    #[test]
    fn a_setting_is_read_once_per_request() {
        let ctx = Ctx::with_settings(&[("pending_ttl_seconds", "60")]);
        assert_eq!(ctx.config().pending_ttl_seconds().ok(), Some(60.0));
        assert!(ctx.config().read.borrow().contains_key("pending_ttl_seconds"));
    }
}

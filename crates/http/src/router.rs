//! Routing inside a component: which handler answers a request, and what it must pass first.
//!
//! A component declares its routes as Spin's manifest writes them, each with a method, who may
//! use it and a handler:
//!
//! ```ignore
//! use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};
//!
//! gatehouse_http::component!(routes);
//!
//! fn routes() -> Router<'static> {
//!     Router::new().delete("/voice-tools/cancel/:id", Access::Key(Scope::CallsWrite), cancel)
//! }
//!
//! async fn cancel(req: Request, params: Params) -> Result<Reply, ApiError> {
//!     let id = params.call_id()?;
//!     // ...
//! }
//! ```
//!
//! The router dispatches on the route *pattern* Spin reports (`spin-matched-route`), never on
//! the path: `/voice-tools/sweep/` (a trailing slash) matches the route `/voice-tools/sweep` but
//! is not that path, and a decision taken on the path would let it skip the token. Spin's own
//! `Router` matches paths and answers 404/405 in plain text, so this one is ours.
//!
//! Every request passes the same gates in the same order: the method (405 with `Allow`), then
//! the route's [`Access`] (401, or 403 for a key without the route's scope), then the handler,
//! which checks the body and the parameters.

use std::future::Future;
use std::pin::Pin;

use gatehouse_domain::keys::{Grant, Scope};
use gatehouse_domain::{ApiError, ToolCallId};
use spin_sdk::http::{Method, Request};

use crate::route::{self, matched_route};
use crate::serve::Reply;

/// Who may use a route, checked after the method and before the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A public route of the API: a bearer key with this scope, or `api_token` (see
    /// [`crate::require_key`]); the handler reads who it is from [`Params::grant`].
    Key(Scope),
    /// A route for any valid key, whatever its scopes (`/voice-tools/key`: who am I).
    AnyKey,
    /// A service route (the tool contract, the executor hand-off): chained from this
    /// application, or signed with `contract_secret` (see [`crate::require_service_request`]).
    Service,
    /// The router checks nothing: the route is open (`/health`), reachable only by service
    /// chaining from this application (the sweeper's private route), or its handler checks
    /// the caller itself, in an order of its own (`/mcp`).
    Open,
}

impl Access {
    /// Who the request is, for a route that needs a key.
    fn check(self, req: &Request) -> Result<Option<Grant>, ApiError> {
        match self {
            Access::Key(scope) => crate::require_key(req, scope).map(Some),
            Access::AnyKey => crate::identify(req).map(Some),
            Access::Service => crate::require_service_request(req).map(|()| None),
            Access::Open => Ok(None),
        }
    }
}

/// What a handler returns: its future, boxed so that routes with different handlers fit one list.
type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Result<Reply, ApiError>> + 'a>>;
type Handler<'a> = Box<dyn Fn(Request, Params) -> HandlerFuture<'a> + 'a>;

/// One declared route: a pattern as the manifest writes it and the method it answers
/// (`None`: every method, for a handler that answers 405s its own way).
struct Route<'a> {
    method: Option<Method>,
    pattern: String,
    access: Access,
    handler: Handler<'a>,
}

/// The routes of one component. Built for each request (a few small boxes), then consumed by
/// [`Router::dispatch`]; `'a` lets a handler borrow what the component serves, such as its tool.
#[derive(Default)]
pub struct Router<'a> {
    routes: Vec<Route<'a>>,
}

impl<'a> Router<'a> {
    pub fn new() -> Router<'a> {
        Router { routes: Vec::new() }
    }

    /// `GET pattern`.
    pub fn get<F, Fut>(self, pattern: impl Into<String>, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        self.add(Some(Method::Get), pattern.into(), access, handler)
    }

    /// `POST pattern`.
    pub fn post<F, Fut>(self, pattern: impl Into<String>, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        self.add(Some(Method::Post), pattern.into(), access, handler)
    }

    /// `PATCH pattern`.
    pub fn patch<F, Fut>(self, pattern: impl Into<String>, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        self.add(Some(Method::Patch), pattern.into(), access, handler)
    }

    /// `DELETE pattern`.
    pub fn delete<F, Fut>(self, pattern: impl Into<String>, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        self.add(Some(Method::Delete), pattern.into(), access, handler)
    }

    /// Every method of `pattern`: the router never answers 405 there, the handler decides.
    pub fn any<F, Fut>(self, pattern: impl Into<String>, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        self.add(None, pattern.into(), access, handler)
    }

    fn add<F, Fut>(mut self, method: Option<Method>, pattern: String, access: Access, handler: F) -> Router<'a>
    where
        F: Fn(Request, Params) -> Fut + 'a,
        Fut: Future<Output = Result<Reply, ApiError>> + 'a,
    {
        let handler: Handler<'a> = Box::new(move |req, params| Box::pin(handler(req, params)));
        self.routes.push(Route { method, pattern, access, handler });
        self
    }

    /// Answers `req`: the route's method (405), its access (401), then its handler.
    pub async fn dispatch(self, req: Request) -> Result<Reply, ApiError> {
        let route = self.select(matched_route(&req), req.method())?;
        let grant = route.access.check(&req)?;
        let params = Params { grant, ..Params::of(&req, &route.pattern) };
        (route.handler)(req, params).await
    }

    /// The route for a request that matched `pattern` with `method`, or the error to answer.
    fn select(&self, pattern: Option<&str>, method: &Method) -> Result<&Route<'a>, ApiError> {
        let mut on_pattern = self.routes.iter().filter(|route| Some(route.pattern.as_str()) == pattern).peekable();
        if on_pattern.peek().is_none() {
            // Spin sent a route this component does not declare: the manifest and the code
            // disagree, a deployment bug the operator must see, not a client mistake.
            let pattern = pattern.unwrap_or("(no spin-matched-route)");
            return Err(ApiError::internal()
                .with_detail(format!("the manifest routes {pattern} to a component that does not serve it")));
        }
        let mut allowed: Vec<String> = Vec::new();
        for route in on_pattern {
            match &route.method {
                None => return Ok(route),
                Some(accepted) if accepted == method => return Ok(route),
                Some(accepted) => allowed.push(accepted.to_string()),
            }
        }
        Err(ApiError::method_not_allowed(allowed.join(", ")))
    }
}

/// The parameters of the route a request matched, as Spin passed them, for the handler to
/// read in the type it needs. Each read checks the value when the handler asks for it, so the
/// handler keeps its own order of checks (a body problem before a bad `:id`, say).
#[derive(Debug, Default)]
pub struct Params {
    /// Each `:name` of the pattern and its raw segment (`spin-path-match-<name>`), if Spin sent one.
    segments: Vec<(String, Option<String>)>,
    /// What a trailing `/...` matched (`spin-path-info`); `None` on a pattern without one.
    rest: Option<String>,
    /// Who the request is, on a route that needs a key.
    grant: Option<Grant>,
}

impl Params {
    fn of(req: &Request, pattern: &str) -> Params {
        let segments = pattern
            .split('/')
            .filter_map(|segment| segment.strip_prefix(':'))
            .map(|name| {
                let raw = route::header(req, &format!("spin-path-match-{name}")).map(str::to_owned);
                (name.to_owned(), raw)
            })
            .collect();
        let rest = if pattern.ends_with("/...") {
            Some(route::header(req, "spin-path-info").unwrap_or_default().to_owned())
        } else {
            None
        };
        Params { segments, rest, grant: None }
    }

    /// Who the request is: the key's tenant and scopes. A route that needs no key has none,
    /// and a handler that asks for it there fails closed.
    pub fn grant(&self) -> Result<&Grant, ApiError> {
        self.grant.as_ref().ok_or_else(|| ApiError::internal().with_detail("a route without a key asked for one"))
    }

    /// The `:name` segment, percent-decoded as UTF-8; a malformed escape is a 400.
    pub fn text(&self, name: &str) -> Result<String, ApiError> {
        let raw = self.segments.iter().find(|(declared, _)| declared == name).and_then(|(_, raw)| raw.as_deref());
        route::decode_path_param(name, raw)
    }

    /// The `:id` segment as a tool call id; a malformed one is a 404, like an unknown one.
    pub fn call_id(&self) -> Result<ToolCallId, ApiError> {
        route::parse_call_id(&self.text("id")?)
    }

    /// The part of the path a trailing `/...` matched, with its leading `/` (`/tool/prepare` for
    /// `/internal/tools/gmail/tool/prepare` on `/internal/tools/gmail/...`; the whole path on
    /// the chained route `/...`). Empty on a pattern without a wildcard.
    pub fn rest(&self) -> &str {
        self.rest.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use gatehouse_domain::ErrorCode;

    use super::*;

    async fn ok(_req: Request, _params: Params) -> Result<Reply, ApiError> {
        Ok(crate::json_response(200, &serde_json::json!({})).into())
    }

    fn routes() -> Router<'static> {
        Router::new()
            .get("/voice-tools/status/:id", Access::Key(Scope::CallsRead), ok)
            .post("/things/:name", Access::Key(Scope::CallsRead), ok)
            .patch("/things/:name", Access::Key(Scope::CallsRead), ok)
            .post(crate::CHAINED_ROUTE, Access::Open, ok)
            .post("/voice-tools/sweep", Access::Key(Scope::Admin), ok)
            .any("/mcp", Access::Open, ok)
    }

    /// The access of the route `method pattern` selects, or the error code and `Allow` it answers.
    fn decide(method: Method, pattern: Option<&str>) -> Result<Access, (ErrorCode, Option<String>)> {
        let router = routes();
        router.select(pattern, &method).map(|route| route.access).map_err(|error| (error.code, error.allow))
    }

    #[test]
    fn selects_the_route_by_pattern_and_method() {
        assert_eq!(decide(Method::Get, Some("/voice-tools/status/:id")), Ok(Access::Key(Scope::CallsRead)));
        assert_eq!(decide(Method::Patch, Some("/things/:name")), Ok(Access::Key(Scope::CallsRead)));
        assert_eq!(decide(Method::Delete, Some("/mcp")), Ok(Access::Open));
        assert_eq!(decide(Method::Other("BREW".into()), Some("/mcp")), Ok(Access::Open));
    }

    #[test]
    fn another_method_is_a_405_allowing_every_method_of_the_route() {
        let not_allowed = |allow: &str| Err((ErrorCode::MethodNotAllowed, Some(allow.to_owned())));
        assert_eq!(decide(Method::Post, Some("/voice-tools/status/:id")), not_allowed("GET"));
        assert_eq!(decide(Method::Get, Some("/things/:name")), not_allowed("POST, PATCH"));
    }

    #[test]
    fn the_key_is_declared_per_route_not_per_component() {
        // The sweeper: the host timer's chained route is open, the public one needs an admin key.
        assert_eq!(decide(Method::Post, Some(crate::CHAINED_ROUTE)), Ok(Access::Open));
        assert_eq!(decide(Method::Post, Some("/voice-tools/sweep")), Ok(Access::Key(Scope::Admin)));
    }

    #[test]
    fn an_undeclared_route_is_our_error_not_the_clients() {
        assert_eq!(decide(Method::Get, Some("/somewhere/else")).map_err(|e| e.0), Err(ErrorCode::Internal));
        assert_eq!(decide(Method::Get, None).map_err(|e| e.0), Err(ErrorCode::Internal));
    }

    fn request(method: Method, pattern: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder();
        builder.method(method).uri("/whatever").header("spin-matched-route", pattern);
        for (name, value) in headers {
            builder.header(*name, *value);
        }
        builder.build()
    }

    fn params(pattern: &str, headers: &[(&str, &str)]) -> Params {
        Params::of(&request(Method::Get, pattern, headers), pattern)
    }

    #[test]
    fn reads_typed_parameters() {
        let status = params("/voice-tools/status/:id", &[("spin-path-match-id", "tc_000000000000")]);
        assert_eq!(status.call_id().ok().map(|id| id.to_string()).as_deref(), Some("tc_000000000000"));
        let named = params("/voice-tools/tools/:name/stats", &[("spin-path-match-name", "send%5Femail")]);
        assert_eq!(named.text("name").ok().as_deref(), Some("send_email"));
        let contract = params("/internal/tools/gmail/...", &[("spin-path-info", "/tool/prepare")]);
        assert_eq!(contract.rest(), "/tool/prepare");
        assert_eq!(named.rest(), "");
    }

    #[test]
    fn parameter_errors_keep_their_status() {
        fn code<T>(result: Result<T, ApiError>) -> Option<ErrorCode> {
            result.err().map(|error| error.code)
        }
        let malformed_id = params("/voice-tools/status/:id", &[("spin-path-match-id", "not-an-id")]);
        assert_eq!(code(malformed_id.call_id()), Some(ErrorCode::NotFound));
        let bad_escape = params("/voice-tools/context/:session", &[("spin-path-match-session", "a%zz")]);
        assert_eq!(code(bad_escape.text("session")), Some(ErrorCode::InvalidInput));
        // A handler asking for a segment its route does not have is a bug of ours.
        assert_eq!(code(bad_escape.text("id")), Some(ErrorCode::Internal));
        let missing = params("/voice-tools/status/:id", &[]);
        assert_eq!(code(missing.call_id()), Some(ErrorCode::Internal));
    }

    /// Runs a future that never waits (every handler here answers at once).
    fn now<T>(future: impl Future<Output = T>) -> T {
        match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(value) => value,
            Poll::Pending => panic!("the future waited"),
        }
    }

    #[test]
    fn dispatch_checks_the_method_before_calling_the_handler() {
        let echo = |_req: Request, params: Params| async move {
            Ok(crate::json_response(200, &serde_json::json!({"id": params.call_id()?.to_string()})).into())
        };
        let router = || Router::new().any("/open/:id", Access::Open, echo).post("/post", Access::Open, ok);

        let found = now(router().dispatch(request(Method::Put, "/open/:id", &[("spin-path-match-id", "tc_x")])));
        assert_eq!(found.err().map(|e| e.code), Some(ErrorCode::NotFound), "the handler read a malformed :id");
        let answered = now(router().dispatch(request(Method::Post, "/post", &[])));
        assert_eq!(answered.ok().map(|reply| *reply.response.status()), Some(200));
        let refused = now(router().dispatch(request(Method::Get, "/post", &[])));
        assert_eq!(refused.err().and_then(|e| e.allow).as_deref(), Some("POST"));
    }
}

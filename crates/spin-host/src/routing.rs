//! Spin's HTTP routing rules.
//!
//! A route is a sequence of segments, each a literal or a `:name` parameter, optionally ending
//! in the `/...` wildcard. When several routes match a path the most specific one wins:
//! segment by segment a literal beats a parameter, then a route without a wildcard beats one
//! with, then the longer route wins. Private routes are not in the table: they are reached only
//! through service chaining, by component id.
use std::collections::BTreeMap;

use crate::manifest::{HttpTrigger, ManifestError, RouteDecl};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

#[derive(Debug, Clone)]
pub(crate) struct RoutePattern {
    raw: String,
    segments: Vec<Segment>,
    wildcard: bool,
}

/// What a request matched: which component, and the values Spin passes in `spin-*` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteMatch {
    pub component: String,
    /// The trigger route as written, e.g. `/voice-tools/status/:id` or `/static/...`.
    pub raw_route: String,
    /// The route without its trailing wildcard, e.g. `/static`.
    pub component_route: String,
    /// The rest of the path after the matched part, e.g. `/a/b/`; empty for an exact match.
    pub path_info: String,
    pub params: BTreeMap<String, String>,
}

impl RoutePattern {
    pub(crate) fn parse(raw: &str) -> Result<RoutePattern, ManifestError> {
        let invalid = |reason: &str| ManifestError::Route { route: raw.to_owned(), reason: reason.to_owned() };
        if !raw.starts_with('/') {
            return Err(invalid("a route must start with '/'"));
        }
        let (body, wildcard) = match raw.strip_suffix("/...") {
            Some(body) => (body, true),
            None if raw == "..." => ("", true),
            None => (raw, false),
        };
        let mut segments = Vec::new();
        for part in body.split('/').filter(|s| !s.is_empty()) {
            if part == "..." {
                return Err(invalid("'...' may only end a route"));
            }
            match part.strip_prefix(':') {
                Some("") => return Err(invalid("a parameter needs a name")),
                Some(name) => segments.push(Segment::Param(name.to_owned())),
                None => segments.push(Segment::Literal(part.to_owned())),
            }
        }
        Ok(RoutePattern { raw: raw.to_owned(), segments, wildcard })
    }

    fn matches(&self, path_segments: &[&str]) -> Option<BTreeMap<String, String>> {
        let n = self.segments.len();
        if path_segments.len() < n || (!self.wildcard && path_segments.len() != n) {
            return None;
        }
        let mut params = BTreeMap::new();
        for (segment, actual) in self.segments.iter().zip(path_segments) {
            match segment {
                Segment::Literal(lit) if lit == actual => {}
                Segment::Literal(_) => return None,
                Segment::Param(name) => {
                    params.insert(name.clone(), (*actual).to_owned());
                }
            }
        }
        Some(params)
    }

    /// Orders two matching routes: `Greater` means `self` is more specific.
    fn specificity_cmp(&self, other: &RoutePattern) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        for (a, b) in self.segments.iter().zip(&other.segments) {
            let rank = |s: &Segment| matches!(s, Segment::Literal(_)) as u8;
            match rank(a).cmp(&rank(b)) {
                Ordering::Equal => {}
                unequal => return unequal,
            }
        }
        match (self.wildcard, other.wildcard) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            _ => self.segments.len().cmp(&other.segments.len()),
        }
    }

    fn component_route(&self) -> String {
        self.raw
            .strip_suffix("/...")
            .map(str::to_owned)
            .unwrap_or_else(|| if self.raw == "/..." { String::new() } else { self.raw.clone() })
    }
}

/// The public routing table of an application.
#[derive(Debug, Default)]
pub(crate) struct Router {
    routes: Vec<(RoutePattern, String)>,
}

impl Router {
    pub(crate) fn new(triggers: &[HttpTrigger]) -> Result<Router, ManifestError> {
        let mut routes = Vec::new();
        for trigger in triggers {
            if let RouteDecl::Path(raw) = &trigger.route {
                routes.push((RoutePattern::parse(raw)?, trigger.component.clone()));
            }
        }
        Ok(Router { routes })
    }

    /// The public routes of `component`, as the manifest writes them.
    pub(crate) fn routes_of<'a>(&'a self, component: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.routes.iter().filter(move |(_, c)| c == component).map(|(pattern, _)| pattern.raw.as_str())
    }

    pub(crate) fn route(&self, path: &str) -> Option<RouteMatch> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (pattern, component, params) = self
            .routes
            .iter()
            .filter_map(|(p, c)| p.matches(&segments).map(|params| (p, c, params)))
            .max_by(|(a, ..), (b, ..)| a.specificity_cmp(b))?;
        Some(RouteMatch {
            component: component.clone(),
            raw_route: pattern.raw.clone(),
            component_route: pattern.component_route(),
            path_info: path_after_segments(path, pattern.segments.len()).to_owned(),
            params,
        })
    }
}

impl RouteMatch {
    /// How Spin routes a request that reached a component by service chaining: as if the
    /// component matched `/...`, whatever its own route, with the whole path as path info.
    pub(crate) fn chained(component: &str, path: &str) -> RouteMatch {
        RouteMatch {
            component: component.to_owned(),
            raw_route: "/...".into(),
            component_route: String::new(),
            path_info: path.to_owned(),
            params: BTreeMap::new(),
        }
    }
}

/// The part of `path` after its first `n` non-empty segments, keeping a trailing slash
/// (`/static/css/` after one segment is `/css/`), as Spin's path info does.
fn path_after_segments(path: &str, n: usize) -> &str {
    let mut rest = path;
    for _ in 0..n {
        rest = rest.trim_start_matches('/');
        rest = rest.find('/').map_or("", |i| &rest[i..]);
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let triggers: Vec<HttpTrigger> = routes
            .iter()
            .map(|(route, component)| HttpTrigger {
                id: None,
                route: RouteDecl::Path((*route).to_owned()),
                component: (*component).to_owned(),
            })
            .collect();
        Router::new(&triggers).expect("valid routes")
    }

    fn winner(router: &Router, path: &str) -> Option<String> {
        router.route(path).map(|m| m.component)
    }

    #[test]
    fn routing_table() {
        let r = router(&[
            ("/...", "catch-all"),
            ("/health", "health"),
            ("/static/...", "static"),
            ("/static/special/...", "special"),
            ("/voice-tools/status/:id", "status"),
            ("/voice-tools/status/latest", "latest"),
            ("/voice-tools/tools/:name/executions", "executions"),
            ("/users/:id/...", "user-files"),
        ]);
        let cases = [
            ("/health", "health"),
            ("/health/", "health"),
            ("/healthz", "catch-all"),
            ("/health/more", "catch-all"),
            ("/static", "static"),
            ("/static/a/b.css", "static"),
            ("/static/special/x", "special"),
            ("/voice-tools/status/tc_0123456789ab", "status"),
            ("/voice-tools/status/latest", "latest"),
            ("/voice-tools/status/a/b", "catch-all"),
            ("/voice-tools/tools/send_email/executions", "executions"),
            ("/users/7/avatar.png", "user-files"),
            ("/", "catch-all"),
        ];
        for (path, expected) in cases {
            assert_eq!(winner(&r, path).as_deref(), Some(expected), "path {path}");
        }
    }

    #[test]
    fn no_route_without_catch_all() {
        let r = router(&[("/health", "health"), ("/a/:b", "ab")]);
        assert_eq!(winner(&r, "/nope"), None);
        assert_eq!(winner(&r, "/a"), None);
        assert_eq!(winner(&r, "/a/b/c"), None);
    }

    #[test]
    fn match_details_feed_spin_headers() {
        let r = router(&[("/static/...", "static"), ("/items/:id", "item")]);
        let m = r.route("/static/css/site.css").expect("matches");
        assert_eq!(m.raw_route, "/static/...");
        assert_eq!(m.component_route, "/static");
        assert_eq!(m.path_info, "/css/site.css");
        assert_eq!(r.route("/static/css/").expect("matches").path_info, "/css/");
        assert_eq!(r.route("/static/").expect("matches").path_info, "/");
        assert_eq!(r.route("/static").expect("matches").path_info, "");
        let m = r.route("/items/42").expect("matches");
        assert_eq!(m.params.get("id").map(String::as_str), Some("42"));
        assert_eq!(m.path_info, "");
        assert_eq!(m.raw_route, "/items/:id");
    }

    #[test]
    fn private_routes_are_not_public() {
        let triggers =
            vec![HttpTrigger { id: None, route: RouteDecl::Private { private: true }, component: "executor".into() }];
        let r = Router::new(&triggers).expect("valid");
        assert_eq!(r.route("/"), None);
        assert_eq!(r.route("/executor"), None);
    }

    #[test]
    fn rejects_malformed_routes() {
        assert!(RoutePattern::parse("health").is_err());
        assert!(RoutePattern::parse("/a/.../b").is_err());
        assert!(RoutePattern::parse("/a/:").is_err());
    }
}

//! Spin's reserved routes, `/.well-known/spin/...`, which the host answers itself and no
//! application sees: `health` (200 while the host accepts requests) and `info`. While the host
//! drains before it stops, `health` answers 503, so a proxy or Kubernetes stops sending it new
//! requests before it goes away; everything else is still served meanwhile.
//!
//! The application hands over what these routes report as plain data ([`HostStatus`]) and
//! turns the [`HostAnswer`] into a response, so this module never names it (docs/architecture.md,
//! "The Spin host").

use gatehouse_domain::ErrorCode;
use http::StatusCode;
use serde_json::json;

use crate::host_answer::HostAnswer;

const TEXT: &str = "text/plain";

/// The prefix Spin reserves for itself.
pub(crate) const PREFIX: &str = "/.well-known/spin/";

/// What the reserved routes report about the host, at the time of the request.
pub(crate) struct HostStatus<'a> {
    /// The application's name, from its manifest.
    pub application: &'a str,
    /// Whether the host has started to stop.
    pub draining: bool,
}

/// The host's own answer to a path under [`PREFIX`].
pub(crate) fn answer(status: &HostStatus<'_>, path: &str) -> HostAnswer {
    match path.strip_prefix(PREFIX) {
        Some("health") if status.draining => HostAnswer::new(StatusCode::SERVICE_UNAVAILABLE, TEXT, "draining".into()),
        Some("health") => HostAnswer::new(StatusCode::OK, TEXT, "OK".into()),
        Some("info") => {
            let info = json!({
                "application": status.application,
                "host": concat!("gatehouse-spin-host ", env!("CARGO_PKG_VERSION")),
                "wasmtime": env!("GATEHOUSE_WASMTIME_VERSION"),
                "ready": !status.draining,
            });
            HostAnswer::new(StatusCode::OK, "application/json", info.to_string())
        }
        _ => HostAnswer::error(StatusCode::NOT_FOUND, ErrorCode::NotFound.as_str(), "Nothing is served at this path."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVING: HostStatus<'static> = HostStatus { application: "gatehouse", draining: false };
    const DRAINING: HostStatus<'static> = HostStatus { application: "gatehouse", draining: true };

    #[test]
    fn health_is_ok_until_the_host_drains() {
        assert_eq!(answer(&SERVING, "/.well-known/spin/health"), HostAnswer::new(StatusCode::OK, TEXT, "OK".into()));
        let draining = answer(&DRAINING, "/.well-known/spin/health");
        assert_eq!(draining.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(draining.body, "draining");
    }

    #[test]
    fn info_names_the_application_and_says_whether_it_is_ready() {
        for (status, ready) in [(&SERVING, true), (&DRAINING, false)] {
            let info = answer(status, "/.well-known/spin/info");
            assert_eq!((info.status, info.content_type), (StatusCode::OK, "application/json"));
            let body: serde_json::Value = serde_json::from_str(&info.body).expect("JSON");
            assert_eq!(body["application"], "gatehouse");
            assert_eq!(body["ready"], ready);
        }
    }

    #[test]
    fn any_other_reserved_path_is_a_404_in_the_api_error_shape() {
        let other = answer(&SERVING, "/.well-known/spin/other");
        assert_eq!(other.status, StatusCode::NOT_FOUND);
        let body: serde_json::Value = serde_json::from_str(&other.body).expect("JSON");
        assert_eq!(body, json!({"error": "Nothing is served at this path.", "code": "not_found"}));
    }
}

//! Where a guest's outbound request goes: refused by the manifest, served in-process by another
//! component (service chaining, `http://<component>.spin.internal/...`), or sent to the network.
//!
//! This is the seam between the host's `wasi:http` glue, which sees a guest's request, and the
//! application, which serves components. The glue holds an [`Outbound`] and asks it where each
//! request goes; the application implements [`ServeChained`] from above, so the glue never
//! names it (docs/architecture.md, "The Spin host").
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use http::{Request, Response, Uri};
use serde_json::json;

use crate::outbound::{Admission, AllowedHosts, CHAINING_SUFFIX, default_port};
use crate::telemetry::{GuestTelemetry, OutboundSpan};

/// A chained request's answer, once the component has produced its response head.
pub(crate) type ChainedResponse<B> = Pin<Box<dyn Future<Output = Result<Response<B>, ChainError>> + Send>>;

/// Serves `http://<component>.spin.internal/...` for another component; implemented by the
/// application, which knows its components.
pub(crate) trait ServeChained<B>: Send + Sync {
    fn serve_chained(self: Arc<Self>, component: String, request: Request<B>) -> ChainedResponse<B>;
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChainError {
    #[error("this application has no component '{0}'")]
    UnknownComponent(String),
    #[error("the application is shutting down")]
    ShuttingDown,
}

impl ChainError {
    /// The failure as a span's `error.type` and the outbound metric's outcome, the same on every
    /// wasmtime release's glue.
    pub(crate) fn error_type(&self) -> &'static str {
        match self {
            ChainError::UnknownComponent(_) => "destination_not_found",
            ChainError::ShuttingDown => "shutting_down",
        }
    }
}

/// One component's outbound rules and the way back to the application for chaining.
pub(crate) struct Outbound<B> {
    component: Arc<str>,
    allowed: Arc<AllowedHosts>,
    chain: Weak<dyn ServeChained<B>>,
    /// The sending component's span and metrics: each request's span is its child
    /// (src/telemetry.rs).
    telemetry: GuestTelemetry,
}

/// Where one request goes.
pub(crate) enum Destination<B> {
    /// The manifest does not allow it; the refusal is logged with the target.
    Denied,
    /// Another component of this application serves it.
    Chained(Arc<dyn ServeChained<B>>, String),
    /// The application is gone (the host is stopping).
    ShuttingDown,
    /// Another host. Admitted by an entry naming its host exactly, it may be reached wherever
    /// it resolves; admitted by a wildcard only, not at a private address (see `network`).
    Network(
        // Hosts pinned to a Spin release send as Spin does, with no address check.
        #[cfg_attr(not(wasmtime_major = "48"), allow(dead_code))] Admission,
    ),
}

impl<B: 'static> Outbound<B> {
    pub(crate) fn new(
        component: Arc<str>,
        allowed: Arc<AllowedHosts>,
        chain: Weak<dyn ServeChained<B>>,
        telemetry: GuestTelemetry,
    ) -> Self {
        Outbound { component, allowed, chain, telemetry }
    }

    /// Starts the span of a request the guest sends, and puts its trace context on the request.
    /// `chained` says whether another component of this application serves it.
    pub(crate) fn start_span(&self, request: &mut Request<B>, chained: bool) -> OutboundSpan {
        self.telemetry.outbound(request, chained)
    }

    /// Rules for a store that no application serves (a unit test's): chaining finds nothing.
    #[cfg(test)]
    pub(crate) fn unchained(component: Arc<str>, allowed: Arc<AllowedHosts>) -> Self {
        struct Nowhere;
        impl<B: 'static> ServeChained<B> for Nowhere {
            fn serve_chained(self: Arc<Self>, component: String, _request: Request<B>) -> ChainedResponse<B> {
                Box::pin(async move { Err(ChainError::UnknownComponent(component)) })
            }
        }
        let chain: Weak<dyn ServeChained<B>> = Weak::<Nowhere>::new();
        Outbound { component, allowed, chain, telemetry: GuestTelemetry::detached() }
    }

    pub(crate) fn destination(&self, uri: &Uri) -> Destination<B> {
        let scheme = uri.scheme_str().unwrap_or("https").to_owned();
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().or_else(|| default_port(&scheme)).unwrap_or(0);
        let Some(admission) = self.allowed.admission(&scheme, &host, port) else {
            crate::log::warn(
                "outbound request denied",
                json!({"component": &*self.component, "target": format!("{scheme}://{host}:{port}")}),
            );
            return Destination::Denied;
        };
        match host.strip_suffix(CHAINING_SUFFIX) {
            Some(component) => match self.chain.upgrade() {
                Some(chain) => Destination::Chained(chain, component.to_owned()),
                None => Destination::ShuttingDown,
            },
            None => Destination::Network(admission),
        }
    }
}

//! Outbound `wasi:http`: Spin's `allowed_outbound_hosts` rule and service chaining.
//!
//! A request to `http://<component>.spin.internal/...` never touches the network: it is served
//! in-process by that component, which is how private routes are reached. Every other request
//! is refused unless the calling component's manifest entry admits its scheme, host and port.
use std::sync::{Arc, Weak};

use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::ComponentRuntime;
use crate::app::App;
use crate::outbound::default_port;

const CHAINING_SUFFIX: &str = ".spin.internal";

pub(super) struct OutboundHooks {
    app: Weak<App>,
    component: Arc<ComponentRuntime>,
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>),
                HttpError,
            >,
        > + Send,
>;

impl OutboundHooks {
    pub(super) fn new(app: Weak<App>, component: Arc<ComponentRuntime>) -> OutboundHooks {
        OutboundHooks { app, component }
    }

    fn denied(&self, target: String) -> ResponseFuture {
        crate::log::warn(
            "outbound request denied",
            serde_json::json!({"component": &*self.component.id, "target": target}),
        );
        Box::new(async { Err(HttpError::HttpRequestDenied) })
    }
}

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("https").to_owned();
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().or_else(|| default_port(&scheme)).unwrap_or(0);
        let target = format!("{scheme}://{host}:{port}");
        if !self.component.allowed_hosts.allows(&scheme, &host, port) {
            return self.denied(target);
        }
        if let Some(component) = host.strip_suffix(CHAINING_SUFFIX) {
            let Some(app) = self.app.upgrade() else {
                return Box::new(async { Err(HttpError::InternalError(Some("application is shutting down".into()))) });
            };
            let component = component.to_owned();
            return Box::new(async move {
                let response = app.dispatch_chained(&component, request).await?;
                Ok((response, Box::new(async { Ok(()) }) as Box<dyn Future<Output = _> + Send>))
            });
        }
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((response.map(BodyExt::boxed_unsync), Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

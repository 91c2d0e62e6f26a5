//! `wasi:http` glue for wasmtime 42 and 44: the wasmtime of Spin 3.6 (SpinKube's shim) and of
//! Spin 4.0. The host built on them is a test host: it serves the same components under each
//! release's own `wasmtime-wasi-http`, so CI sees what those Spin releases would do with them
//! (docs/architecture.md, "Hosts pinned to Spin's wasmtime").
//!
//! The two releases shape the crate alike but for where its items live (42 at the root, 44
//! under `p2`) and how a store's state presents itself (42: `ctx`, `table` and `send_request`
//! on the view; 44: a view of the three, with the hooks apart).
use http::{Request, Response};
use tokio::sync::oneshot;
use wasmtime::Store;
#[cfg(wasmtime_major = "44")]
use wasmtime::component::ResourceTable;
use wasmtime::component::{InstancePre, Linker, Resource};
use wasmtime_wasi::WasiView;
#[cfg(wasmtime_major = "42")]
use wasmtime_wasi_http as api;
#[cfg(wasmtime_major = "44")]
use wasmtime_wasi_http::p2 as api;

use api::HttpResult;
pub(crate) use api::WasiHttpView;
use api::bindings::ProxyPre;
use api::bindings::http::types::{ErrorCode, Scheme};
#[cfg(wasmtime_major = "44")]
use api::default_send_request;
#[cfg(wasmtime_major = "42")]
use api::types::default_send_request;
use api::types::{
    HostFutureIncomingResponse, HostIncomingRequest, HostResponseOutparam, IncomingResponse, OutgoingRequestConfig,
};
use wasmtime_wasi_http::WasiHttpCtx;

use crate::chaining::{ChainError, Destination, Outbound};

/// The body of every request and response the host passes to or takes from a guest.
pub(crate) type Body = api::body::HyperOutgoingBody;

/// The error a guest may answer a request with instead of a response.
pub(crate) type GuestError = ErrorCode;

/// A component pre-instantiated as a `wasi:http/incoming-handler`.
pub(crate) type Handler<T> = ProxyPre<T>;

/// The `wasi:http` part of a store's state.
pub(crate) struct HttpState {
    pub(crate) ctx: WasiHttpCtx,
    hooks: OutboundHooks,
}

impl HttpState {
    pub(crate) fn new(outbound: Outbound<Body>) -> HttpState {
        HttpState { ctx: WasiHttpCtx::new(), hooks: OutboundHooks(outbound) }
    }

    #[cfg(wasmtime_major = "44")]
    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> api::WasiHttpCtxView<'a> {
        api::WasiHttpCtxView { ctx: &mut self.ctx, table, hooks: &mut self.hooks }
    }

    #[cfg(wasmtime_major = "42")]
    pub(crate) fn send_request(
        &mut self,
        request: Request<Body>,
        config: OutgoingRequestConfig,
    ) -> HttpResult<HostFutureIncomingResponse> {
        self.hooks.send(request, config)
    }
}

/// Implements [`WasiHttpView`] for a store state with an [`HttpState`] field and a
/// `ResourceTable` field, named in that order.
#[cfg(wasmtime_major = "42")]
macro_rules! impl_wasi_http_view {
    ($state:ty, $http:ident, $table:ident) => {
        impl $crate::wasi_http::WasiHttpView for $state {
            fn ctx(&mut self) -> &mut ::wasmtime_wasi_http::WasiHttpCtx {
                &mut self.$http.ctx
            }

            fn table(&mut self) -> &mut ::wasmtime::component::ResourceTable {
                &mut self.$table
            }

            fn send_request(
                &mut self,
                request: ::http::Request<$crate::wasi_http::Body>,
                config: ::wasmtime_wasi_http::types::OutgoingRequestConfig,
            ) -> ::wasmtime_wasi_http::HttpResult<::wasmtime_wasi_http::types::HostFutureIncomingResponse> {
                self.$http.send_request(request, config)
            }
        }
    };
}

/// Implements [`WasiHttpView`] for a store state with an [`HttpState`] field and a
/// `ResourceTable` field, named in that order.
#[cfg(wasmtime_major = "44")]
macro_rules! impl_wasi_http_view {
    ($state:ty, $http:ident, $table:ident) => {
        impl $crate::wasi_http::WasiHttpView for $state {
            fn http(&mut self) -> ::wasmtime_wasi_http::p2::WasiHttpCtxView<'_> {
                self.$http.view(&mut self.$table)
            }
        }
    };
}
pub(crate) use impl_wasi_http_view;

/// WASI preview 2 and `wasi:http`'s types and outgoing handler.
pub(crate) fn add_to_linker<T: WasiView + WasiHttpView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    api::add_only_http_to_linker_async(linker)?;
    Ok(())
}

pub(crate) fn handler<T: WasiHttpView + 'static>(pre: InstancePre<T>) -> anyhow::Result<Handler<T>> {
    ProxyPre::new(pre).map_err(anyhow::Error::from)
}

/// One request put into a store for its guest, and where the guest's response will arrive.
pub(crate) struct Exchange {
    request: Resource<HostIncomingRequest>,
    outparam: Resource<HostResponseOutparam>,
}

pub(crate) type GuestAnswer = oneshot::Receiver<Result<Response<Body>, GuestError>>;

pub(crate) fn exchange<T: WasiHttpView>(
    store: &mut Store<T>,
    request: Request<Body>,
) -> wasmtime::Result<(Exchange, GuestAnswer)> {
    let (sender, answer) = oneshot::channel();
    #[cfg(wasmtime_major = "42")]
    let http = store.data_mut();
    #[cfg(wasmtime_major = "44")]
    let mut http = store.data_mut().http();
    let request = http.new_incoming_request(Scheme::Http, request)?;
    let outparam = http.new_response_outparam(sender)?;
    Ok((Exchange { request, outparam }, answer))
}

/// Instantiates the guest and calls its `handle` with the exchange's request.
pub(crate) async fn run<T: WasiHttpView + Send + 'static>(
    handler: &Handler<T>,
    store: &mut Store<T>,
    exchange: Exchange,
) -> wasmtime::Result<()> {
    let proxy = handler.instantiate_async(&mut *store).await?;
    proxy.wasi_http_incoming_handler().call_handle(&mut *store, exchange.request, exchange.outparam).await
}

struct OutboundHooks(Outbound<Body>);

impl OutboundHooks {
    fn send(
        &mut self,
        mut request: Request<Body>,
        config: OutgoingRequestConfig,
    ) -> HttpResult<HostFutureIncomingResponse> {
        match self.0.destination(request.uri()) {
            Destination::Denied => Err(ErrorCode::HttpRequestDenied.into()),
            Destination::ShuttingDown => Err(chain_error(ChainError::ShuttingDown).into()),
            // As the Spin release this host stands in for sends it: no address check, and no
            // span of the host's own (docs/architecture.md, "Traces").
            Destination::Network(_) => Ok(default_send_request(request, config)),
            Destination::Chained(app, component) => {
                let between_bytes_timeout = config.between_bytes_timeout;
                let span = self.0.start_span(&mut request, true);
                let task = wasmtime_wasi::runtime::spawn(async move {
                    let answer = app.serve_chained(component, request).await;
                    match &answer {
                        Ok(response) => span.answered(response.status()),
                        Err(e) => span.failed(e.error_type()),
                    }
                    Ok(answer
                        .map(|resp| IncomingResponse { resp, worker: None, between_bytes_timeout })
                        .map_err(chain_error))
                });
                Ok(HostFutureIncomingResponse::pending(task))
            }
        }
    }
}

#[cfg(wasmtime_major = "44")]
impl api::WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        request: Request<Body>,
        config: OutgoingRequestConfig,
    ) -> HttpResult<HostFutureIncomingResponse> {
        self.send(request, config)
    }
}

fn chain_error(error: ChainError) -> ErrorCode {
    match error {
        ChainError::UnknownComponent(_) => ErrorCode::DestinationNotFound,
        ChainError::ShuttingDown => ErrorCode::InternalError(Some(error.to_string())),
    }
}

/// Lets the guest read (and only read) the host folder `host` at `guest` (a component's
/// `files`, src/files.rs).
pub(crate) fn preopen_read_only(
    wasi: &mut wasmtime_wasi::WasiCtxBuilder,
    host: &std::path::Path,
    guest: &str,
) -> anyhow::Result<()> {
    wasi.preopened_dir(host, guest, wasmtime_wasi::DirPerms::READ, wasmtime_wasi::FilePerms::READ)?;
    Ok(())
}

//! `wasi:http` glue for wasmtime 48, the runner's own host.
//!
//! Everything in the host that depends on how a wasmtime release shapes `wasmtime-wasi-http`
//! lives in one file per shape; this one, `wasmtime42_44.rs` beside it, and nothing else.
//! docs/architecture.md ("Hosts pinned to Spin's wasmtime") says why the older ones exist.
use std::future::Future;

use http::{Request, Response};
use tokio::sync::oneshot;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker, Resource, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks};

pub(crate) use wasmtime_wasi_http::WasiHttpView;

use crate::chaining::{ChainError, Destination, Outbound};

/// The body of every request and response the host passes to or takes from a guest.
pub(crate) type Body = wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// The error a guest may answer a request with instead of a response.
pub(crate) type GuestError = ErrorCode;

/// A component pre-instantiated as a `wasi:http/incoming-handler`.
pub(crate) type Handler<T> = ProxyPre<T>;

/// The `wasi:http` part of a store's state.
pub(crate) struct HttpState {
    ctx: WasiHttpCtx,
    hooks: OutboundHooks,
}

impl HttpState {
    pub(crate) fn new(outbound: Outbound<Body>) -> HttpState {
        HttpState { ctx: WasiHttpCtx::new(), hooks: OutboundHooks(outbound) }
    }

    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView { ctx: &mut self.ctx, table, hooks: &mut self.hooks }
    }
}

/// Implements [`WasiHttpView`] for a store state with an [`HttpState`] field and a
/// `ResourceTable` field, named in that order.
macro_rules! impl_wasi_http_view {
    ($state:ty, $http:ident, $table:ident) => {
        impl $crate::wasi_http::WasiHttpView for $state {
            fn http(&mut self) -> ::wasmtime_wasi_http::WasiHttpCtxView<'_> {
                self.$http.view(&mut self.$table)
            }
        }
    };
}
pub(crate) use impl_wasi_http_view;

/// WASI preview 2 and `wasi:http`'s types and outgoing handler.
pub(crate) fn add_to_linker<T: WasiView + WasiHttpView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
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

type SendFuture = Box<
    dyn Future<Output = Result<(Response<Body>, Box<dyn Future<Output = Result<(), HttpError>> + Send>), HttpError>>
        + Send,
>;

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        mut request: Request<Body>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        match self.0.destination(request.uri()) {
            Destination::Denied => Box::new(async { Err(HttpError::HttpRequestDenied) }),
            Destination::ShuttingDown => Box::new(async { Err(chain_error(ChainError::ShuttingDown)) }),
            Destination::Chained(app, component) => {
                let span = self.0.start_span(&mut request, true);
                Box::new(async move {
                    let response = match app.serve_chained(component, request).await {
                        Ok(response) => response,
                        Err(e) => {
                            span.failed(e.error_type());
                            return Err(chain_error(e));
                        }
                    };
                    span.answered(response.status());
                    Ok((response, Box::new(async { Ok(()) }) as Box<dyn Future<Output = _> + Send>))
                })
            }
            Destination::Network(admission) => {
                let span = self.0.start_span(&mut request, false);
                Box::new(async move {
                    let timeouts = crate::network::Timeouts {
                        connect: options.and_then(|o| o.connect_timeout).unwrap_or(NETWORK_TIMEOUT),
                        first_byte: options.and_then(|o| o.first_byte_timeout).unwrap_or(NETWORK_TIMEOUT),
                    };
                    let (response, connection) = match crate::network::send(request, admission, timeouts).await {
                        Ok(sent) => sent,
                        Err(e) => {
                            span.failed(e.error_type());
                            return Err(network_error(e));
                        }
                    };
                    span.answered(response.status());
                    let io = async move {
                        match connection.await {
                            Ok(ended) => ended.map_err(HttpError::Hyper),
                            Err(e) => Err(HttpError::InternalError(Some(format!("the connection's task: {e}")))),
                        }
                    };
                    Ok((
                        crate::network::boxed(response, HttpError::Hyper),
                        Box::new(io) as Box<dyn Future<Output = _> + Send>,
                    ))
                })
            }
        }
    }
}

/// How long a step of a network request may take when the guest set no timeout of its own, as
/// wasmtime's default client allows.
const NETWORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

fn network_error(error: crate::network::NetworkError) -> HttpError {
    use crate::network::NetworkError;
    match error {
        NetworkError::NoHost => HttpError::HttpRequestUriInvalid,
        NetworkError::Dns => HttpError::DnsError { rcode: None, info_code: None },
        NetworkError::Prohibited => HttpError::DestinationIpProhibited,
        NetworkError::ConnectTimeout => HttpError::ConnectionTimeout,
        NetworkError::Connect => HttpError::ConnectionRefused,
        NetworkError::Tls => HttpError::TlsProtocolError,
        NetworkError::ResponseTimeout => HttpError::HttpResponseTimeout,
        NetworkError::Http(e) => HttpError::Hyper(e),
    }
}

fn chain_error(error: ChainError) -> HttpError {
    match error {
        ChainError::UnknownComponent(_) => HttpError::DestinationNotFound,
        ChainError::ShuttingDown => HttpError::InternalError(Some(error.to_string())),
    }
}

/// Lets the guest read (and only read) the host folder `host` at `guest` (a component's
/// `files`, src/files.rs).
pub(crate) fn preopen_read_only(
    wasi: &mut wasmtime_wasi::WasiCtxBuilder,
    host: &std::path::Path,
    guest: &str,
) -> anyhow::Result<()> {
    wasi.preopened_dir(host, guest, wasmtime_wasi::FsPerms::ReadOnly)?;
    Ok(())
}

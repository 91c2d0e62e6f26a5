//! The per-request store state: WASI, wasi:http with Spin's outbound rules, and the Spin host
//! interfaces (`spin:postgres/postgres@4.0.0`, `fermyon:spin/variables@2.0.0`,
//! `fermyon:spin/llm@2.0.0`).
mod http_hooks;
mod llm;
mod pg_values;
mod postgres;
mod variables;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use self::llm::LocalModels;
pub use self::postgres::{PgConnection, PgPools};
use crate::app::App;
use crate::log::GuestOutput;
use crate::outbound::AllowedHosts;

/// What a component is allowed and given, fixed at start-up.
pub struct ComponentRuntime {
    pub id: Arc<str>,
    pub variables: HashMap<String, String>,
    pub allowed_hosts: AllowedHosts,
    pub environment: Vec<(String, String)>,
    /// The manifest's `ai_models`: the only models the component may name.
    pub ai_models: Vec<String>,
    pub models: Arc<LocalModels>,
}

pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: http_hooks::OutboundHooks,
    component: Arc<ComponentRuntime>,
    pg: Arc<PgPools>,
}

impl HostState {
    pub fn new(app: Weak<App>, component: Arc<ComponentRuntime>, pg: Arc<PgPools>) -> HostState {
        let mut wasi = WasiCtx::builder();
        wasi.stdout(GuestOutput::new(component.id.clone(), "stdout"))
            .stderr(GuestOutput::new(component.id.clone(), "stderr"));
        for (key, value) in &component.environment {
            wasi.env(key, value);
        }
        HostState {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: http_hooks::OutboundHooks::new(app, component.clone()),
            component,
            pg,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

/// Every interface a Gatehouse component may import.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> anyhow::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    crate::bindings::SpinHost::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state)?;
    Ok(())
}

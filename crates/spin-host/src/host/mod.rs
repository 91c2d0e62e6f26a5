//! The per-request store state: WASI, wasi:http with Spin's outbound rules, and the Spin host
//! interfaces (`spin:postgres/postgres@4.0.0`, `fermyon:spin/variables@2.0.0`,
//! `fermyon:spin/llm@2.0.0`).
mod llm;
mod pg_values;
mod postgres;
mod variables;

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub(crate) use self::llm::LocalModels;
pub(crate) use self::postgres::PgPools;
pub use self::postgres::ZeroRows;
// `pub`, not `pub(crate)`: the generated bindings re-export it with `pub use`.
#[allow(unreachable_pub)]
pub use self::postgres::PgConnection;
use crate::chaining::Outbound;
use crate::log::GuestOutput;
use crate::outbound::AllowedHosts;
use crate::telemetry::GuestTelemetry;
use crate::wasi_http::{Body, HttpState};

/// What a component is allowed and given, fixed at start-up.
pub(crate) struct ComponentRuntime {
    pub id: Arc<str>,
    pub variables: HashMap<String, String>,
    pub allowed_hosts: Arc<AllowedHosts>,
    pub environment: Vec<(String, String)>,
    /// The manifest's `ai_models`: the only models the component may name.
    pub ai_models: Vec<String>,
    pub models: Arc<LocalModels>,
    /// The component's `files`, as folders to preopen read-only.
    pub mounts: Vec<crate::files::Mount>,
}

/// Table elements one table may hold. A Rust component's function table has a few thousand
/// entries; a table grown far past that is a guest gone wrong, not a bigger program.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// What one store may take: one component, so at most the core instances, memories and tables
/// the pool allows a component, each memory up to the pool's slot size. The pool enforces the
/// same bounds; the limiter makes them this store's own, so a guest that grows past them gets
/// a failed `memory.grow` or `table.grow` (a Rust guest then aborts, a trap), not the pool's
/// error, and a change of allocator would keep them.
fn store_limits() -> StoreLimits {
    let per_component = |limit: u32| usize::try_from(limit).unwrap_or(usize::MAX);
    StoreLimitsBuilder::new()
        .memory_size(crate::engine::MAX_MEMORY_BYTES)
        .table_elements(MAX_TABLE_ELEMENTS)
        .instances(per_component(crate::engine::MAX_CORE_INSTANCES_PER_COMPONENT))
        .memories(per_component(crate::engine::MAX_MEMORIES_PER_COMPONENT))
        .tables(per_component(crate::engine::MAX_TABLES_PER_COMPONENT))
        .build()
}

pub(crate) struct HostState {
    wasi: WasiCtx,
    http: HttpState,
    table: ResourceTable,
    component: Arc<ComponentRuntime>,
    pg: Arc<PgPools>,
    /// The component's span and metrics: each statement's span is its child (src/telemetry.rs).
    telemetry: GuestTelemetry,
    /// Installed with `Store::limiter`, which asks for it on every memory or table growth.
    pub limits: StoreLimits,
}

impl HostState {
    /// The state of one request's store: `outbound` decides where the guest's own requests go.
    pub(crate) fn new(
        outbound: Outbound<Body>,
        component: Arc<ComponentRuntime>,
        pg: Arc<PgPools>,
        telemetry: GuestTelemetry,
    ) -> HostState {
        let mut wasi = WasiCtx::builder();
        let span = telemetry.line_span();
        wasi.stdout(GuestOutput::new(component.id.clone(), "stdout", span.clone())).stderr(GuestOutput::new(
            component.id.clone(),
            "stderr",
            span,
        ));
        for (key, value) in &component.environment {
            wasi.env(key, value);
        }
        for mount in &component.mounts {
            // Checked when the application loaded; a folder removed since is the guest's
            // "file not found", and the log says why.
            if let Err(error) = crate::wasi_http::preopen_read_only(&mut wasi, &mount.host, &mount.guest) {
                let folder = mount.host.display().to_string();
                crate::log::warn(
                    "a component's files are unreadable",
                    serde_json::json!({"component": &*component.id, "folder": folder, "error": error.to_string()}),
                );
            }
        }
        HostState {
            wasi: wasi.build(),
            http: HttpState::new(outbound),
            table: ResourceTable::new(),
            component,
            pg,
            telemetry,
            limits: store_limits(),
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

crate::wasi_http::impl_wasi_http_view!(HostState, http, table);

/// Every interface a Gatehouse component may import.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> anyhow::Result<()> {
    crate::wasi_http::add_to_linker(linker)?;
    crate::bindings::SpinHost::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state)?;
    Ok(())
}

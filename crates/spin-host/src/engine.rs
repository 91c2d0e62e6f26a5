//! The wasmtime engine: compiled once, instances from a pooling allocator, and compiled
//! components cached on disk so a restart does not pay for Cranelift again. Compiled code
//! checks an epoch counter, which a ticker thread advances, so a busy guest can be made to
//! yield and, past its deadline, be stopped.
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Enabled, Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Concurrent instances across all components by default: requests in flight plus work that
/// continues after a response (confirm and resume answer first, then keep running).
pub const DEFAULT_MAX_INSTANCES: u32 = 1000;

/// The largest linear memory a guest may have. The pool reserves this much address space per
/// memory slot, and each store's limiter refuses growth beyond it.
pub(crate) const MAX_MEMORY_BYTES: usize = 256 << 20;

/// Core instances, memories and tables one component may bring; the pool refuses a component
/// above them when it is loaded.
pub(crate) const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 32;
pub(crate) const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
pub(crate) const MAX_TABLES_PER_COMPONENT: u32 = 8;

/// How often the epoch advances: how often a long-running guest yields to other tasks, and how
/// late past its deadline a busy guest can be stopped.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// An engine whose pool holds `max_instances` component instances at once.
pub(crate) fn new_engine(max_instances: u32) -> Result<Engine> {
    // Per instance, room for the usual component (a few core instances, one or two memories
    // and tables); never less than what one largest component needs, so a tiny pool still
    // runs any component.
    let core_instances = max_instances.saturating_mul(4).max(MAX_CORE_INSTANCES_PER_COMPONENT);
    let memories = max_instances.saturating_mul(2).max(MAX_MEMORIES_PER_COMPONENT);
    let tables = max_instances.saturating_mul(2).max(MAX_TABLES_PER_COMPONENT);
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(max_instances)
        .total_core_instances(core_instances)
        .total_memories(memories)
        .total_tables(tables)
        .total_stacks(max_instances)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .max_memory_size(MAX_MEMORY_BYTES)
        // Reset a slot's first pages in place instead of returning them to the kernel: the
        // madvise calls and page faults of recycling were a fifth of the runner's time under load.
        .linear_memory_keep_resident(16 << 20)
        .table_keep_resident(1 << 20)
        // Where the kernel has it (6.7+), reset only the pages an instance actually dirtied.
        .pagemap_scan(Enabled::Auto);
    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    // Compiled code checks the epoch at function entries and loop heads; see `start_epoch_ticker`.
    config.epoch_interruption(true);
    Engine::new(&config)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("creating the engine with a pool of {max_instances} instances"))
}

/// Starts advancing the engine's epoch every [`EPOCH_TICK`], on a thread of its own so it keeps
/// time even when every runtime worker is busy running guests.
///
/// The thread ends when the engine does, that is once the application and every store it
/// created are dropped, and not before: a guest still spinning after the application is gone
/// (past the shutdown grace period) must go on yielding, or it would hold its runtime worker,
/// and the runtime's shutdown, for ever.
pub(crate) fn start_epoch_ticker(engine: &Engine) -> Result<std::thread::JoinHandle<()>> {
    let engine = engine.weak();
    std::thread::Builder::new()
        .name("gatehouse-epoch".into())
        .spawn(move || tick_until_dropped(&engine, EPOCH_TICK))
        .context("starting the epoch ticker thread")
}

fn tick_until_dropped(engine: &EngineWeak, tick: Duration) {
    loop {
        std::thread::sleep(tick);
        match engine.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => return,
        }
    }
}

/// Loads a component, compiling it only if this exact file was not compiled by this exact
/// engine configuration before.
pub(crate) fn load_component(
    engine: &Engine,
    wasm_path: &Path,
    cache_dir: &Path,
    build_command: &str,
) -> Result<Component> {
    let wasm = std::fs::read(wasm_path)
        .with_context(|| format!("cannot read {} (run `{build_command}` first)", wasm_path.display()))?;
    let mut key = Sha256::new();
    key.update(&wasm);
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    key.update(engine_hash.finish().to_le_bytes());
    let cached = cache_dir.join(format!("{}.cwasm", hex::encode(key.finalize())));
    if cached.exists() {
        // SAFETY: the file was written by `precompile_component` of an engine with the same
        // compatibility hash (it is part of the file name), in a folder only this tool writes.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &cached) } {
            return Ok(component);
        }
    }
    let compiled = engine.precompile_component(&wasm)?;
    std::fs::create_dir_all(cache_dir)?;
    // Write then rename, so a concurrent runner never reads a half-written file.
    let partial = cached.with_extension(format!("{}.partial", std::process::id()));
    std::fs::write(&partial, &compiled)?;
    std::fs::rename(&partial, &cached)?;
    // SAFETY: as above; the bytes were just produced by this engine.
    Ok(unsafe { Component::deserialize(engine, &compiled) }?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use wasmtime::{Instance, Module, Store, UpdateDeadline};

    /// `(module (func (export "spin") (loop br 0)))`: a loop that never ends by itself.
    const SPIN: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
        0x03, 0x02, 0x01, 0x00, // one function of that type
        0x07, 0x08, 0x01, 0x04, b's', b'p', b'i', b'n', 0x00, 0x00, // export "spin"
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop br 0 end end
    ];

    #[derive(Debug, thiserror::Error)]
    #[error("stopped by the test")]
    struct StoppedByTheTest;

    /// The ticker's epochs reach a guest in an endless loop: it yields at each tick, and the
    /// deadline callback can stop it.
    #[tokio::test]
    async fn the_ticker_lets_a_deadline_callback_stop_an_endless_loop() {
        let engine = new_engine(1).expect("an engine");
        let ticker = start_epoch_ticker(&engine).expect("a ticker");
        let module = Module::new(&engine, SPIN).expect("the module compiles");
        let ticks = Arc::new(AtomicU32::new(0));
        let seen = ticks.clone();
        let mut store = Store::new(&engine, ());
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if seen.fetch_add(1, Ordering::Relaxed) < 3 {
                Ok(UpdateDeadline::Yield(1))
            } else {
                Err(wasmtime::Error::new(StoppedByTheTest))
            }
        });
        let instance = Instance::new_async(&mut store, &module, &[]).await.expect("instantiates");
        let spin = instance.get_typed_func::<(), ()>(&mut store, "spin").expect("the export");
        let outcome = tokio::time::timeout(Duration::from_secs(10), spin.call_async(&mut store, ())).await;
        let error = outcome.expect("the loop is stopped long before 10 s").expect_err("the loop cannot finish");
        // The callback's own error comes back, so the caller can tell a deadline from a trap.
        assert!(error.is::<StoppedByTheTest>(), "{error:#}");
        assert_eq!(ticks.load(Ordering::Relaxed), 4, "three yields, then the stop");

        // The ticker ends with the engine, once everything holding it is gone (a function's
        // type holds it too).
        drop((spin, instance, store, module, engine, error));
        let ended = tokio::task::spawn_blocking(move || ticker.join());
        tokio::time::timeout(Duration::from_secs(5), ended)
            .await
            .expect("the ticker thread ends once the engine is dropped")
            .expect("join")
            .expect("the ticker thread did not panic");
    }
}

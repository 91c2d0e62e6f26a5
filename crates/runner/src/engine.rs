//! The wasmtime engine: compiled once, instances from a pooling allocator, and compiled
//! components cached on disk so a restart does not pay for Cranelift again.
use std::hash::{Hash, Hasher};
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Concurrent instances across all components: requests in flight plus work that continues
/// after a response (confirm and resume answer first, then keep running).
const MAX_INSTANCES: u32 = 1000;

pub fn new_engine() -> Result<Engine> {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(MAX_INSTANCES)
        .total_core_instances(MAX_INSTANCES * 4)
        .total_memories(MAX_INSTANCES * 2)
        .total_tables(MAX_INSTANCES * 2)
        .total_stacks(MAX_INSTANCES)
        .max_core_instances_per_component(32)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_memory_size(256 << 20)
        // Reset a slot's first pages in place instead of returning them to the kernel: the
        // madvise calls and page faults of recycling were a fifth of the runner's time under load.
        .linear_memory_keep_resident(16 << 20)
        .table_keep_resident(1 << 20)
        // Where the kernel has it (6.7+), reset only the pages an instance actually dirtied.
        .pagemap_scan(Enabled::Auto);
    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    Ok(Engine::new(&config)?)
}

/// Loads a component, compiling it only if this exact file was not compiled by this exact
/// engine configuration before.
pub fn load_component(engine: &Engine, wasm_path: &Path, cache_dir: &Path) -> Result<Component> {
    let wasm = std::fs::read(wasm_path)
        .with_context(|| format!("cannot read {} (run `gatehouse build` first)", wasm_path.display()))?;
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

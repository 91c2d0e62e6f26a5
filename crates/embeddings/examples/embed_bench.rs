//! Embedding throughput and single-text latency on this machine:
//! `cargo run --release -p gatehouse-embeddings --example embed_bench -- FILE.jsonl [DOCS]`
//! (FILE from scripts/synthetic-corpus; the model from `.spin/ai-models/`).
use std::path::Path;
use std::time::Instant;

use gatehouse_embeddings::{Embedder, locate_model_dir};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next().ok_or("usage: embed_bench FILE.jsonl [DOCS]")?;
    let limit: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(1000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let before = rss_mb();
    let embedder = Embedder::load(&locate_model_dir(None, &[&root])?)?;
    println!("resident memory: {before:.0} MB before loading the model, {:.0} MB after", rss_mb());

    let text = std::fs::read_to_string(file)?;
    let contents: Vec<String> = text
        .lines()
        .take(limit)
        .map(|line| Ok(serde_json::from_str::<serde_json::Value>(line)?["content"].as_str().unwrap_or("").to_owned()))
        .collect::<Result<_, serde_json::Error>>()?;
    let texts: Vec<&str> = contents.iter().map(String::as_str).collect();

    let started = Instant::now();
    let mut tokens = 0;
    for chunk in texts.chunks(128) {
        tokens += embedder.embed_counting_tokens(chunk)?.token_count();
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "batched: {} docs in {seconds:.2} s = {:.1} docs/s ({:.1} tokens/doc)",
        texts.len(),
        texts.len() as f64 / seconds,
        tokens as f64 / texts.len() as f64
    );

    let queries = ["Q3 revenue in the Northwest", "late deliveries of routers", "customer feedback on battery life"];
    for query in queries {
        embedder.embed(&[query])?;
    }
    let mut latencies: Vec<f64> = Vec::new();
    for i in 0..200 {
        let query = format!("{} {}", queries[i % queries.len()], i);
        let started = Instant::now();
        embedder.embed(&[&query])?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!("single short query: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms", at(0.5), at(0.95), at(1.0));
    println!("resident memory after the runs: {:.0} MB", rss_mb());
    Ok(())
}

/// This process's resident set size, from /proc (0 where there is none).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

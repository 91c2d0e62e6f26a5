//! The `embed` scenario: the embedding model on its own, over the documents the database
//! holds, as `gatehouse ingest` embeds them, beside this machine's float32 matrix rate measured
//! in the same run; then one short query embedded alone, as the vector tool does per call.
//!
//! The model's rate is its matrix arithmetic ([`gatehouse_embeddings::flops_for_texts`]) over
//! the time the embedding took; the share is that rate over the matrix rate, the ceiling a
//! perfect engine would reach on this machine.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gatehouse_embeddings::{Embedder, MATRIX_SHAPE, MatrixRate, flops_for_texts, matrix_rate};
use hdrhistogram::Histogram;

use crate::timing::{histogram, micros, ms};

/// Documents embedded: the first this many by id.
const DOCUMENTS: i64 = 1000;
/// Texts per call to the embedder: `gatehouse ingest`'s default `--batch`.
pub(crate) const INGEST_BATCH: usize = 128;
/// How long the matrix product is repeated.
const MATRIX_TIME: Duration = Duration::from_secs(2);
/// Queries embedded alone before and while timing.
const QUERY_WARMUP: usize = 10;
const QUERY_RUNS: usize = 200;
/// Issue 19's goals.
const SHARE_GOAL_PERCENT: f64 = 80.0;
const QUERY_GOAL_MS: f64 = 3.0;
/// Memory read between two queries of [`query_after_eviction`]: four times a large server
/// processor's last-level cache share, more than the model's 90 MB of weights.
const EVICTION_BYTES: usize = 256 << 20;

/// What one run measured.
struct Measured {
    documents: usize,
    tokens: usize,
    elapsed: Duration,
    model_gflops: f64,
    matrix: MatrixRate,
    query: Histogram<u64>,
    evicted: Histogram<u64>,
}

/// Embeds the documents and the queries with the model in `model_dir`, and prints the figures.
pub(crate) async fn run(database_url: &str, model_dir: &Path, queries: Vec<String>) -> Result<()> {
    let contents = documents(database_url).await?;
    let model_dir = model_dir.to_path_buf();
    let measured = tokio::task::spawn_blocking(move || -> Result<Measured> {
        let embedder = Embedder::load(&model_dir).context("loading the embedding model")?;
        measure(&embedder, &contents, &queries)
    })
    .await
    .context("embedding task")??;
    print(&measured);
    Ok(())
}

/// The content of the first [`DOCUMENTS`] documents by id.
pub(crate) async fn documents(database_url: &str) -> Result<Vec<String>> {
    let (db, _driver) = gatehouse_pg_connect::connect(database_url)
        .await
        .context("connecting to the database for the embed scenario")?;
    let rows = db
        .query("SELECT content FROM documents ORDER BY id LIMIT $1", &[&DOCUMENTS])
        .await
        .context("reading documents (is the database migrated?)")?;
    if rows.is_empty() {
        bail!(
            "the embed scenario embeds the documents table, which is empty: load a corpus, for example \
             `scripts/synthetic-corpus 1000 -o docs.jsonl && gatehouse ingest docs.jsonl`"
        );
    }
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Times the documents (rows already read), then the matrix product, then the queries.
fn measure(embedder: &Embedder, contents: &[String], queries: &[String]) -> Result<Measured> {
    let texts: Vec<&str> = contents.iter().map(String::as_str).collect();
    let started = Instant::now();
    let mut tokens = 0;
    for batch in texts.chunks(INGEST_BATCH) {
        tokens += embedder.embed_counting_tokens(batch)?.token_count();
    }
    let elapsed = started.elapsed();
    let model_gflops = flops_for_texts(tokens, texts.len()) / elapsed.as_secs_f64() / 1e9;
    let matrix = matrix_rate(MATRIX_TIME);

    let mut cycle = queries.iter().cycle();
    for _ in 0..QUERY_WARMUP {
        embedder.embed(&[cycle.next().context("no queries")?])?;
    }
    let query = time_queries(embedder, queries, || {})?;
    let evicted = query_after_eviction(embedder, queries)?;
    Ok(Measured { documents: texts.len(), tokens, elapsed, model_gflops, matrix, query, evicted })
}

/// [`QUERY_RUNS`] queries embedded one at a time, each timed, with `between` run (untimed)
/// before each.
fn time_queries(embedder: &Embedder, queries: &[String], mut between: impl FnMut()) -> Result<Histogram<u64>> {
    let mut timed = histogram()?;
    let mut cycle = queries.iter().cycle();
    for _ in 0..QUERY_RUNS {
        between();
        let text = cycle.next().context("no queries")?;
        let started = Instant::now();
        embedder.embed(&[text])?;
        timed.record(micros(started.elapsed()))?;
    }
    Ok(timed)
}

/// The same queries, each after reading [`EVICTION_BYTES`] of other memory (untimed): inside
/// the application a request's other work (the component, PostgreSQL, the runner) runs between
/// two queries and may push the model's weights out of the processor's caches, which a run of
/// queries in a row would not. On the reference machine it changes nothing: the weights (90 MB)
/// come from memory either way (docs/benchmarks.md, "The query's embedding inside the
/// component").
fn query_after_eviction(embedder: &Embedder, queries: &[String]) -> Result<Histogram<u64>> {
    let mut other_work = vec![1u64; EVICTION_BYTES / 8];
    let mut sum = 0u64;
    let evicted = time_queries(embedder, queries, || {
        for word in other_work.iter_mut() {
            *word = word.wrapping_mul(3).wrapping_add(1);
            sum = sum.wrapping_add(*word);
        }
    })?;
    std::hint::black_box(sum);
    Ok(evicted)
}

fn print(m: &Measured) {
    let seconds = m.elapsed.as_secs_f64();
    let (rows, inner, columns) = MATRIX_SHAPE;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "embed: the first {} documents by id, {INGEST_BATCH} texts a call as `gatehouse ingest` sends them",
        m.documents
    );
    println!(
        "  documents {}, tokens {}, seconds {seconds:.3}, docs/s {:.1}, tokens/s {:.0}",
        m.documents,
        m.tokens,
        m.documents as f64 / seconds,
        m.tokens as f64 / seconds
    );
    println!(
        "  model GFLOP/s {:.1}; matrix GFLOP/s {:.1}, the faster of one product on {threads} threads ({:.1}) and one \
         product per thread side by side ({:.1}), float32 {rows}x{inner} by {inner}x{columns}, same run; share {:.1}% \
         (issue 19's goal: ≥ {SHARE_GOAL_PERCENT:.0}%)",
        m.model_gflops,
        m.matrix.best(),
        m.matrix.shared,
        m.matrix.side_by_side,
        100.0 * m.model_gflops / m.matrix.best()
    );
    println!(
        "  one query embedded alone, {QUERY_RUNS} in a row: p50 {:.3} ms, p95 {:.3} ms, p99 {:.3} ms \
         (issue 19's goal: ≤ {QUERY_GOAL_MS} ms)",
        ms(&m.query, 0.50),
        ms(&m.query, 0.95),
        ms(&m.query, 0.99)
    );
    println!(
        "  one query embedded after other work ({} MB read between queries, as a request's other work \
         does inside the application): p50 {:.3} ms, p95 {:.3} ms, p99 {:.3} ms",
        EVICTION_BYTES >> 20,
        ms(&m.evicted, 0.50),
        ms(&m.evicted, 0.95),
        ms(&m.evicted, 0.99)
    );
}

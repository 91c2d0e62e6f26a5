//! The `embed-serve` scenario: `gatehouse embeddings serve` (crates/embeddings-server) started
//! in this process, and its throughput in documents a second at each `--concurrency` level,
//! every client sending one document a request as the vector tool does; beside the same model
//! embedding the same documents here, one at a time and in `gatehouse ingest`'s batches.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_embeddings::Embedder;
use gatehouse_embeddings_server::openai::EmbeddingsResponse;
use gatehouse_embeddings_server::{Config, Server};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::embed::INGEST_BATCH;
use crate::timing::{histogram, micros, ms};

/// The server's token for this run only.
const TOKEN: &str = "bench-embed-serve";
/// Requests each client sends before the timing starts.
const WARMUP: usize = 5;

pub(crate) async fn run(database_url: &str, model_dir: &Path, levels: &[usize], seconds: f64) -> Result<()> {
    let contents = Arc::new(crate::embed::documents(database_url).await?);
    let model_dir = model_dir.to_path_buf();
    let embedder = Arc::new(
        tokio::task::spawn_blocking(move || Embedder::load(&model_dir))
            .await
            .context("model loading task")?
            .context("loading the embedding model")?,
    );
    let (alone, batched) = {
        let (embedder, contents) = (embedder.clone(), contents.clone());
        tokio::task::spawn_blocking(move || local_rates(&embedder, &contents)).await.context("embedding task")??
    };
    println!(
        "embed-serve: {} documents; here, one at a time {alone:.0} docs/s, in batches of {INGEST_BATCH} {batched:.0} docs/s",
        contents.len()
    );
    let server = Server::start("127.0.0.1:0".parse()?, embedder, Config::new(TOKEN.to_owned())).await?;
    let url = server.embeddings_url();
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>9} {:>16}",
        "clients", "requests", "docs/s", "p50 ms", "p99 ms", "against alone"
    );
    let mut outcome = Ok(());
    for &clients in levels {
        match level(&client, &url, &contents, clients, Duration::from_secs_f64(seconds)).await {
            Ok((timed, elapsed)) => {
                let rate = timed.len() as f64 / elapsed.as_secs_f64();
                println!(
                    "{clients:>8} {:>9} {rate:>9.0} {:>9.3} {:>9.3} {:>15.2}×",
                    timed.len(),
                    ms(&timed, 0.5),
                    ms(&timed, 0.99),
                    rate / alone
                );
            }
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    server.stop().await;
    outcome
}

/// Documents a second embedded here: each alone, then in batches.
fn local_rates(embedder: &Embedder, contents: &[String]) -> Result<(f64, f64)> {
    let texts: Vec<&str> = contents.iter().map(String::as_str).collect();
    let started = Instant::now();
    for text in &texts {
        embedder.embed(&[text])?;
    }
    let alone = texts.len() as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for batch in texts.chunks(INGEST_BATCH) {
        embedder.embed(batch)?;
    }
    Ok((alone, texts.len() as f64 / started.elapsed().as_secs_f64()))
}

/// `clients` clients, each sending one document a request for `duration`; every request's
/// time, and how long they ran.
async fn level(
    client: &reqwest::Client,
    url: &str,
    contents: &Arc<Vec<String>>,
    clients: usize,
    duration: Duration,
) -> Result<(Histogram<u64>, Duration)> {
    for i in 0..WARMUP * clients {
        embed_one(client, url, &contents[i % contents.len()]).await?;
    }
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|number| {
            let (client, url, contents) = (client.clone(), url.to_owned(), contents.clone());
            tokio::spawn(async move {
                let mut timed = histogram()?;
                let mut next = number;
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    embed_one(&client, &url, &contents[next % contents.len()]).await?;
                    timed.record(micros(sent.elapsed()))?;
                    next += clients;
                }
                anyhow::Ok(timed)
            })
        })
        .collect();
    let mut all = histogram()?;
    for task in tasks {
        all.add(task.await.context("a client task")??)?;
    }
    Ok((all, started.elapsed()))
}

async fn embed_one(client: &reqwest::Client, url: &str, text: &str) -> Result<()> {
    let answer = client
        .post(url)
        .bearer_auth(TOKEN)
        .json(&json!({"model": gatehouse_embeddings::MODEL_NAME, "input": text}))
        .send()
        .await?;
    ensure!(answer.status().is_success(), "the embeddings server answered {}", answer.status());
    let answer: EmbeddingsResponse = answer.json().await?;
    ensure!(answer.data.len() == 1, "one vector for one text");
    Ok(())
}

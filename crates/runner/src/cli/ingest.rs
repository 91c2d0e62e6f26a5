//! `gatehouse ingest FILE.jsonl`: loads documents into the `documents` table, embedded with the
//! same model the `vector-query` component embeds queries with.
//!
//! Re-running on the same file changes nothing: unchanged rows are not rewritten, and text
//! whose hash is already stored is not embedded again.
mod line;
mod progress;
mod store;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use gatehouse_embeddings::{Embedder, locate_model_dir};
use tokio::io::AsyncBufReadExt;

use self::line::Document;
use self::progress::Progress;
use self::store::{DocumentStore, Written, vector_literal};
use super::AppArgs;
use crate::db::{Database, migrate, project_home};

#[derive(Args)]
pub(super) struct IngestArgs {
    #[command(flatten)]
    pub(crate) app: AppArgs,
    /// JSON Lines, one document a line: `{"id"?, "content", "metadata"?, "doc_date"?}`
    /// (`doc_date` as YYYY-MM-DD; without `id`, one is derived from the content).
    pub(crate) file: PathBuf,
    /// The tenant the documents belong to: its keys' searches find them, no other's do.
    #[arg(long, default_value = gatehouse_domain::keys::DEFAULT_TENANT)]
    pub(crate) tenant: String,
    /// Documents embedded and written per database statement.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u16).range(1..=5000))]
    pub(crate) batch: u16,
    /// Folder holding the all-minilm-l6-v2 model files (default: `.spin/ai-models/all-minilm-l6-v2`
    /// beside the manifest, else at the project root).
    #[arg(long, value_name = "DIR", env = "GATEHOUSE_MODEL_DIR")]
    pub(crate) model_dir: Option<PathBuf>,
}

/// What an ingest did, for the closing line.
#[derive(Debug, Default)]
struct Summary {
    written: Written,
    skipped: u64,
    embedded: u64,
    elapsed: Duration,
}

impl Summary {
    fn add(&mut self, written: Written) {
        self.written.inserted += written.inserted;
        self.written.updated += written.updated;
        self.written.unchanged += written.unchanged;
    }

    fn documents(&self) -> u64 {
        self.written.inserted + self.written.updated + self.written.unchanged
    }
}

pub(super) async fn run(args: IngestArgs) -> Result<()> {
    let manifest_dir = args.app.project_root()?;
    let home = project_home(&manifest_dir);
    // The slow and fallible steps that need no database come first, so a missing model or file
    // fails at once.
    let model_dir = locate_model_dir(args.model_dir.as_deref(), &[&manifest_dir, &home])?;
    let total = count_lines(&args.file).await?;
    let embedder = tokio::task::spawn_blocking(move || Embedder::load(&model_dir))
        .await
        .context("model loading task")?
        .context("loading the embedding model")?;

    let database = Database::open(&manifest_dir, &args.app.state_dir()?).await?;
    let outcome = ingest(&args, &database.url, Arc::new(embedder), total).await;
    let stopped = database.stop();
    let summary = outcome?;
    stopped?;
    let seconds = summary.elapsed.as_secs_f64();
    println!(
        "ingested {}: {} documents in {seconds:.1} s ({:.0} docs/s): {} inserted, {} updated, {} unchanged, {} skipped ({} embedded)",
        args.file.display(),
        summary.documents(),
        summary.documents() as f64 / seconds.max(1e-3),
        summary.written.inserted,
        summary.written.updated,
        summary.written.unchanged,
        summary.skipped,
        summary.embedded,
    );
    Ok(())
}

async fn ingest(args: &IngestArgs, url: &str, embedder: Arc<Embedder>, total: u64) -> Result<Summary> {
    for migration in migrate(url, None).await?.applied {
        eprintln!("applied migration {migration}");
    }
    let (writer, writer_driver) = gatehouse_pg_connect::connect(url).await.context("connecting to the database")?;
    let (reader, reader_driver) = gatehouse_pg_connect::connect(url).await.context("connecting to the database")?;
    let store = DocumentStore::new(writer, reader, &args.tenant).await?;

    let started = Instant::now();
    let mut summary = Summary::default();
    let mut progress = Progress::new(total);
    let file = tokio::fs::File::open(&args.file).await.with_context(|| format!("opening {}", args.file.display()))?;
    let mut reader = tokio::io::BufReader::new(file);
    // Every id seen, with its line: a second line for an id would make a re-run flip the row
    // between the two versions, so it is refused.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut batch: Vec<Document> = Vec::with_capacity(usize::from(args.batch));
    let mut batch_lines = 0u64;
    let mut ready: Option<Embedded> = None;
    let mut bytes = Vec::new();
    let mut number = 0usize;
    loop {
        bytes.clear();
        if reader.read_until(b'\n', &mut bytes).await.with_context(|| format!("reading {}", args.file.display()))? == 0
        {
            break;
        }
        number += 1;
        batch_lines += 1;
        match std::str::from_utf8(&bytes) {
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => match line::parse(text) {
                Ok(document) => match seen.get(&document.id) {
                    Some(first) => {
                        summary.skipped += 1;
                        progress.note(&format!("line {number}: id {:?} already appeared on line {first}", document.id));
                    }
                    None => {
                        seen.insert(document.id.clone(), number);
                        batch.push(document);
                    }
                },
                Err(reason) => {
                    summary.skipped += 1;
                    progress.note(&format!("line {number}: {reason}"));
                }
            },
            Err(_) => {
                summary.skipped += 1;
                progress.note(&format!("line {number}: not valid UTF-8"));
            }
        }
        if batch.len() == usize::from(args.batch) {
            // The model embeds this batch while the database writes the one before, so
            // neither waits for the other.
            let lines = std::mem::take(&mut batch_lines);
            let (written, embedded) = tokio::join!(
                write(&store, ready.take(), &mut summary, &mut progress),
                embed(&store, &embedder, &mut batch, lines)
            );
            written?;
            ready = Some(embedded?);
        }
    }
    let last = embed(&store, &embedder, &mut batch, batch_lines).await;
    write(&store, ready.take(), &mut summary, &mut progress).await?;
    write(&store, Some(last?), &mut summary, &mut progress).await?;
    progress.finish();
    summary.elapsed = started.elapsed();
    drop(store);
    let _ = tokio::join!(writer_driver, reader_driver);
    Ok(summary)
}

/// A batch with the vectors of its new or changed documents, ready to be written.
struct Embedded {
    documents: Vec<Document>,
    /// `None` where the document is stored already with this very content.
    embeddings: Vec<Option<String>>,
    /// The file's lines the batch came from, blank and refused ones included (for progress).
    lines: u64,
}

/// Embeds what is new or changed in the batch, and empties it.
async fn embed(
    store: &DocumentStore,
    embedder: &Arc<Embedder>,
    batch: &mut Vec<Document>,
    lines: u64,
) -> Result<Embedded> {
    let documents = std::mem::take(batch);
    let stored = if documents.is_empty() { HashMap::new() } else { store.existing_hashes(&documents).await? };
    let stale: Vec<usize> =
        (0..documents.len()).filter(|&i| stored.get(&documents[i].id) != Some(&documents[i].content_hash)).collect();
    let texts: Vec<String> = stale.iter().map(|&i| documents[i].content.clone()).collect();
    let embedder = embedder.clone();
    let vectors = tokio::task::spawn_blocking(move || {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&texts)
    })
    .await
    .context("embedding task")?
    .context("embedding documents")?;
    let mut embeddings: Vec<Option<String>> = vec![None; documents.len()];
    for (&i, vector) in stale.iter().zip(&vectors) {
        embeddings[i] = Some(vector_literal(vector));
    }
    Ok(Embedded { documents, embeddings, lines })
}

/// Writes an embedded batch (nothing if there is none), counts it in the summary, and moves
/// the progress on.
async fn write(
    store: &DocumentStore,
    ready: Option<Embedded>,
    summary: &mut Summary,
    progress: &mut Progress,
) -> Result<()> {
    let Some(ready) = ready else { return Ok(()) };
    if !ready.documents.is_empty() {
        summary.add(store.write(&ready.documents, &ready.embeddings).await?);
    }
    summary.embedded += ready.embeddings.iter().flatten().count() as u64;
    progress.advance(ready.lines);
    Ok(())
}

/// Lines in the file, for the progress bar's length and ETA.
async fn count_lines(path: &Path) -> Result<u64> {
    let file = tokio::fs::File::open(path).await.with_context(|| format!("opening {}", path.display()))?;
    let mut reader = tokio::io::BufReader::with_capacity(1 << 16, file);
    let mut lines = 0u64;
    let mut ends_with_newline = true;
    loop {
        let chunk = reader.fill_buf().await.with_context(|| format!("reading {}", path.display()))?;
        if chunk.is_empty() {
            break;
        }
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        ends_with_newline = chunk.last() == Some(&b'\n');
        let consumed = chunk.len();
        reader.consume(consumed);
    }
    Ok(lines + u64::from(!ends_with_newline))
}

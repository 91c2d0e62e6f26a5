//! `gatehouse index`: builds the nearest-neighbour indexes `query_vector_db` searches through,
//! sized to the documents loaded (docs/architecture.md, "Vector search").
//!
//! One index covers every document. With `--by KEY` (repeatable), each value of that metadata
//! key that holds at least `--min-documents` documents gets a partial index of its own, so a
//! search filtered on the value reads only its documents: a filter that picks one kind of
//! document out of a dozen leaves a whole-corpus index nothing near the question to walk to.
//!
//! Every index is built concurrently under a new name and swapped in after it is valid, so
//! searches and ingests go on while it builds; what an earlier run built and this one does not
//! want is dropped. DDL takes no parameters, so the statements are written by the database
//! itself (`format` with `%I` and `%L`) from bound values.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::Value;
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use gatehouse_vector_search::{EXACT_UP_TO, INDEXED_EMBEDDING};

use super::AppArgs;
use super::keys::on_database;

/// The index over every document, the name the migrations' graph has too (V27). Every index
/// this command builds is named `documents_embedding_...`, as V4's graph was.
const WHOLE: &str = "documents_embedding_idx";
/// The LIKE pattern for those names (`\_` is an underscore, not any character).
const ANY_INDEX: &str = "documents\\_embedding\\_%";
/// Partial indexes are named this, then the first 16 hex digits of the MD5 of their condition.
const PARTIAL_PREFIX: &str = "documents_embedding_by_";
/// Suffixes of an index being built and of the one it replaces, until it is dropped; one left
/// over from an interrupted run is dropped first.
const BUILDING: &str = "_building";
const RETIRED: &str = "_retired";
/// More partial indexes than this, over all keys, would cost more to keep than the searches
/// gain: a key with so many values is a poor one to index by.
const MAX_PARTIAL: i64 = 64;
/// Documents a list holds in a large index, up to [`MAX_LISTS`].
const DOCUMENTS_PER_LIST: f64 = 250.0;
/// The most lists an index is built with: pgvector's k-means needs memory that grows with the
/// square of the lists, 3.3 GB for 4,000.
const MAX_LISTS: f64 = 4000.0;

#[derive(Args)]
pub(super) struct IndexArgs {
    #[command(flatten)]
    app: AppArgs,
    /// `ivfflat`: lists made from the documents loaded (twice the square root of their count, or
    /// one per 250 documents when that is more, up to 4,000), the nearest at a million
    /// documents; build it again once the corpus has grown by half.
    /// `hnsw`: a graph that takes new documents as they come, as the migrations make it.
    #[arg(long, value_enum, default_value_t = Method::Ivfflat)]
    method: Method,
    /// A metadata key whose values searches filter by, each value matching a large share of
    /// the documents (a category, a product): one partial index per value. Repeatable.
    #[arg(long, value_name = "KEY", value_parser = parse_key)]
    by: Vec<String>,
    /// A value of `--by` needs at least this many documents for an index of its own. The
    /// default is where a search stops using an index and sorts its matches exactly, so a
    /// smaller value's index would not be read.
    #[arg(long, value_name = "N", default_value_t = EXACT_UP_TO as i64, value_parser = clap::value_parser!(i64).range(1..))]
    min_documents: i64,
    /// IVFFlat lists each search reads (`ivfflat.probes`), set for the database: 40 of 4,000
    /// lists at a million documents, about 10,000 documents a search.
    #[arg(long, value_name = "N", default_value_t = 40, value_parser = clap::value_parser!(u16).range(1..=1000))]
    probes: u16,
    /// Memory the database may use to build each index (`maintenance_work_mem`, for this
    /// command's session only, and only what the build needs is used). IVFFlat's k-means needs
    /// memory growing with the square of the lists: about 270 MB for 1,000, 3.3 GB for 4,000.
    #[arg(long, value_name = "SIZE", default_value = "4GB")]
    build_memory: String,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Method {
    Ivfflat,
    Hnsw,
}

/// The metadata keys a search may filter on (the tool's own rule for field names).
fn parse_key(key: &str) -> Result<String, String> {
    if gatehouse_vector_search::is_field_name(key) {
        Ok(key.to_owned())
    } else {
        Err(format!("{key:?} is not a metadata key a search can filter on (letters, digits, _ and -)"))
    }
}

/// One index to build: over every document, or over those whose metadata contains `condition`.
struct Planned {
    name: String,
    condition: Option<Value>,
    documents: i64,
}

pub(super) async fn run(args: IndexArgs) -> Result<()> {
    on_database(&args.app, async |client| build(client, &args).await).await
}

async fn build(client: &Client, args: &IndexArgs) -> Result<()> {
    client
        .query_one("SELECT set_config('maintenance_work_mem', $1, false)", &[&args.build_memory])
        .await
        .with_context(|| format!("setting maintenance_work_mem to {:?}", args.build_memory))?;
    let planned = plan(client, args).await?;
    for suffix in [BUILDING, RETIRED] {
        for leftover in names(client, &format!("%\\{suffix}")).await? {
            drop_index(client, &leftover).await?;
        }
    }
    for index in &planned {
        let clock = Instant::now();
        let (building, retired) = (format!("{}{BUILDING}", index.name), format!("{}{RETIRED}", index.name));
        create(client, args, index, &building).await?;
        // Renames are quick; the old index serves searches until the new one has its name, so
        // no search ever finds no index to use.
        let swap = [
            quoted(client, "ALTER INDEX IF EXISTS %I RENAME TO %I", &[&index.name, &retired]).await?,
            quoted(client, "ALTER INDEX %I RENAME TO %I", &[&building, &index.name]).await?,
        ];
        client.batch_execute(&swap.join(";\n")).await.with_context(|| format!("swapping {building} in"))?;
        drop_index(client, &retired).await?;
        let condition =
            index.condition.as_ref().map_or_else(|| "every document".to_owned(), |c| format!("metadata @> {c}"));
        eprintln!("built {} over {} documents ({condition}) in {:.1?}", index.name, index.documents, clock.elapsed());
    }
    // Whatever an earlier run built that this one does not want: V4's graph, another key's
    // partial indexes, a value now below --min-documents.
    let wanted: Vec<&str> = planned.iter().map(|index| index.name.as_str()).collect();
    for name in names(client, ANY_INDEX).await? {
        if !wanted.contains(&name.as_str()) {
            drop_index(client, &name).await?;
            eprintln!("dropped {name}");
        }
    }
    if args.method == Method::Ivfflat {
        settings(client, args.probes).await?;
    }
    client.batch_execute("ANALYZE documents").await.context("analyzing documents")?;
    Ok(())
}

/// The whole-corpus index, then one per value of each `--by` key with enough documents.
async fn plan(client: &Client, args: &IndexArgs) -> Result<Vec<Planned>> {
    let documents: i64 =
        client.query_one("SELECT count(*) FROM documents", &[]).await.context("counting documents")?.try_get(0)?;
    if documents == 0 && args.method == Method::Ivfflat {
        bail!("no documents are loaded: IVFFlat learns its lists from them, so ingest first");
    }
    let mut planned = vec![Planned { name: WHOLE.to_owned(), condition: None, documents }];
    // Each key once, in the order given (`dedup` alone would keep a key repeated further on).
    let mut keys: Vec<&String> = Vec::new();
    for key in &args.by {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for key in &keys {
        // Scalars only: a search's equality filter is a string, a number or a boolean.
        let rows = client
            .query(
                "SELECT condition, $4 || left(md5(condition::text), 16) AS name, documents
                   FROM (SELECT jsonb_build_object($1::text, metadata -> $1::text) AS condition, count(*) AS documents
                           FROM documents
                          WHERE jsonb_typeof(metadata -> $1::text) IN ('string', 'number', 'boolean')
                          GROUP BY metadata -> $1::text
                         HAVING count(*) >= $2
                          ORDER BY documents DESC
                          LIMIT $3) counted",
                &[key, &args.min_documents, &(MAX_PARTIAL + 1), &PARTIAL_PREFIX],
            )
            .await
            .with_context(|| format!("counting the documents of each value of {key:?}"))?;
        if rows.is_empty() {
            eprintln!("no value of {key:?} holds {} documents or more: no partial index", args.min_documents);
        }
        for row in rows {
            planned.push(Planned {
                name: row.try_get("name")?,
                condition: Some(row.try_get("condition")?),
                documents: row.try_get("documents")?,
            });
        }
        if planned.len() as i64 > MAX_PARTIAL + 1 {
            bail!(
                "more than {MAX_PARTIAL} values of {} hold at least {} documents each: too many indexes to keep; \
                 raise --min-documents or choose keys with fewer values",
                keys.iter().map(|key| key.as_str()).collect::<Vec<_>>().join(" and "),
                args.min_documents
            );
        }
    }
    Ok(planned)
}

/// IVFFlat lists for an index over `documents`. pgvector's advice is rows / 1000 up to a million
/// rows and the square root above. Finer lists found more of the nearest for the documents a
/// search reads (docs/benchmarks.md, "finer lists"): at a million, 40 probes of 2,000 lists
/// found 0.975 of the exact ten without a filter where 20 of 1,000, reading as many, found
/// 0.92–0.96; 40 of 4,000 read half as many, in 10–11 ms against 18, and found 0.93–0.94. A
/// partial index of 80,000 documents gets 566 lists, so the probes read 7% of it.
fn lists_for(documents: i64) -> i64 {
    let documents = documents as f64;
    let lists = (2.0 * documents.sqrt()).max(documents / DOCUMENTS_PER_LIST).min(MAX_LISTS);
    lists.ceil().max(1.0) as i64
}

async fn create(client: &Client, args: &IndexArgs, index: &Planned, name: &str) -> Result<()> {
    let using = match args.method {
        Method::Ivfflat => {
            let lists = lists_for(index.documents);
            format!("ivfflat (({INDEXED_EMBEDDING}) halfvec_cosine_ops) WITH (lists = {lists})")
        }
        Method::Hnsw => format!("hnsw (({INDEXED_EMBEDDING}) halfvec_cosine_ops)"),
    };
    let statement = match &index.condition {
        None => quoted(client, &format!("CREATE INDEX CONCURRENTLY %I ON documents USING {using}"), &[name]).await?,
        Some(condition) => {
            quoted(
                client,
                &format!("CREATE INDEX CONCURRENTLY %I ON documents USING {using} WHERE metadata @> %L::jsonb"),
                &[name, &condition.to_string()],
            )
            .await?
        }
    };
    client.batch_execute(&statement).await.with_context(|| format!("building {name}"))
}

/// `template` with its `%I` and `%L` filled in from `values` by the database's own quoting.
async fn quoted(client: &Client, template: &str, values: &[&str]) -> Result<String> {
    let arguments: String = (2..=values.len() + 1).map(|n| format!(", ${n}::text")).collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&template];
    params.extend(values.iter().map(|value| value as &(dyn ToSql + Sync)));
    let row = client.query_one(&format!("SELECT format($1::text{arguments})"), &params).await;
    Ok(row.context("quoting a statement")?.try_get(0)?)
}

async fn drop_index(client: &Client, name: &str) -> Result<()> {
    client
        .batch_execute(&quoted(client, "DROP INDEX CONCURRENTLY IF EXISTS %I", &[name]).await?)
        .await
        .with_context(|| format!("dropping {name}"))
}

/// The documents' indexes whose names match `pattern` (LIKE).
async fn names(client: &Client, pattern: &str) -> Result<Vec<String>> {
    let rows = client
        .query(
            "SELECT indexname FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'documents' AND indexname LIKE $1
              ORDER BY indexname",
            &[&pattern],
        )
        .await
        .context("listing the documents' indexes")?;
    rows.iter().map(|row| row.try_get(0).map_err(Into::into)).collect()
}

/// The probes, and the iterative scan that keeps a filtered search reading lists until it has
/// its `top_k`, for every new connection to the database.
async fn settings(client: &Client, probes: u16) -> Result<()> {
    let database: String = client.query_one("SELECT current_database()::text", &[]).await?.try_get(0)?;
    for (setting, value) in
        [("ivfflat.probes", probes.to_string()), ("ivfflat.iterative_scan", "relaxed_order".to_owned())]
    {
        let statement = quoted(client, &format!("ALTER DATABASE %I SET {setting} = %L"), &[&database, &value]).await?;
        client.batch_execute(&statement).await.with_context(|| {
            format!("setting {setting} for the database (only its owner can): searches use the default until it is set")
        })?;
    }
    eprintln!("set ivfflat.probes = {probes} and ivfflat.iterative_scan = relaxed_order for new connections");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::lists_for;

    #[test]
    fn lists_are_twice_the_square_root_then_one_per_250_documents_up_to_4000() {
        assert_eq!(lists_for(645), 51);
        assert_eq!(lists_for(83_000), 577);
        assert_eq!(lists_for(250_000), 1_000);
        assert_eq!(lists_for(1_000_000), 4_000);
        assert_eq!(lists_for(10_000_000), 4_000);
    }
}

//! `gatehouse ingest` end to end: the real binary, the real model, a real PostgreSQL. Each test
//! loads into a database of its own, so its counts are exact whatever other tests ingest.
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use gatehouse_embeddings::{DIMENSIONS, Embedder, locate_model_dir};
use gatehouse_tests::vector::with_database;
use gatehouse_tests::{
    database_url, db, gatehouse_bin, scratch_file, shared_state_dir, synthetic_corpus, unique, workspace_root,
};
use serde_json::{Value, json};

/// A scratch database on the test server, dropped by [`Scratch::drop_database`].
struct Scratch {
    name: String,
    url: String,
}

impl Scratch {
    async fn create() -> Result<Scratch> {
        let name = unique("gatehouse_ingest");
        db().await?.batch_execute(&format!("CREATE DATABASE {name}")).await?;
        let url = with_database(&database_url(), &name)?;
        Ok(Scratch { name, url })
    }

    async fn connect(&self) -> Result<tokio_postgres::Client> {
        gatehouse_tests::connect(&self.url).await
    }

    /// `gatehouse ARGS...` against this database, with the project's manifest.
    fn gatehouse(&self, args: &[&OsStr]) -> Result<Output> {
        Command::new(gatehouse_bin())
            .args(args)
            .arg("--manifest")
            .arg(workspace_root().join("spin.toml"))
            .env("DATABASE_URL", &self.url)
            .env("GATEHOUSE_STATE_DIR", shared_state_dir())
            .output()
            .with_context(|| format!("running gatehouse {args:?}"))
    }

    fn ingest(&self, file: &Path, extra: &[&str]) -> Result<(String, String)> {
        let mut args = vec![OsStr::new("ingest"), file.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        let out = self.gatehouse(&args)?;
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        ensure!(out.status.success(), "ingest failed:\n{stdout}\n{stderr}");
        Ok((stdout, stderr))
    }

    fn index(&self, extra: &[&str]) -> Result<Output> {
        let args: Vec<&OsStr> = std::iter::once("index").chain(extra.iter().copied()).map(OsStr::new).collect();
        self.gatehouse(&args)
    }

    async fn drop_database(self) -> Result<()> {
        db().await?.batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name)).await?;
        Ok(())
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()
        / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt())
}

/// Every row's `updated_at`, by id.
async fn updated_at(client: &tokio_postgres::Client) -> Result<Vec<(String, String)>> {
    let rows = client.query("SELECT id, updated_at::text FROM documents ORDER BY id", &[]).await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

#[tokio::test]
async fn ingests_a_corpus_once_and_a_rerun_changes_nothing() -> Result<()> {
    let scratch = Scratch::create().await?;
    let file = synthetic_corpus(1000)?;
    let (stdout, stderr) = scratch.ingest(&file, &[])?;
    ensure!(
        stdout.contains("1000 documents")
            && stdout.contains("1000 inserted, 0 updated, 0 unchanged, 0 skipped (1000 embedded)"),
        "first run: {stdout}\n{stderr}"
    );
    ensure!(stdout.contains("docs/s"), "the summary gives the rate: {stdout}");
    ensure!(stderr.contains("applied migration V4__documents"), "ingest migrates first: {stderr}");

    let client = scratch.connect().await?;
    let row = client
        .query_one("SELECT count(*), min(vector_dims(embedding)), max(vector_dims(embedding)) FROM documents", &[])
        .await?;
    let (count, min_dims, max_dims): (i64, i32, i32) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((count, min_dims as usize, max_dims as usize), (1000, DIMENSIONS, DIMENSIONS));

    // A row holds what its line said, and the vector the query side computes for its text.
    let first: Value = serde_json::from_str(std::fs::read_to_string(&file)?.lines().next().context("empty corpus")?)?;
    let row = client
        .query_one(
            "SELECT content, metadata, doc_date::text, embedding::text FROM documents WHERE id = $1",
            &[&first["id"].as_str()],
        )
        .await?;
    assert_eq!(row.get::<_, String>(0), first["content"].as_str().unwrap_or_default());
    assert_eq!(row.get::<_, Value>(1), first["metadata"]);
    assert_eq!(row.get::<_, String>(2), first["doc_date"].as_str().unwrap_or_default());
    let stored: Vec<f32> = serde_json::from_str(&row.get::<_, String>(3))?;
    let root = workspace_root();
    let embedder = Embedder::load(&locate_model_dir(None, &[&root])?)?;
    let expected = embedder.embed(&[first["content"].as_str().unwrap_or_default()])?.remove(0);
    assert!(cosine(&stored, &expected) >= 0.9999, "stored vector differs from the embedder's");

    let before = updated_at(&client).await?;
    let (again, _) = scratch.ingest(&file, &["--batch", "50"])?;
    ensure!(
        again.contains("1000 documents")
            && again.contains("0 inserted, 0 updated, 1000 unchanged, 0 skipped (0 embedded)"),
        "second run: {again}"
    );
    assert_eq!(updated_at(&client).await?, before, "an unchanged document is not rewritten");

    // One changed text is embedded again; one changed metadata is updated without embedding.
    let mut lines: Vec<Value> =
        std::fs::read_to_string(&file)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    lines[3]["content"] = json!("Completely new text about warehouse robots in the Pacific region.");
    lines[7]["metadata"]["revenue"] = json!(1);
    let edited = scratch_file("edited");
    std::fs::write(&edited, lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
    let (third, _) = scratch.ingest(&edited, &[])?;
    ensure!(third.contains("0 inserted, 2 updated, 998 unchanged, 0 skipped (1 embedded)"), "third run: {third}");
    let after = updated_at(&client).await?;
    let changed: Vec<&str> = before.iter().zip(&after).filter(|(b, a)| b != a).map(|(b, _)| b.0.as_str()).collect();
    assert_eq!(changed, [lines[3]["id"].as_str().unwrap_or_default(), lines[7]["id"].as_str().unwrap_or_default()]);

    drop(client);
    scratch.drop_database().await?;
    std::fs::remove_file(file)?;
    std::fs::remove_file(edited)?;
    Ok(())
}

#[tokio::test]
async fn bad_lines_are_reported_by_number_and_the_good_ones_load() -> Result<()> {
    let scratch = Scratch::create().await?;
    let file = scratch_file("broken");
    let lines = [
        r#"{"id": "good-1", "content": "Q3 sales in the Northwest grew.", "metadata": {"region": "Northwest"}, "doc_date": "2024-09-30"}"#,
        r#"{"id": "broken", "content": "unterminated"#,
        r#"{"content": "No id: one is derived from the text."}"#,
        r#"{"id": "no-content", "metadata": {"region": "Midwest"}}"#,
        "",
        r#"{"id": "bad-date", "content": "Date out of range.", "doc_date": "2024-02-30"}"#,
        r#"{"id": "bad-metadata", "content": "Metadata is a list.", "metadata": ["region", "Pacific"]}"#,
        r#"{"id": "empty", "content": "   "}"#,
        r#"{"id": "good-1", "content": "The same id again."}"#,
        r#"{"id": "good-2", "content": "Late deliveries in the Southeast.", "doc_date": "2025-01-15"}"#,
    ];
    std::fs::write(&file, lines.join("\n"))?;
    let (stdout, stderr) = scratch.ingest(&file, &["--batch", "2"])?;
    for expected in [
        "line 2: not valid JSON",
        "line 4: \"content\" is missing",
        "line 6: \"doc_date\" must be a date as YYYY-MM-DD, not \"2024-02-30\"",
        "line 7: \"metadata\" must be a JSON object",
        "line 8: \"content\" is empty",
        "line 9: id \"good-1\" already appeared on line 1",
    ] {
        ensure!(stderr.contains(expected), "stderr lacks {expected:?}:\n{stderr}");
    }
    ensure!(!stderr.contains("line 5:"), "a blank line is not an error:\n{stderr}");
    ensure!(stdout.contains("3 inserted, 0 updated, 0 unchanged, 6 skipped"), "summary: {stdout}");

    let client = scratch.connect().await?;
    let rows = client.query("SELECT id, doc_date::text FROM documents ORDER BY id", &[]).await?;
    let stored: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert!(stored[0].0.starts_with("doc-") && stored[0].1.is_none(), "{stored:?}");
    assert_eq!(
        stored[1..],
        [("good-1".into(), Some("2024-09-30".into())), ("good-2".into(), Some("2025-01-15".into()))]
    );

    drop(client);
    scratch.drop_database().await?;
    std::fs::remove_file(file)?;
    Ok(())
}

/// The documents' nearest-neighbour indexes: name, then definition.
async fn embedding_indexes(client: &tokio_postgres::Client) -> Result<Vec<(String, String)>> {
    let rows = client
        .query(
            "SELECT i.relname::text, pg_get_indexdef(i.oid)
               FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
              WHERE x.indrelid = 'documents'::regclass AND am.amname IN ('ivfflat', 'hnsw')
              ORDER BY 1",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The index PostgreSQL reads for the search's shape (one containment per filter key, as the
/// tool writes it) when it must use an index scan: which one its planner can prove serves it.
async fn index_for_category(client: &mut tokio_postgres::Client, category: &str, embedding: &str) -> Result<String> {
    let transaction = client.transaction().await?;
    transaction.batch_execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off").await?;
    let plan = transaction
        .query(
            "EXPLAIN SELECT id FROM documents WHERE tenant_id = $1 AND metadata @> $2
              ORDER BY embedding::halfvec(384) <=> (SELECT $3::text::halfvec(384)) LIMIT 10",
            &[&"default", &json!({ "category": category }), &embedding],
        )
        .await?;
    let plan: Vec<String> = plan.iter().map(|row| row.get(0)).collect();
    let scan = plan.iter().find_map(|line| line.split("Index Scan using ").nth(1));
    let index = scan.and_then(|rest| rest.split(' ').next()).map(str::to_owned);
    index.with_context(|| format!("no index scan in {plan:#?}"))
}

/// `metadata @> {"category": category}` as `pg_get_indexdef` writes its constant.
async fn quoted_condition(client: &tokio_postgres::Client, category: &str) -> Result<String> {
    let row =
        client.query_one("SELECT quote_literal(jsonb_build_object('category', $1::text)::text)", &[&category]).await?;
    Ok(format!("metadata @> {}::jsonb", row.get::<_, String>(0)))
}

#[tokio::test]
async fn index_builds_one_index_per_value_of_a_key_and_a_rerun_replaces_them() -> Result<()> {
    let scratch = Scratch::create().await?;
    // Nothing loaded: IVFFlat has nothing to learn its lists from.
    let empty = scratch.index(&[])?;
    let said = String::from_utf8_lossy(&empty.stderr);
    ensure!(!empty.status.success() && said.contains("no documents are loaded"), "{said}");
    let bad = scratch.index(&["--by", "category; DROP TABLE documents"])?;
    ensure!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("is not a metadata key"));

    let file = synthetic_corpus(600)?;
    scratch.ingest(&file, &[])?;
    let mut client = scratch.connect().await?;
    // A value that needs quoting in the index's condition.
    client
        .execute(
            "INSERT INTO documents (id, content, metadata, doc_date, embedding, content_hash)
             SELECT 'quoted-' || id, content, metadata || '{\"category\": \"O''Brien''s notes\"}', doc_date,
                    embedding, content_hash
               FROM documents ORDER BY id LIMIT 45",
            &[],
        )
        .await?;
    let migrated = embedding_indexes(&client).await?;
    ensure!(
        migrated.len() == 1 && migrated[0].1.contains("USING hnsw (((embedding)::halfvec(384)) halfvec_cosine_ops)"),
        "the migrations' graph: {migrated:?}"
    );

    // A key with a value for almost every document would make hundreds of indexes.
    let many = scratch.index(&["--by", "account", "--min-documents", "1"])?;
    let said = String::from_utf8_lossy(&many.stderr);
    ensure!(!many.status.success() && said.contains("too many indexes"), "{said}");

    // A key given twice is indexed once.
    let built = scratch.index(&[
        "--by",
        "category",
        "--by",
        "product",
        "--by",
        "category",
        "--min-documents",
        "40",
        "--probes",
        "7",
    ])?;
    ensure!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let values = async |key: &str| -> Result<Vec<String>> {
        let rows = client
            .query("SELECT metadata ->> $1::text FROM documents GROUP BY 1 HAVING count(*) >= 40 ORDER BY 1", &[&key])
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    };
    let (categories, products) = (values("category").await?, values("product").await?);
    ensure!(categories.len() > 5 && categories.contains(&"O'Brien's notes".to_owned()), "{categories:?}");
    ensure!(products.len() > 3, "{products:?}");
    let indexes = embedding_indexes(&client).await?;
    assert_eq!(indexes.len(), categories.len() + products.len() + 1, "{indexes:#?}");
    let builds = String::from_utf8_lossy(&built.stderr).lines().filter(|line| line.starts_with("built ")).count();
    assert_eq!(builds, indexes.len(), "each index built once");
    let whole = indexes.iter().find(|(name, _)| name == "documents_embedding_idx").context("the whole index")?;
    // ceil(2 sqrt(645)) lists.
    ensure!(
        whole.1.contains("USING ivfflat (((embedding)::halfvec(384)) halfvec_cosine_ops) WITH (lists='51')"),
        "{}",
        whole.1
    );
    ensure!(!whole.1.contains("WHERE"));
    for category in &categories {
        let condition = quoted_condition(&client, category).await?;
        let partial = indexes.iter().filter(|(_, definition)| definition.contains(&condition)).count();
        assert_eq!(partial, 1, "one index for {category}: {indexes:#?}");
    }
    let settings: Vec<String> = client
        .query_one(
            "SELECT setconfig FROM pg_db_role_setting
              WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) AND setrole = 0",
            &[],
        )
        .await?
        .get(0);
    ensure!(settings.contains(&"ivfflat.probes=7".to_owned()), "{settings:?}");
    ensure!(settings.contains(&"ivfflat.iterative_scan=relaxed_order".to_owned()), "{settings:?}");

    // The tool's shape of search is served by its value's own index, quoted value included.
    let embedding: String =
        client.query_one("SELECT embedding::text FROM documents ORDER BY id LIMIT 1", &[]).await?.get(0);
    for category in ["O'Brien's notes", categories[0].as_str()] {
        let used = index_for_category(&mut client, category, &embedding).await?;
        let definition = &indexes.iter().find(|(name, _)| *name == used).context("an index of the list")?.1;
        let condition = quoted_condition(&client, category).await?;
        ensure!(definition.contains(&condition), "{category} searched through {used}: {definition}");
    }

    // Again with a graph and no key: one index over everything, the partial ones gone.
    let again = scratch.index(&["--method", "hnsw"])?;
    ensure!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let indexes = embedding_indexes(&client).await?;
    ensure!(indexes.len() == 1 && indexes[0].0 == "documents_embedding_idx" && indexes[0].1.contains("USING hnsw"));
    let leftovers: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname LIKE 'documents\\_embedding%\\_building'
                                               OR relname LIKE 'documents\\_embedding%\\_retired'",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(leftovers, 0);

    drop(client);
    scratch.drop_database().await?;
    std::fs::remove_file(file)?;
    Ok(())
}

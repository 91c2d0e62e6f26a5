//! `gatehouse ingest` end to end: the real binary, the real model, a real PostgreSQL. Each test
//! loads into a database of its own, so its counts are exact whatever other tests ingest.
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

    fn ingest(&self, file: &Path, extra: &[&str]) -> Result<(String, String)> {
        let out: Output = Command::new(gatehouse_bin())
            .arg("ingest")
            .arg(file)
            .arg("--manifest")
            .arg(workspace_root().join("spin.toml"))
            .args(extra)
            .env("DATABASE_URL", &self.url)
            .env("GATEHOUSE_STATE_DIR", shared_state_dir())
            .output()
            .context("running gatehouse ingest")?;
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        ensure!(out.status.success(), "ingest failed:\n{stdout}\n{stderr}");
        Ok((stdout, stderr))
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

//! `gatehouse bench` end to end on a small corpus: the `embed` scenario prints its figures,
//! and without `--url` each level of `create` prints the CPU per request of the runner and of
//! PostgreSQL. The figures are checked for being there and positive, never against a speed.
use std::process::Command;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::ScratchDatabase;
use gatehouse_tests::{gatehouse_bin, shared_state_dir, synthetic_corpus, workspace_root};

/// Documents in the corpus: enough for a few of ingest's calls' worth of texts, few enough to
/// embed in a second or two.
const DOCUMENTS: usize = 64;

/// The number after `label` in `text` (its first occurrence), without a trailing `%`, `,`,
/// `;` or `)`.
fn number_after(text: &str, label: &str) -> Result<f64> {
    let rest = &text[text.find(label).with_context(|| format!("no {label:?} in:\n{text}"))? + label.len()..];
    let word = rest.split_whitespace().next().unwrap_or_default().trim_end_matches([',', ';', '%', ')']);
    word.parse().with_context(|| format!("{label:?} is followed by {word:?}"))
}

fn gatehouse(args: &[&str], database_url: &str) -> Result<String> {
    let output = Command::new(gatehouse_bin())
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("GATEHOUSE_STATE_DIR", shared_state_dir())
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("running gatehouse {}", args.join(" ")))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "gatehouse {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

#[tokio::test]
async fn bench_prints_the_embedding_figures_and_the_cpu_split() -> Result<()> {
    let database = ScratchDatabase::create("gatehouse_bench").await?;
    let corpus = synthetic_corpus(DOCUMENTS)?;
    gatehouse(&["ingest", &corpus.to_string_lossy()], &database.url)?;
    let _ = std::fs::remove_file(&corpus);

    let manifest = workspace_root().join("tests/fixtures/lifecycle.toml");
    let manifest = manifest.to_string_lossy();
    let args = ["bench", "--manifest", &manifest, "--scenario", "embed,create", "--concurrency", "2", "--seconds", "1"];
    let printed = gatehouse(&args, &database.url)?;

    let embed = printed.lines().skip_while(|l| !l.starts_with("embed:")).take(4).collect::<Vec<_>>().join("\n");
    ensure!(number_after(&embed, "\n  documents")? == DOCUMENTS as f64, "{embed}");
    for label in [
        "tokens",
        "seconds",
        "docs/s",
        "tokens/s",
        "model GFLOP/s",
        "matrix GFLOP/s",
        "side by side (",
        "share",
        "p50",
        "p99",
    ] {
        let value = number_after(&embed, label)?;
        ensure!(value > 0.0 && value.is_finite(), "{label} is {value} in:\n{embed}");
    }
    // Each measured level of `create` is followed by the CPU it cost per request.
    let create = printed.lines().find(|l| l.starts_with("create ")).context(format!("no create row in:\n{printed}"))?;
    let cpu = printed
        .lines()
        .skip_while(|l| *l != create)
        .nth(1)
        .filter(|l| l.trim_start().starts_with("cpu ms/request:"))
        .with_context(|| format!("no CPU line after the create row in:\n{printed}"))?;
    for process in ["runner", "postgres"] {
        let value = number_after(cpu, process)?;
        ensure!(value > 0.0 && value.is_finite(), "{process} is {value} in: {cpu}");
    }
    Ok(())
}

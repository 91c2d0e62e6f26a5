//! The `query` scenario: `query_vector_db` as a relay runs it, create then confirm with
//! `Prefer: wait`, over the documents the database holds (load a corpus first, for example
//! `scripts/synthetic-corpus 100000 -o corpus.jsonl && gatehouse ingest corpus.jsonl`).
//!
//! The component times its two parts itself, embedding the query and its one SQL statement,
//! and returns them in the call's metrics; the benchmark collects them beside the route's
//! latency, so the SQL-only time is the statement as the component ran it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use serde_json::{Value, json};

use gatehouse_domain::keys::DEFAULT_TENANT;

use crate::load::{Outcome, Work};
use crate::timing::histogram;

const SESSION: &str = "bench-query";
const COMPONENT: &str = "vector-query";
const PREFER_WAIT: &str = "wait=10";

/// The kinds of question the synthetic corpus answers: by meaning alone, with one filter, and
/// by region and period with totals.
fn questions() -> Vec<Value> {
    let quarter = |region: Value, start: &str, end: &str, semantic: &str| {
        json!({
            "semantic_query": semantic,
            "filters": {"region": region, "date_start": start, "date_end": end, "category": "sales_report"},
            "aggregate": ["revenue", "units"]
        })
    };
    vec![
        json!({"user_query": "late deliveries of routers", "structured_query": {}}),
        json!({"user_query": "Q3 2024 sales in the Northwest",
               "structured_query": quarter(json!("Northwest"), "2024-07-01", "2024-09-30", "quarterly sales report")}),
        json!({"user_query": "customers unhappy with delivery times",
               "structured_query": {"filters": {"category": "customer_feedback"}}}),
        json!({"user_query": "stockouts in the Midwest", "structured_query": {"filters": {"region": "Midwest"}}}),
        json!({"user_query": "how did camera sales do in 2025",
               "structured_query": {"filters": {"product": "Falcon camera", "date_start": "2025-01-01",
                                                "date_end": "2025-12-31"}, "aggregate": ["revenue"]}}),
        json!({"user_query": "support ticket backlog", "structured_query": {"top_k": 10}}),
        json!({"user_query": "Southeast and Gulf Coast revenue in Q1 2025",
               "structured_query": quarter(json!(["Southeast", "Gulf Coast"]), "2025-01-01", "2025-03-31", "sales revenue")}),
        json!({"user_query": "impact of the firmware recall", "structured_query": {"filters": {"date_start": "2024-01-01"}}}),
    ]
}

/// The questions' `user_query` texts, which the `embed` scenario embeds one at a time.
pub(crate) fn user_queries() -> Vec<String> {
    questions().iter().filter_map(|q| q["user_query"].as_str().map(str::to_owned)).collect()
}

/// The component's own timings, in microseconds.
struct Parts {
    embedding: Histogram<u64>,
    sql: Histogram<u64>,
}

/// The two parts of the queries of one measurement.
pub(crate) struct PartTimes {
    pub embedding: Histogram<u64>,
    pub sql: Histogram<u64>,
}

pub(crate) struct Queries {
    client: reqwest::Client,
    base: String,
    token: String,
    db: tokio_postgres::Client,
    questions: Vec<Value>,
    cursor: AtomicUsize,
    parts: Mutex<Parts>,
    started: SystemTime,
    /// How many documents the database holds, which a search's cost depends on.
    pub(crate) documents: i64,
}

impl Queries {
    /// Checks that there is something to search and that the application has the tool, and
    /// clears earlier runs' rows.
    pub(crate) async fn prepare(
        database_url: &str,
        client: &reqwest::Client,
        base: &str,
        token: &str,
    ) -> Result<Arc<Queries>> {
        let (db, _driver) = gatehouse_pg_connect::connect(database_url)
            .await
            .context("connecting to the database for the query scenario")?;
        let documents = searched_documents(&db, "query").await?;
        println!("query: searching {documents} documents");
        let queries = Arc::new(Queries {
            client: client.clone(),
            base: base.to_owned(),
            token: token.to_owned(),
            db,
            questions: questions(),
            cursor: AtomicUsize::new(0),
            parts: Mutex::new(Parts { embedding: histogram()?, sql: histogram()? }),
            started: SystemTime::now(),
            documents,
        });
        if let Err(e) = queries.create(&queries.questions[0]).await {
            bail!("the query scenario needs the query_vector_db tool in the application's registry ({e:#})");
        }
        queries.cleanup().await?;
        Ok(queries)
    }

    pub(crate) fn work(self: &Arc<Self>) -> Work {
        let queries = self.clone();
        Arc::new(move |_| {
            let queries = queries.clone();
            Box::pin(async move { queries.once().await })
        })
    }

    /// The component's timings since the last call, and starts afresh.
    pub(crate) fn take_parts(&self) -> Result<PartTimes> {
        let mut parts = self.parts.lock().map_err(|_| anyhow::anyhow!("a worker panicked"))?;
        let embedding = std::mem::replace(&mut parts.embedding, histogram()?);
        let sql = std::mem::replace(&mut parts.sql, histogram()?);
        Ok(PartTimes { embedding, sql })
    }

    async fn once(&self) -> Outcome {
        let question = &self.questions[self.cursor.fetch_add(1, Ordering::Relaxed) % self.questions.len()];
        let failed = |e: anyhow::Error| Outcome::Done { error: Some(format!("{e:#}")), steps: Vec::new() };
        let clock = Instant::now();
        let id = match self.create(question).await {
            Ok(id) => id,
            Err(e) => return failed(e),
        };
        let created = clock.elapsed();
        let clock = Instant::now();
        let metrics = match self.confirm(&id).await {
            Ok(metrics) => metrics,
            Err(e) => return failed(e),
        };
        let confirmed = clock.elapsed();
        if let Err(e) = self.record(&metrics) {
            return failed(e);
        }
        Outcome::Done { error: None, steps: vec![created, confirmed] }
    }

    fn record(&self, metrics: &Value) -> Result<()> {
        let micros = |field: &str| -> Result<u64> {
            let ms = metrics[field].as_f64().with_context(|| format!("the result has no metrics.{field}"))?;
            Ok(((ms * 1000.0).round() as u64).max(1))
        };
        let mut parts = self.parts.lock().map_err(|_| anyhow::anyhow!("a worker panicked"))?;
        parts.embedding.record(micros("embedding_ms")?)?;
        parts.sql.record(micros("search_ms")?)?;
        Ok(())
    }

    async fn create(&self, question: &Value) -> Result<String> {
        let body = json!({"session_id": SESSION, "function_name": "query_vector_db", "parameters": question});
        let request =
            self.client.post(format!("{}/voice-tools/pending", self.base)).bearer_auth(&self.token).json(&body);
        let created = expect(request, 201).await?;
        created["tool_call_id"].as_str().map(str::to_owned).context("create answered no tool_call_id")
    }

    /// Confirms and waits for the outcome; answers the search's metrics.
    async fn confirm(&self, id: &str) -> Result<Value> {
        let request = self
            .client
            .post(format!("{}/voice-tools/confirm/{id}", self.base))
            .bearer_auth(&self.token)
            .header("prefer", PREFER_WAIT);
        let call = expect(request, 200).await?;
        match call["status"].as_str() {
            Some("COMPLETED") => Ok(call["result"]["metrics"].clone()),
            other => bail!("the search ended {other:?}: {}", call["voice_response"]),
        }
    }

    /// Deletes every row the scenario made: its calls, their tool records and session context.
    pub(crate) async fn cleanup(&self) -> Result<()> {
        let since = self.started.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default();
        self.db
            .execute(
                "DELETE FROM tool_executions
                  WHERE tool_call_id IN (SELECT tool_call_id FROM tool_calls WHERE session_id = $1)
                     OR (tool_call_id IS NULL AND component = $2 AND started_at >= to_timestamp($3))",
                &[&SESSION, &COMPONENT, &since],
            )
            .await?;
        self.db.execute("DELETE FROM session_context WHERE session_id = $1", &[&SESSION]).await?;
        self.db.execute("DELETE FROM tool_calls WHERE session_id = $1", &[&SESSION]).await?;
        Ok(())
    }
}

/// How many documents the benchmark's searches run over (the default tenant's, which
/// `gatehouse ingest` loads and the dev token searches); an error naming `scenario` when there
/// are none.
pub(crate) async fn searched_documents(db: &tokio_postgres::Client, scenario: &str) -> Result<i64> {
    let documents: i64 = db
        .query_one("SELECT count(*) FROM documents WHERE tenant_id = $1", &[&DEFAULT_TENANT])
        .await
        .context("counting documents (is the database migrated?)")?
        .get(0);
    if documents == 0 {
        bail!(
            "the {scenario} scenario searches the documents table, which is empty: load a corpus with `gatehouse ingest`"
        );
    }
    Ok(documents)
}

/// Sends `request`; its JSON body if the status is `status`.
async fn expect(request: reqwest::RequestBuilder, status: u16) -> Result<Value> {
    let response = request.send().await?;
    let got = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if got != status {
        bail!("HTTP {got}: {body}");
    }
    Ok(body)
}

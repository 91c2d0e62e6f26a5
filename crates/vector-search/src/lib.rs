//! `query_vector_db` (docs/architecture.md, "Vector search"): the parameters an agent writes,
//! the filtered pgvector search, the sentences spoken about it, and the session context it
//! leaves behind.
//!
//! The `vector-query` component serves this through the tool contract and through its gated
//! direct flow; both run the same two steps, [`search`] then [`remember`].

mod date;
mod embed;
mod query;
mod schema;
mod search;
mod speech;
mod tool;

use std::time::Instant;

use gatehouse_domain::{SessionOf, ToolCallId};
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use date::Date;
pub use embed::{DIMENSIONS, Embedder};
pub use query::{DEFAULT_TOP_K, Filters, MAX_TOP_K, SearchQuery, is_field_name, parse, validate};
pub use schema::parameters_schema;
pub use search::{
    Document, EXACT_UP_TO, Found, INDEXED_EMBEDDING, Order, Statement, Total, estimate_statement, estimated_matches,
    order_for, statement as search_statement,
};
pub use speech::{confirmation, report};
pub use tool::VectorQuery;

/// The session context key the results are stored under; the completion callback names it.
pub const CONTEXT_KEY: &str = "last_query_results";

/// Why a search could not run. The text is for operators; [`SearchError::spoken`] is what the
/// caller hears.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("embedding the query: {0}")]
    Embedding(String),
    #[error("database: {0}")]
    Database(String),
}

impl SearchError {
    pub fn spoken(&self) -> &'static str {
        match self {
            SearchError::Config(_) => "The document search is not set up correctly, so I couldn't run it.",
            SearchError::Embedding(_) => {
                "I couldn't run the search: the service that reads the query is not answering."
            }
            SearchError::Database(_) => "I couldn't reach the documents right now. Please try again in a moment.",
        }
    }
}

pub(crate) fn variable(name: &str) -> Result<String, SearchError> {
    spin_sdk::variables::get(name).map_err(|e| SearchError::Config(format!("reading the {name} variable: {e:?}")))
}

/// What a search answers: `result` of the tool call, without its `context_key`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// One or two sentences with the key figures; also the call's `voice_response`.
    pub summary: String,
    pub metrics: Metrics,
    pub documents: Vec<Document>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Documents returned (at most `top_k`).
    pub returned: u64,
    /// Documents the filters match, over which `totals` run; null when the search asked for
    /// no totals.
    pub matched: Option<u64>,
    pub best_score: Option<f64>,
    /// Per `aggregate` field: the sum over every matched document.
    pub totals: Map<String, Value>,
    /// Per `aggregate` field: how many matched documents hold a number in it.
    pub counted: Map<String, Value>,
    pub embedding_ms: f64,
    /// The planner's estimate of the matches (for a filtered search) and the search
    /// statement, from the first send to the last answer.
    pub search_ms: f64,
    /// True when the filters matched few enough documents for all of them to be sorted by
    /// distance (an exact answer); false when a nearest-neighbour index found them.
    pub sorted_exactly: bool,
}

impl SearchResult {
    fn new(query: &SearchQuery, found: Found, embedding_ms: f64, search_ms: f64) -> SearchResult {
        let metrics = Metrics {
            returned: found.documents.len() as u64,
            matched: found.matched,
            best_score: found.documents.first().map(|d| d.score),
            totals: found.totals.iter().map(|t| (t.field.clone(), json!(t.sum))).collect(),
            counted: found.totals.iter().map(|t| (t.field.clone(), json!(t.counted))).collect(),
            embedding_ms: round_ms(embedding_ms),
            search_ms: round_ms(search_ms),
            sorted_exactly: found.order == Order::Exact,
        };
        SearchResult { summary: report(query, &found), metrics, documents: found.documents }
    }

    /// The tool call's `result`; it names the context key only when the results were stored,
    /// since the completion callback then tells the relay they are available.
    pub fn to_result(&self, stored: bool) -> Value {
        let mut result = json!({"summary": self.summary, "metrics": self.metrics, "documents": self.documents});
        if stored {
            result["context_key"] = json!(CONTEXT_KEY);
        }
        result
    }
}

fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Embeds the semantic query, then runs the search. No database connection is held while
/// the embedding is computed, which can take a network round trip.
/// Only `tenant`'s documents are searched.
pub async fn search(query: &SearchQuery, tenant: &str, embedder: &Embedder) -> Result<SearchResult, SearchError> {
    let clock = Instant::now();
    let embedding = embedder.embed(&query.semantic_query).await?;
    let embedding_ms = clock.elapsed().as_secs_f64() * 1000.0;
    let db = gatehouse_platform::open_db().map_err(|e| SearchError::Database(e.detail.unwrap_or(e.message)))?;
    let clock = Instant::now();
    let found = search::run(&db, query, tenant, &embedding)?;
    let search_ms = clock.elapsed().as_secs_f64() * 1000.0;
    Ok(SearchResult::new(query, found, embedding_ms, search_ms))
}

/// Stores the results as the session's `last_query_results`, for `context_ttl_seconds`
/// (an hour unless configured), replacing the previous ones.
pub fn remember(
    session: SessionOf<'_>,
    tool_call_id: Option<&ToolCallId>,
    parameters: &Map<String, Value>,
    result: &SearchResult,
) -> Result<(), SearchError> {
    let ttl = variable("context_ttl_seconds")?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| SearchError::Config("context_ttl_seconds is not a positive number of seconds".into()))?;
    let value = json!({
        "tool_call_id": tool_call_id,
        "parameters": parameters,
        "summary": result.summary,
        "metrics": result.metrics,
        "documents": result.documents,
    });
    let db = gatehouse_platform::open_db().map_err(|e| SearchError::Database(e.detail.unwrap_or(e.message)))?;
    gatehouse_store::session_context_put(&db, session, CONTEXT_KEY, &value, ttl)
        .map_err(|e| SearchError::Database(e.to_string()))
}

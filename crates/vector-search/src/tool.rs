//! `query_vector_db` as a tool: what the executor (over the tool contract) and the direct flow
//! (in the component) both run.

use crate as search;
use gatehouse_domain::FieldProblem;
use gatehouse_domain::contract::{Checkpoint, Executed, ToolDescription, ToolEffects, ToolRequest};
use gatehouse_tool::{Tool, ToolFailure};
use serde_json::{Map, Value};

const DESCRIPTION: &str = "Searches the team's documents (sales reports, pipeline notes, shipping incidents, \
    inventory, accounts) by meaning, with optional date, region and metadata filters, and totals numeric metadata \
    fields over every document the filters match. The results stay available to later tools as the session \
    context last_query_results.";

pub struct VectorQuery;

impl Tool for VectorQuery {
    fn describe(&self) -> ToolDescription {
        ToolDescription {
            name: "query_vector_db".into(),
            aliases: Vec::new(),
            description: DESCRIPTION.into(),
            parameters_schema: search::parameters_schema(),
            needs_checkpoint: false,
            // It searches this application's own documents and stores the results as the
            // session's last_query_results, replacing the previous ones.
            effects: Some(ToolEffects { read_only: false, destructive: true, idempotent: true, open_world: false }),
            ..ToolDescription::default()
        }
    }

    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
        search::validate(parameters).map(|(normalized, _)| normalized)
    }

    fn summarize(&self, parameters: &Map<String, Value>) -> String {
        match search::parse(parameters) {
            Ok(query) => search::confirmation(&query),
            Err(_) => "I'll search the documents. Is that right?".into(),
        }
    }

    async fn prepare(&self, _request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure> {
        Ok(None)
    }

    /// A read and a replaceable context row: running it again after a crash is harmless.
    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure> {
        let result = run_search(request).await?;
        let stored = store_context(request, &result)?;
        Ok(executed(result, stored))
    }

    async fn discard(&self, _request: &ToolRequest) -> Result<(), ToolFailure> {
        Ok(())
    }
}

/// The search of a recorded call (its parameters are already normalized).
async fn run_search(request: &ToolRequest) -> Result<search::SearchResult, ToolFailure> {
    let query = search::parse(&request.parameters)
        .map_err(|_| ToolFailure::new("The stored search parameters are no longer valid."))?;
    let embedder = search::Embedder::from_variables().map_err(failed)?;
    search::search(&query, request.tenant(), &embedder).await.map_err(failed)
}

/// Keeps the results as the session's context; answers whether there was a session to keep
/// them for.
fn store_context(request: &ToolRequest, result: &search::SearchResult) -> Result<bool, ToolFailure> {
    let Some(session) = request.session() else { return Ok(false) };
    search::remember(session, request.tool_call_id.as_ref(), &request.parameters, result).map_err(failed)?;
    Ok(true)
}

fn executed(result: search::SearchResult, stored: bool) -> Executed {
    Executed { result: result.to_result(stored), voice_response: result.summary }
}

/// The operator reads what went wrong in the log; the caller hears a sentence.
fn failed(error: search::SearchError) -> ToolFailure {
    gatehouse_platform::log_line("warn", &format!("query_vector_db: {error}"));
    ToolFailure::new(error.spoken())
}

//! The tool registry as clients see it: `GET /voice-tools/tools`, and each tool's execution
//! history and stats (docs/architecture.md, "Observability").

use gatehouse_domain::contract::{FaultKind, ToolDescription, ToolFault};
use gatehouse_domain::{ApiError, ErrorCode};
use gatehouse_store::{ExecutionCursor, ExecutionFilter};
use gatehouse_tool::history::Outcome;
use gatehouse_tool::{RegistryEntry, ToolError};

use crate::{Ctx, ExecutionsPage, ListedTool, ToolList, ToolStats};

/// How many executions a page holds unless the client says otherwise, and at most.
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 200;
/// The stats window unless the client names one.
const DEFAULT_WINDOW: &str = "24h";

/// Each registered tool as it describes itself, with its component and whether it could be
/// reached.
pub async fn list_tools(ctx: &Ctx) -> Result<ToolList, ApiError> {
    let tools = describe_tools(ctx).await?.into_iter().map(|(entry, described)| ListedTool::new(entry, described));
    Ok(ToolList { tools: tools.collect() })
}

/// Every registered tool as it describes itself, or why it could not be described: one tool
/// being down must not hide the others.
pub async fn describe_tools(ctx: &Ctx) -> Result<Vec<(RegistryEntry, Result<ToolDescription, ToolFault>)>, ApiError> {
    let registry = ctx.config().registry()?;
    let mut tools = Vec::new();
    for entry in registry.entries() {
        let described = match ctx.config().tool(&entry.name, &entry.component)?.describe().await {
            Ok(description) => Ok(description),
            Err(e) => {
                gatehouse_platform::log_line("warn", &format!("describing {}: {e}", entry.component));
                Err(match e {
                    ToolError::Crashed(fault) | ToolError::BrokeContract(fault) => fault,
                    ToolError::Refused(refusal) => ToolFault::new(
                        FaultKind::BadAnswer,
                        format!("describe was answered with a refusal: {}", refusal.error),
                    ),
                })
            }
        };
        tools.push((entry.clone(), described));
    }
    Ok(tools)
}

/// What `GET /voice-tools/tools/:name/executions` may be asked.
#[derive(Debug, Clone, Default)]
pub struct ExecutionsQuery {
    pub limit: Option<String>,
    pub outcome: Option<String>,
    pub since: Option<String>,
    pub cursor: Option<String>,
}

/// One page of a tool's executions, newest first.
pub fn tool_executions(ctx: &Ctx, name: &str, query: &ExecutionsQuery) -> Result<ExecutionsPage, ApiError> {
    let tool = registered(ctx, name)?;
    let limit = page_limit(query.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let outcome =
        query.outcome.as_deref().map(|text| one_of("outcome", text, &Outcome::ALL, Outcome::as_str)).transpose()?;
    if let Some(since) = query.since.as_deref().filter(|s| !gatehouse_domain::is_rfc3339(s)) {
        return Err(invalid("since", &format!("{since:?} is not an RFC 3339 timestamp such as 2026-11-22T09:30:00Z")));
    }
    let after = match query.cursor.as_deref() {
        None => None,
        Some(text) => {
            Some(ExecutionCursor::parse(text).ok_or_else(|| invalid("cursor", "is not a cursor this route gave out"))?)
        }
    };
    let filter = ExecutionFilter {
        tenant: &ctx.grant()?.tenant,
        tool: &tool.name,
        outcome: outcome.map(Outcome::as_str),
        since: query.since.as_deref(),
        after,
        limit,
    };
    Ok(gatehouse_store::tool_executions(&*ctx.db()?, &filter)?)
}

/// A tool's stats over `window` (`24h` unless given): executions, outcomes, success rate,
/// p50/p95 duration, per operation, and its last error.
pub fn tool_stats(ctx: &Ctx, name: &str, window: Option<&str>) -> Result<ToolStats, ApiError> {
    let tool = registered(ctx, name)?;
    let window = window.unwrap_or(DEFAULT_WINDOW);
    let seconds = gatehouse_domain::parse_window(window)
        .ok_or_else(|| invalid("window", "must be a span such as 90s, 15m, 24h or 7d, at most 366d"))?;
    Ok(gatehouse_store::tool_stats(&*ctx.db()?, &ctx.grant()?.tenant, &tool.name, window, seconds)?)
}

/// Whether `name` is a registered tool's own name (not an alias), from the registry alone.
pub fn is_registered_name(ctx: &Ctx, name: &str) -> Result<bool, ApiError> {
    Ok(ctx.config().registry()?.entries().iter().any(|entry| entry.name == name))
}

/// The registry entry for a tool's name or alias; the history is kept under its name.
fn registered(ctx: &Ctx, name: &str) -> Result<RegistryEntry, ApiError> {
    let registry = ctx.config().registry()?;
    registry
        .resolve(name)
        .cloned()
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("I don't have a tool called {name}.")))
}

/// The `limit` of a paged route: `default` when absent, else a whole number from 1 to `max`.
pub(crate) fn page_limit(raw: Option<&str>, default: u32, max: u32) -> Result<u32, ApiError> {
    match raw {
        None => Ok(default),
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| invalid("limit", &format!("must be a whole number from 1 to {max}"))),
    }
}

/// A query parameter that must be one of `values`, spelt exactly as `name` spells them;
/// otherwise its problem lists them.
pub(crate) fn one_of<T: Copy>(
    field: &str,
    text: &str,
    values: &[T],
    name: fn(T) -> &'static str,
) -> Result<T, ApiError> {
    values.iter().copied().find(|&value| name(value) == text).ok_or_else(|| {
        let known: Vec<&str> = values.iter().map(|&value| name(value)).collect();
        invalid(field, &format!("must be one of: {}", known.join(", ")))
    })
}

/// A query parameter that is not valid: 400 `invalid_input` naming it in `fields`.
pub(crate) fn invalid(field: &str, problem: &str) -> ApiError {
    ApiError::invalid_input(format!("The {field} parameter is not valid.")).with_field(field, problem)
}

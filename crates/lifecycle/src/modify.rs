//! `PATCH /voice-tools/modify/:id`: apply a JSON merge patch to a PENDING call's parameters,
//! have the tool validate the result, and record every changed field.

use gatehouse_domain::contract::ToolRequest;
use gatehouse_domain::limits::{MAX_PARAMETERS_HISTORY_BYTES, MAX_REASON_CHARS, check_optional_length};
use gatehouse_domain::{ApiError, ToolCallId, changed_fields, merge_patch};
use gatehouse_store::{Caller, Correction, ParameterChange, Transition};
use gatehouse_tool::history::write_validated;
use serde::Deserialize;
use serde_json::Value;

use crate::create::tool_error;
use crate::rejection::{self, Action};
use crate::tool_ops::tool_request;
use crate::{Ctx, Modified};

/// How many corrections one call takes. Each is kept in the call's `parameters_history` and
/// `status_history`, which every status answer carries: a relay that loops on modify must not
/// make them grow without end. A conversation needs a handful; past this, cancel and ask again.
pub const MAX_CORRECTIONS: usize = 50;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModifyRequest {
    pub parameters: Value,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The corrected call: its parameters, the new sentence to read back, and what changed.
pub async fn modify(ctx: &Ctx, id: &ToolCallId, request: ModifyRequest) -> Result<Modified, ApiError> {
    if !request.parameters.is_object() {
        return Err(ApiError::invalid_input("The parameters must be a JSON object (a merge patch).")
            .with_field("parameters", "must be an object"));
    }
    check_optional_length("reason", request.reason.as_deref(), MAX_REASON_CHARS)?;
    let call = gatehouse_store::get_call(&*ctx.db()?, Caller::Key(ctx.grant()?), id)?
        .ok_or_else(|| rejection::not_found(id))?;
    if let Some(error) = rejection::check(Action::Modify, &call) {
        return Err(error);
    }
    if corrections(&call.status_history) >= MAX_CORRECTIONS {
        return Err(ApiError::invalid_state(
            format!(
                "This call has been corrected {MAX_CORRECTIONS} times, the most one call can be. \
                 Cancel it and ask for a new one."
            ),
            id.clone(),
            call.status,
        ));
    }
    let mut patched = Value::Object(call.parameters.clone());
    merge_patch(&mut patched, &request.parameters);
    let Value::Object(patched) = patched else {
        return Err(ApiError::internal().with_detail("a merge patch of an object gave a non-object"));
    };
    gatehouse_domain::limits::check_parameters_size(&patched)?;
    let asked = ToolRequest { parameters: patched, attempt: 1, ..tool_request(&call) };
    let validated = ctx
        .config()
        .tool(&call.function_name, &call.component)?
        .validate(&asked)
        .await
        .map_err(|e| tool_error(e, &call.function_name))?;
    if let Some(execution) = &validated.execution {
        write_validated(execution, Some(id), asked.trace_id.as_deref());
    }

    let changes = changed_fields(&call.parameters, &validated.parameters);
    let history: Vec<ParameterChange> = changes
        .iter()
        .map(|c| ParameterChange { field: c.field.clone(), old_value: c.old.clone(), new_value: c.new.clone() })
        .collect();
    if !changes.is_empty() {
        check_history_room(id, &call, &history, request.reason.as_deref())?;
        let db = &ctx.db()?;
        let correction = Correction {
            expected: &call.parameters,
            parameters: &validated.parameters,
            summary: &validated.summary,
            reason: request.reason.as_deref(),
            changes: &history,
        };
        let transition = gatehouse_store::modify_call(db, Caller::Key(ctx.grant()?), id, &correction)?;
        if let Transition::Rejected { current } = &transition
            && rejection::check(Action::Modify, current).is_none()
        {
            return Err(ApiError::invalid_state(
                "The call was changed by someone else at the same time. Please read it again and retry.",
                id.clone(),
                current.status,
            ));
        }
        if !matches!(transition, Transition::Applied { .. }) {
            return Err(rejection::refuse(db, Action::Modify, id, transition));
        }
    }
    Ok(Modified::new(id.clone(), validated.parameters, validated.summary, changes))
}

/// Refuses a correction that would take the call's `parameters_history` past its bound. (The
/// update is conditional on the parameters read here, so no concurrent correction can have
/// added to the history this counted.)
fn check_history_room(
    id: &ToolCallId,
    call: &gatehouse_store::ToolCall,
    history: &[ParameterChange],
    reason: Option<&str>,
) -> Result<(), ApiError> {
    /// Each entry also gets a timestamp and the reason; a generous allowance for the first.
    const PER_ENTRY: usize = 64;
    let stored = serde_json::to_string(&call.parameters_history).map_or(0, |text| text.len());
    let added = serde_json::to_string(history).map_or(0, |text| text.len())
        + history.len() * (PER_ENTRY + reason.map_or(0, str::len));
    if stored + added <= MAX_PARAMETERS_HISTORY_BYTES {
        return Ok(());
    }
    Err(ApiError::invalid_state(
        format!(
            "This call's corrections have reached the most one call can keep ({} KB). \
             Cancel it and ask for a new one.",
            MAX_PARAMETERS_HISTORY_BYTES / 1024
        ),
        id.clone(),
        call.status,
    ))
}

/// How many times the call was corrected: each applied modify added one MODIFIED entry. (The
/// update that applies a correction is conditional on the parameters it was computed from, so
/// two concurrent corrections cannot both pass this count and both land.)
fn corrections(status_history: &[Value]) -> usize {
    status_history.iter().filter(|entry| entry["status"] == "MODIFIED").count()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_modified_entries_count_as_corrections() {
        let history = [json!({"status": "PENDING"}), json!({"status": "MODIFIED"}), json!({"status": "MODIFIED"})];
        assert_eq!(corrections(&history), 2);
        assert_eq!(corrections(&[]), 0);
    }
}

//! Turning a transition that did not apply into the error SPEC §5 names: 404 for an unknown
//! id, 410 for an expired call, 409 naming the current state otherwise.

use gatehouse_domain::{ApiError, ErrorCode, Status, ToolCallId};
use gatehouse_store::{Connection, ToolCall, Transition};

/// What an operation does to a call, for its error sentences.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Action {
    Modify,
    Confirm,
    Resume,
    Cancel,
}

impl Action {
    fn allowed_from(self, call: &ToolCall) -> bool {
        match self {
            Action::Modify | Action::Confirm => call.status == Status::Pending,
            Action::Resume => call.status == Status::Prepared,
            Action::Cancel => match call.status {
                Status::Pending | Status::Prepared => true,
                Status::Executing => call.side_effect_started_at.is_none(),
                _ => false,
            },
        }
    }

    fn refusal(self, call: &ToolCall) -> ApiError {
        let id = call.tool_call_id.clone();
        if call.status == Status::Expired {
            return ApiError::expired(id);
        }
        let message = match self {
            Action::Modify => "Cannot modify non-pending tool call".to_owned(),
            Action::Confirm => "Cannot confirm non-pending tool call".to_owned(),
            Action::Resume => "Cannot resume: the call is not waiting at its checkpoint".to_owned(),
            Action::Cancel if call.status == Status::Executing => {
                return ApiError::new(
                    ErrorCode::SideEffectStarted,
                    "It's too late to cancel: that action is already under way.",
                )
                .with_tool_call_id(id)
                .with_call_status(call.status);
            }
            Action::Cancel => format!("Cannot cancel: the call is already {}", call.status),
        };
        ApiError::invalid_state(message, id, call.status)
    }
}

pub(crate) fn not_found(id: &ToolCallId) -> ApiError {
    ApiError::not_found("No tool call has that id.").with_tool_call_id(id.clone())
}

/// The error for a transition that did not apply. A rejection can come from a statement
/// snapshot taken just before a concurrent change committed; if that snapshot still says the
/// action was allowed, the call is read again so the error names the state that won.
pub(crate) fn refuse(db: &Connection, action: Action, id: &ToolCallId, transition: Transition) -> ApiError {
    let current = match transition {
        Transition::NotFound => return not_found(id),
        Transition::Applied { after, .. } => *after,
        Transition::Rejected { current } => *current,
    };
    let current = if action.allowed_from(&current) {
        match gatehouse_store::get_call(db, id) {
            Ok(Some(fresh)) => fresh,
            Ok(None) => return not_found(id),
            Err(e) => return e.into(),
        }
    } else {
        current
    };
    action.refusal(&current)
}

/// The error for a call read before acting on it, or `None` if the action may go ahead.
pub(crate) fn check(action: Action, call: &ToolCall) -> Option<ApiError> {
    (!action.allowed_from(call)).then(|| action.refusal(call))
}

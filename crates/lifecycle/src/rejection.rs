//! Turning a transition that did not apply into the API's error (docs/architecture.md,
//! "Errors"): 404 for an unknown id, 410 for an expired call, 409 naming the current state
//! otherwise.

use gatehouse_domain::{ApiError, ErrorCode, Status, ToolCallId};
use gatehouse_store::{Caller, Connection, ToolCall, Transition};

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
    // A rejection names a call the caller could see, so Gatehouse may read it again.
    let current = if action.allowed_from(&current) {
        match gatehouse_store::get_call(db, Caller::Gatehouse, id) {
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

#[cfg(test)]
mod tests {
    use gatehouse_domain::ErrorCode;
    use serde_json::json;

    use super::*;

    fn call(status: Status, side_effect_started: bool) -> ToolCall {
        let call = json!({
            "tool_call_id": "tc_0123456789ab", "session_id": "s1", "connection_id": null, "intent_id": null,
            "function_name": "send_email", "tool": "gmail", "parameters": {}, "parameters_history": [],
            "status": status, "status_history": [], "summary": null, "checkpoint": null, "result": null,
            "error_message": null, "voice_response": null, "callback_url": null, "expires_at": null,
            "attempts": 1, "side_effect_started_at": side_effect_started.then_some("2026-11-24T00:00:00Z"),
            "trace_id": null, "created_at": "2026-11-24T00:00:00Z", "confirmed_at": null, "prepared_at": null,
            "executed_at": null, "completed_at": null, "execution_time_ms": null,
        });
        serde_json::from_value(call).expect("a call")
    }

    #[test]
    fn each_action_needs_its_state() {
        for status in Status::ALL {
            let c = call(status, false);
            assert_eq!(check(Action::Modify, &c).is_none(), status == Status::Pending, "modify from {status}");
            assert_eq!(check(Action::Confirm, &c).is_none(), status == Status::Pending, "confirm from {status}");
            assert_eq!(check(Action::Resume, &c).is_none(), status == Status::Prepared, "resume from {status}");
            let cancellable = matches!(status, Status::Pending | Status::Prepared | Status::Executing);
            assert_eq!(check(Action::Cancel, &c).is_none(), cancellable, "cancel from {status}");
        }
    }

    #[test]
    fn a_cancel_after_the_side_effect_started_says_it_is_too_late() {
        let error = check(Action::Cancel, &call(Status::Executing, true)).map(|e| (e.code, e.http_status()));
        assert_eq!(error, Some((ErrorCode::SideEffectStarted, 409)));
    }

    #[test]
    fn an_expired_call_is_gone_and_other_refusals_name_the_state() {
        for action in [Action::Modify, Action::Confirm, Action::Resume, Action::Cancel] {
            let expired = check(action, &call(Status::Expired, false)).map(|e| e.http_status());
            assert_eq!(expired, Some(410), "{action:?}");
            let settled = check(action, &call(Status::Completed, false));
            assert_eq!(settled.map(|e| (e.code, e.http_status())), Some((ErrorCode::InvalidState, 409)), "{action:?}");
        }
    }

    #[test]
    fn a_losing_race_answers_the_state_that_won() {
        // The statement's snapshot no longer allows the action: that state is the answer,
        // without another read (which `refuse` would need a database for).
        let lost = Transition::Rejected { current: Box::new(call(Status::Cancelled, false)) };
        let current = match lost {
            Transition::Rejected { current } => *current,
            _ => unreachable!(),
        };
        assert!(!Action::Confirm.allowed_from(&current));
        let error = Action::Confirm.refusal(&current);
        assert_eq!(
            (error.code, error.message.as_str()),
            (ErrorCode::InvalidState, "Cannot confirm non-pending tool call")
        );
    }
}

//! The `/_fake/` routes: what the library methods do, over HTTP, for other processes.
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use hyper::StatusCode;
use serde_json::{Value, json};

use crate::faults::Fault;
use crate::google_error::GoogleError;
use crate::mailbox::{StoredDraft, StoredMessage};
use crate::responses::{self, Answer};
use crate::routes::{ControlCall, Incoming};
use crate::state::Shared;

pub(crate) fn handle(shared: &Shared, call: &ControlCall, request: &Incoming) -> Answer {
    match call {
        ControlCall::Messages => {
            let sent = shared.lock().mailbox.sent();
            responses::json(StatusCode::OK, &Value::Array(sent.iter().map(message_view).collect()))
        }
        ControlCall::Drafts => {
            let drafts = shared.lock().mailbox.drafts();
            responses::json(StatusCode::OK, &Value::Array(drafts.iter().map(draft_view).collect()))
        }
        ControlCall::Requests => {
            let requests = shared.lock().requests.clone();
            responses::json(StatusCode::OK, &json!(requests))
        }
        ControlCall::Faults => {
            let armed = shared.lock().faults.armed();
            responses::json(StatusCode::OK, &json!(armed))
        }
        ControlCall::ArmFault => arm_fault(shared, request),
        ControlCall::ExpireTokens => {
            let expired = shared.lock().tokens.expire_all();
            responses::json(StatusCode::OK, &json!({"expired_tokens": expired}))
        }
        ControlCall::Reset => {
            shared.lock().reset();
            responses::json(StatusCode::OK, &json!({"reset": true}))
        }
        ControlCall::Eml(id) => {
            let raw = shared.lock().mailbox.message(id).map(|message| message.raw.clone());
            match raw {
                Some(raw) => responses::with_type(StatusCode::OK, "message/rfc822", raw),
                None => GoogleError::not_found().into_answer(),
            }
        }
    }
}

fn arm_fault(shared: &Shared, request: &Incoming) -> Answer {
    let fault: Fault = match serde_json::from_slice(&request.body) {
        Ok(fault) => fault,
        Err(e) => return GoogleError::invalid_argument(format!("Invalid fault: {e}")).into_answer(),
    };
    if let Some(problem) = fault.problem() {
        return GoogleError::invalid_argument(format!("Invalid fault: {problem}")).into_answer();
    }
    shared.lock().faults.arm(fault.clone());
    responses::json(StatusCode::OK, &json!(fault))
}

fn message_view(message: &StoredMessage) -> Value {
    json!({
        "id": message.id,
        "thread_id": message.thread_id,
        "label_ids": message.label_ids,
        "message_id_header": message.message_id_header,
        "raw": String::from_utf8_lossy(&message.raw),
        "raw_base64url": URL_SAFE.encode(&message.raw),
        "created_at_ms": message.created_at_ms,
    })
}

fn draft_view(draft: &StoredDraft) -> Value {
    json!({"id": draft.id, "message": message_view(&draft.message)})
}
